#!/usr/bin/env bash
# Minikube quick path: build the images inside Minikube's Docker daemon and deploy OpenAgent
# (Redis, the master, the weather agent, the agent pool, the agents' NetworkPolicy) to the
# namespace "agents".
#
#   minikube start && ./start.sh
#
# Needs minikube (running, with the docker container runtime), kubectl and the docker client.
# Talks to the kube context of the Minikube profile (MINIKUBE_PROFILE, default "minikube"),
# never to whatever context happens to be current. OPENAI_API_KEY and OPENAGENT_API_KEY come
# from the environment or .env (created from .env.example with a fresh OPENAGENT_API_KEY when
# missing) and go into the Secret openagent-secrets, with the password the cluster's Redis
# requires (K8S_REDIS_PASSWORD, generated into .env once). Rerun it after a code change: it rebuilds
# the images and restarts the Deployments that use them. ROLLOUT_TIMEOUT (default 180s)
# bounds each wait.
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "${BASH_SOURCE[0]}")/scripts/_common.sh"
cd "$ROOT"

NAMESPACE=agents
PROFILE=${MINIKUBE_PROFILE:-minikube}
ROLLOUT_TIMEOUT=${ROLLOUT_TIMEOUT:-180s}
K8S_DIR=deploy/k8s
# image tag -> Dockerfile; the tags are the images named in deploy/k8s and the master's
# OPENAGENT_K8S_AGENT_IMAGE default.
IMAGES=(
  "openagent/master:latest=deploy/docker/master.Dockerfile"
  "openagent/agent-runtime:latest=deploy/docker/agent-runtime.Dockerfile"
  "openagent/agent-pool-runner:latest=deploy/docker/agent-pool-runner.Dockerfile"
)

for tool in minikube kubectl docker; do
  command -v "$tool" >/dev/null 2>&1 ||
    die "'$tool' not found on PATH; install it (https://minikube.sigs.k8s.io/docs/start/ has minikube and kubectl; docker needs only its client)"
done

host_state=$(minikube -p "$PROFILE" status --format '{{.Host}}' 2>/dev/null || true)
if [[ $host_state != Running ]]; then
  die "minikube profile '$PROFILE' is not running (host: ${host_state:-unknown}); start it with 'minikube start${MINIKUBE_PROFILE:+ -p $PROFILE}' and rerun"
fi

kube() { kubectl --context "$PROFILE" "$@"; }
kube get namespace default >/dev/null 2>&1 ||
  die "kubectl cannot reach the cluster of context '$PROFILE'; check 'kubectl --context $PROFILE get nodes'"

# Build straight into Minikube's Docker daemon, so the Pods find the images with
# imagePullPolicy: Never (OPENAGENT_K8S_AGENT_IMAGE_PULL_POLICY).
docker_env=$(minikube -p "$PROFILE" docker-env --shell bash) ||
  die "'minikube docker-env' failed; it needs the docker container runtime (minikube start --container-runtime=docker)"
eval "$docker_env"

