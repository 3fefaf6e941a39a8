#!/usr/bin/env bash
# Run the whole system locally: Redis, the master (uvicorn) and the in-memory weather agent.
#
#   ./scripts/run.sh
#
# Creates .venv and .env on first use (with a fresh OPENAGENT_API_KEY), starts Redis if it
# is not running, starts the master and waits for GET /health, starts
# sample_agents/action_weather.py, prints curl examples, then follows the logs (.run/*.log)
# until Ctrl-C, which stops the master and the agent.
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
cd "$ROOT"

ensure_venv master

if [[ ! -f .env ]]; then
  [[ -f .env.example ]] || die ".env.example is missing; cannot create .env"
  api_key=$("$VENV_PY" -c 'import secrets;print(secrets.token_urlsafe(32))')
  # token_urlsafe uses only [A-Za-z0-9_-], safe in a sed replacement.
  (umask 077 && sed "s|^OPENAGENT_API_KEY=.*\$|OPENAGENT_API_KEY=$api_key|" .env.example >.env)
  log "created .env from .env.example with a fresh OPENAGENT_API_KEY; put your OPENAI_API_KEY in it"
fi
load_env_file .env

ensure_redis

MASTER_HOST=${MASTER_HOST:-127.0.0.1}
MASTER_PORT=${MASTER_PORT:-8000}
# Where local clients reach the master (a wildcard bind address is not connectable).
case $MASTER_HOST in
  0.0.0.0 | "") client_host=127.0.0.1 ;;
  :: | "[::]") client_host="[::1]" ;;
  *:*) client_host="[$MASTER_HOST]" ;;
  *) client_host=$MASTER_HOST ;;
esac
base_url="http://$client_host:$MASTER_PORT"
ws_url="ws://$client_host:$MASTER_PORT/ws"
api_key=${OPENAGENT_API_KEY:-}

# http_status URL [KEY [TEXT]]: prints the HTTP status of GET URL (000 when unreachable), with
# "Authorization: Bearer KEY" when KEY is not empty. Succeeds when the status is 200 and, if
# TEXT is given, the body contains TEXT.
http_status() {
  "$VENV_PY" - "$@" <<'PY'
import sys
import urllib.error
import urllib.request

url, key, text = (sys.argv[1:] + ["", ""])[:3]
request = urllib.request.Request(url)
if key:
    request.add_header("Authorization", f"Bearer {key}")
try:
    with urllib.request.urlopen(request, timeout=2) as response:
        print(response.status)
        body = response.read().decode("utf-8", "replace")
        sys.exit(0 if response.status == 200 and text in body else 1)
except urllib.error.HTTPError as exc:
    print(exc.code)
except OSError:
    print("000")
sys.exit(1)
PY
}

if [[ $(http_status "$base_url/health" || true) != 000 ]]; then
  die "something already answers at $base_url; stop it or set MASTER_PORT in .env"
fi

mkdir -p "$RUN_DIR"
master_log="$RUN_DIR/master.log"
agent_log="$RUN_DIR/weather-agent.log"
: >"$master_log"
: >"$agent_log"