for entry in "${IMAGES[@]}"; do
  tag=${entry%%=*}
  dockerfile=${entry#*=}
  log "building $tag from $dockerfile"
  docker build -f "$dockerfile" -t "$tag" . || die "docker build of $tag failed (output above)"
done

if [[ ! -f .env ]]; then
  [[ -f .env.example ]] || die ".env.example is missing; cannot create .env"
  # 32 random bytes as hex: safe in a sed replacement and in .env.
  api_key=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
  (umask 077 && sed "s|^OPENAGENT_API_KEY=.*\$|OPENAGENT_API_KEY=$api_key|" .env.example >.env)
  log "created .env from .env.example with a fresh OPENAGENT_API_KEY; put your OPENAI_API_KEY in it"
fi
load_env_file .env
# The cluster's Redis requires a password (deploy/k8s/redis.yaml): generated once into .env
# (K8S_REDIS_PASSWORD, apart from REDIS_URL, which is the host's Redis), so a rerun keeps the
# password the running Redis was started with.
if [[ -z ${K8S_REDIS_PASSWORD:-} ]]; then
  K8S_REDIS_PASSWORD=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
  # A leading newline: the last line of .env may lack its own.
  (umask 077 && printf '\nK8S_REDIS_PASSWORD=%s\n' "$K8S_REDIS_PASSWORD" >>.env)
  log "added a fresh K8S_REDIS_PASSWORD to .env (the password of the cluster's Redis)"
fi

log "applying $K8S_DIR/namespace.yaml"
kube apply -f "$K8S_DIR/namespace.yaml"

# The values go through pipes, not the command line, so they never show in the process list.
log "creating/updating the Secret openagent-secrets from .env (OPENAI_API_KEY, OPENAGENT_API_KEY, REDIS_PASSWORD)"
kube -n "$NAMESPACE" create secret generic openagent-secrets \
  --from-file=OPENAI_API_KEY=<(printf '%s' "${OPENAI_API_KEY:-}") \
  --from-file=OPENAGENT_API_KEY=<(printf '%s' "${OPENAGENT_API_KEY:-}") \
  --from-file=REDIS_PASSWORD=<(printf '%s' "${K8S_REDIS_PASSWORD:?}") \
  --dry-run=client -o yaml | kube apply -f -

# wait_rollout NAME: wait until deployment/NAME is rolled out, or show its Pods and fail.
wait_rollout() {
  log "waiting for deployment/$1 (timeout $ROLLOUT_TIMEOUT)"
  if ! kube -n "$NAMESPACE" rollout status "deployment/$1" --timeout "$ROLLOUT_TIMEOUT"; then
    kube -n "$NAMESPACE" get pods -l "app.kubernetes.io/name=$1" -o wide >&2 || true
    die "deployment/$1 did not become ready within $ROLLOUT_TIMEOUT; see 'kubectl --context $PROFILE -n $NAMESPACE describe deployment/$1' and 'kubectl --context $PROFILE -n $NAMESPACE logs deployment/$1'"
  fi
}

# apply_deployment NAME FILE: apply FILE and wait for deployment/NAME. When the Deployment
# already existed, restart it: the image tags do not change, so the freshly built image would
# not be picked up otherwise.
apply_deployment() {
  local name=$1 file=$2 existed=""
  kube -n "$NAMESPACE" get deployment "$name" >/dev/null 2>&1 && existed=1
  log "applying $file"
  kube apply -f "$file"
  if [[ -n $existed ]]; then
    kube -n "$NAMESPACE" rollout restart "deployment/$name"
  fi
  wait_rollout "$name"
}

log "applying $K8S_DIR/config.yaml, $K8S_DIR/rbac.yaml, $K8S_DIR/network-policy.yaml, $K8S_DIR/redis.yaml"
kube apply -f "$K8S_DIR/config.yaml" -f "$K8S_DIR/rbac.yaml" -f "$K8S_DIR/network-policy.yaml" \
  -f "$K8S_DIR/redis.yaml"
wait_rollout redis
# The agent's first connection fails fast, so start it once the master answers.
apply_deployment openagent-master "$K8S_DIR/master.yaml"
apply_deployment weather-agent "$K8S_DIR/weather-agent.yaml"
apply_deployment agent-pool "$K8S_DIR/agent-pool.yaml"

cat <<EOF

OpenAgent is running in minikube (profile $PROFILE, namespace $NAMESPACE):
  redis, openagent-master (Service openagent-master:8000), weather-agent, agent-pool
  (the sandbox's pool runners; agents may reach only the master and DNS: network-policy.yaml)

Reach the master from this machine (keep it running in another terminal):
  kubectl --context $PROFILE -n $NAMESPACE port-forward svc/openagent-master 8000:8000
  KEY=\$(grep ^OPENAGENT_API_KEY= .env | cut -d= -f2)
  curl -s -H "Authorization: Bearer \$KEY" http://127.0.0.1:8000/agents

Or run the master on the host instead (Kubernetes sandbox):
  OPENAGENT_K8S_SANDBOX=1 python -m master --host 0.0.0.0 --port 8000
and set OPENAGENT_K8S_MASTER_WS (or pass master_ws from the UI) to a WebSocket URL that
resolves from inside Pods; the default ws://host.minikube.internal:8000/ws reaches a master on
this host (see the hint of GET /internal/sandbox/status). The NetworkPolicy admits only the
in-cluster master: give agents an egress rule for the host's address when your network plugin
enforces it.
EOF
if [[ -z ${OPENAGENT_API_KEY:-} ]]; then
  echo "Note: OPENAGENT_API_KEY is empty: the master in the cluster refuses to start without one"
  echo "      (set it in .env, or OPENAGENT_ALLOW_NO_AUTH=true to let everyone who reaches it be an administrator)."
fi
if [[ -z ${OPENAI_API_KEY:-} ]]; then
  echo "Note: OPENAI_API_KEY is empty: POST /query answers 503 until you set it in .env and rerun ./start.sh."
fi