master_pid=""
agent_pid=""
tail_pid=""
# shellcheck disable=SC2317  # invoked by the EXIT trap
stop_children() {
  trap - EXIT INT TERM
  local pids=() pid
  for pid in "$agent_pid" "$master_pid" "$tail_pid"; do
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && pids+=("$pid")
  done
  ((${#pids[@]})) || return 0
  log "stopping (pids ${pids[*]})"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  local deadline=$((SECONDS + 10)) alive
  while ((SECONDS < deadline)); do
    alive=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    ((${#alive[@]})) || return 0
    sleep 0.2
  done
  warn "killing ${alive[*]} after 10 s"
  kill -KILL "${alive[@]}" 2>/dev/null || true
}
trap stop_children EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# uvicorn closes the connection (1009) on frames over --ws-max-size (default 16 MiB) before
# the master sees them; leave room so that frames just over OPENAGENT_WS_MAX_MESSAGE_BYTES get
# the protocol's message_too_large error instead.
ws_limit=${OPENAGENT_WS_MAX_MESSAGE_BYTES:-16777216}
[[ $ws_limit =~ ^[0-9]+$ ]] || die "OPENAGENT_WS_MAX_MESSAGE_BYTES must be a number of bytes, got '$ws_limit'"
ws_max_size=$((ws_limit * 2))

log "starting the master: uvicorn master.app:app --host $MASTER_HOST --port $MASTER_PORT (log: .run/master.log)"
"$VENV_PY" -m uvicorn master.app:app --host "$MASTER_HOST" --port "$MASTER_PORT" --ws-max-size "$ws_max_size" \
  >>"$master_log" 2>&1 </dev/null &
master_pid=$!

deadline=$((SECONDS + 30))
until http_status "$base_url/health" >/dev/null; do
  if ! kill -0 "$master_pid" 2>/dev/null; then
    tail -n 40 "$master_log" >&2
    die "the master exited during startup (log above, full log: .run/master.log)"
  fi
  if ((SECONDS >= deadline)); then
    tail -n 40 "$master_log" >&2
    die "the master did not answer GET $base_url/health with 200 within 30 s (log above, full log: .run/master.log)"
  fi
  sleep 0.3
done
log "master is up at $base_url"

log "starting the weather agent: python sample_agents/action_weather.py (log: .run/weather-agent.log)"
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" MASTER_WS="$ws_url" \
  "$VENV_PY" sample_agents/action_weather.py >>"$agent_log" 2>&1 </dev/null &
agent_pid=$!

# GET /agents lists connected agents; wait (bounded) until weather-agent shows up.
deadline=$((SECONDS + 15))
until http_status "$base_url/agents" "$api_key" weather-agent >/dev/null; do
  if ! kill -0 "$agent_pid" 2>/dev/null || ((SECONDS >= deadline)); then
    tail -n 20 "$agent_log" >&2
    warn "weather-agent has not registered (log above, full log: .run/weather-agent.log); the master keeps running"
    break
  fi
  sleep 0.3
done

auth_header=""
if [[ -n $api_key ]]; then
  auth_header=" -H 'Authorization: Bearer $api_key'"
fi
cat <<EOF

OpenAgent is running:
  master         $base_url   (pid $master_pid, log .run/master.log)   WebSocket: $ws_url
  weather-agent  sample_agents/action_weather.py   (pid $agent_pid, log .run/weather-agent.log)
  redis          ${REDIS_URL:-redis://127.0.0.1:6379}

Try it:
  curl -s$auth_header $base_url/agents
  curl -s$auth_header -H 'Content-Type: application/json' \\
       -d '{"query": "What is the weather in Paris?"}' $base_url/query
  PYTHONPATH=. .venv/bin/python sample_agents/query_demo.py

EOF
if [[ -z $api_key ]]; then
  echo "Note: OPENAGENT_API_KEY is empty in .env, so the master accepts requests without a key."
fi
if [[ -z ${OPENAI_API_KEY:-} && -z ${OPENAI_BASE_URL:-} ]]; then
  echo "Note: /query needs an LLM: set OPENAI_API_KEY in .env (or OPENAI_BASE_URL for an"
  echo "      OpenAI-compatible server such as Ollama, vLLM, llama.cpp), then rerun."
else
  echo "Note: /query uses OPENAI_API_KEY${OPENAI_BASE_URL:+ against OPENAI_BASE_URL=$OPENAI_BASE_URL} from .env."
fi
echo "Following the logs below; Ctrl-C stops the master and the agent."
echo

tail -n +1 -F "$master_log" "$agent_log" &
tail_pid=$!

agent_reported=""
while kill -0 "$master_pid" 2>/dev/null; do
  if [[ -z $agent_reported ]] && ! kill -0 "$agent_pid" 2>/dev/null; then
    agent_status=0
    wait "$agent_pid" || agent_status=$?
    warn "weather-agent exited with status $agent_status (see .run/weather-agent.log); the master keeps running"
    agent_reported=1
  fi
  sleep 1
done
master_status=0
wait "$master_pid" || master_status=$?
master_pid=""
die "the master exited with status $master_status (see .run/master.log)"
