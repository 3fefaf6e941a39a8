#!/usr/bin/env bash
# Run the whole system locally: Redis, the master (uvicorn), the weather agent and the offline
# calculator agent, and, when no LLM is configured, the demo LLM.
#
#   ./scripts/run.sh
#
# Creates .venv and .env on first use (with a fresh OPENAGENT_API_KEY), starts Redis if it
# is not running. When neither OPENAI_API_KEY nor OPENAI_BASE_URL is set (environment or .env),
# starts the demo LLM (python -m openagent.testing --demo: picks tools by matching words, not
# a model) and points the master at it. Starts the master and waits for GET /health, starts
# sample_agents/action_weather.py, sample_agents/calculator.py and the RAG system agents
# (system_agents/rag_stack_ws.py: document extractor and indexer), prints curl examples, then
# follows the logs (.run/*.log) until Ctrl-C, which stops everything it started.
# MASTER_PORT (and MASTER_HOST) move the master; MASTER_BASE_URL and MASTER_WS follow them
# unless set explicitly. A MASTER_PORT from the environment is written into .env, where the
# openagent command reads it.
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
cd "$ROOT"

ensure_venv master,rag
if command -v npm >/dev/null 2>&1; then
  ui_build_if_stale
else
  warn "npm not found: the web UI is not built (install Node.js 20+ for http://.../ui/)"
fi

if [[ ! -f .env ]]; then
  [[ -f .env.example ]] || die ".env.example is missing; cannot create .env"
  api_key=$("$VENV_PY" -c 'import secrets;print(secrets.token_urlsafe(32))')
  # Redis requires a password: agent code that reaches its port cannot use it. The Redis that
  # ensure_redis starts gets it (--requirepass), on a free port from 6380 (a Redis without a
  # password may already hold 6379).
  redis_url=$("$VENV_PY" - <<'PY'
import secrets
import socket

for port in range(6380, 6480):
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", port)) != 0:
            break
print(f"redis://:{secrets.token_urlsafe(32)}@127.0.0.1:{port}/0")
PY
  )
  # token_urlsafe uses only [A-Za-z0-9_-], safe in a sed replacement.
  (umask 077 && sed -e "s|^OPENAGENT_API_KEY=.*\$|OPENAGENT_API_KEY=$api_key|" \
    -e "s|^REDIS_URL=.*\$|REDIS_URL=$redis_url|" .env.example >.env)
  log "created .env from .env.example with a fresh OPENAGENT_API_KEY and Redis password; put your OPENAI_API_KEY in it"
fi
# The .env holds the master's secrets: readable by its owner only (agent code runs as other users).
[[ -O .env ]] && chmod 600 .env
load_env_file .env
if [[ ${REDIS_URL:-} != *:*@* ]]; then
  warn "REDIS_URL has no password: any local process, agent code included, can use Redis; put one in it (redis://:PASSWORD@host:port) and Redis started by this script requires it"
fi

ensure_redis

# Sets MASTER_HOST, MASTER_PORT, base_url and ws_url (local), exports MASTER_BASE_URL and MASTER_WS.
master_urls
save_master_port .env
api_key=${OPENAGENT_API_KEY:-}
demo_llm=""
llm_configured || demo_llm=1

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
llm_log="$RUN_DIR/demo-llm.log"
: >"$master_log"

master_pid=""
llm_pid=""
tail_pid=""
# The sample agents: id, script, pid (filled in by start_agent).
# rag_stack_ws registers document-extractor-agent and document-indexer-agent (waited for by the latter).
agent_ids=(weather-agent calculator-agent document-indexer-agent)
agent_scripts=(sample_agents/action_weather.py sample_agents/calculator.py system_agents/rag_stack_ws.py)
agent_pids=("" "" "")
# shellcheck disable=SC2317,SC2329  # invoked by the EXIT trap
stop_children() {
  trap - EXIT INT TERM
  local pids=() pid
  for pid in "${agent_pids[@]}" "$master_pid" "$llm_pid" "$tail_pid"; do
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

# Every wait for something this script started (the demo LLM, the master, the agents) ends when
# that process exits, or after OPENAGENT_START_TIMEOUT_SECONDS (default 180): a slow machine (a
# busy CI runner, a laptop under load) may take a minute to import and start a Python process.
start_timeout=${OPENAGENT_START_TIMEOUT_SECONDS:-180}
[[ $start_timeout =~ ^[1-9][0-9]*$ ]] ||
  die "OPENAGENT_START_TIMEOUT_SECONDS must be a whole number of seconds > 0 (got '$start_timeout')"

if [[ -n $demo_llm ]]; then
  : >"$llm_log"
  log "no LLM configured (OPENAI_API_KEY and OPENAI_BASE_URL are empty): starting the demo LLM (log: .run/demo-llm.log)"
  # OPENAGENT_DEMO_LLM_PORT picks its port; unset or 0: any free one.
  "$VENV_PY" -m openagent.testing --demo --port "${OPENAGENT_DEMO_LLM_PORT:-0}" >>"$llm_log" 2>&1 </dev/null &
  llm_pid=$!
  llm_url=""
  deadline=$((SECONDS + start_timeout))
  until llm_url=$(grep -o -m1 'http://127\.0\.0\.1:[0-9]*/v1' "$llm_log"); do
    if ! kill -0 "$llm_pid" 2>/dev/null || ((SECONDS >= deadline)); then
      cat "$llm_log" >&2
      die "the demo LLM did not start (log above, .run/demo-llm.log)"
    fi
    sleep 0.2
  done
  export OPENAI_BASE_URL=$llm_url OPENAI_API_KEY=demo-llm-needs-no-key
  # Every model the master shows (orchestrator, picker, sessions, builder) is the demo's own id.
  export OPENAGENT_CHAT_MODELS=openagent-demo ORCHESTRATOR_MODEL=openagent-demo \
    AGENT_GENERATOR_MODEL=openagent-demo SUMMARIZER_MODEL=openagent-demo
  log "demo LLM is up at $llm_url"
fi

# python -m master: uvicorn with the server limits of the settings (OPENAGENT_WS_MAX_MESSAGE_BYTES
# as the WebSocket frame limit, so that the server never buffers a larger frame).
log "starting the master: python -m master --host $MASTER_HOST --port $MASTER_PORT (log: .run/master.log)"
"$VENV_PY" -m master --host "$MASTER_HOST" --port "$MASTER_PORT" >>"$master_log" 2>&1 </dev/null &
master_pid=$!

# Wait for GET /health while the master is alive (a master that exits stops the wait at once).
deadline=$((SECONDS + start_timeout))
next_note=$((SECONDS + 15))
until http_status "$base_url/health" >/dev/null; do
  if ! kill -0 "$master_pid" 2>/dev/null; then
    tail -n 40 "$master_log" >&2
    die "the master exited during startup (log above, full log: .run/master.log)"
  fi
  if ((SECONDS >= deadline)); then
    tail -n 40 "$master_log" >&2
    die "the master did not answer GET $base_url/health within ${start_timeout} s (log above, full log: .run/master.log); on a slow machine raise OPENAGENT_START_TIMEOUT_SECONDS"
  fi
  if ((SECONDS >= next_note)); then
    log "still waiting for the master ($((deadline - SECONDS)) s left; last log line: $(tail -n 1 "$master_log" | cut -c1-160))"
    next_note=$((SECONDS + 15))
  fi
  sleep 0.3
done
log "master is up at $base_url"

# start_agent INDEX: start sample agent number INDEX of agent_ids/agent_scripts, log in .run/<id>.log.
start_agent() {
  local id=${agent_ids[$1]} script=${agent_scripts[$1]}
  : >"$RUN_DIR/$id.log"
  log "starting $id: python $script (log: .run/$id.log)"
  PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" MASTER_WS="$ws_url" \
    "$VENV_PY" "$script" >>"$RUN_DIR/$id.log" 2>&1 </dev/null &
  agent_pids[$1]=$!
}

for index in "${!agent_ids[@]}"; do start_agent "$index"; done

# GET /agents lists connected agents; wait (bounded) until each shows up.
deadline=$((SECONDS + start_timeout))
for index in "${!agent_ids[@]}"; do
  id=${agent_ids[$index]}
  until http_status "$base_url/agents" "$api_key" "\"$id\"" >/dev/null; do
    if ! kill -0 "${agent_pids[$index]}" 2>/dev/null || ((SECONDS >= deadline)); then
      tail -n 20 "$RUN_DIR/$id.log" >&2
      warn "$id has not registered (log above, full log: .run/$id.log); the master keeps running"
      break
    fi
    sleep 0.3
  done
done

auth_header=""
if [[ -n $api_key ]]; then
  auth_header=" -H 'Authorization: Bearer $api_key'"
fi
cat <<EOF

OpenAgent is running:
  web UI            $base_url/ui/   (admin API key: ${api_key:-none, auth is off})
  master            $base_url   (pid $master_pid, log .run/master.log)   WebSocket: $ws_url
  MCP server        $base_url/mcp   (for MCP clients: docs/guides/mcp-clients.md)
  A2A agents        $base_url/a2a, $base_url/a2a/agents/<agent_id>   (docs/guides/a2a-clients.md)
  OpenAI API        $base_url/v1   (model "openagent"; docs/guides/openai-clients.md)
  weather-agent     sample_agents/action_weather.py   (pid ${agent_pids[0]}, log .run/weather-agent.log; needs the internet)
  calculator-agent  sample_agents/calculator.py   (pid ${agent_pids[1]}, log .run/calculator-agent.log; offline)
  RAG agents        system_agents/rag_stack_ws.py: document-extractor-agent + document-indexer-agent
                    (pid ${agent_pids[2]}, log .run/document-indexer-agent.log; attach files to /query)
  redis             $(shown_url "${REDIS_URL:-redis://127.0.0.1:6379}")   (its password: REDIS_URL in .env)
EOF
if [[ -n $demo_llm ]]; then
  cat <<EOF
  LLM               DEMO LLM at $OPENAI_BASE_URL   (pid $llm_pid, log .run/demo-llm.log)
                    Not a model: it picks a tool by matching the words of your question,
                    then answers from the tool's result. Set OPENAI_API_KEY (or OPENAI_BASE_URL)
                    in .env for a real LLM.
EOF
else
  echo "  LLM               ${OPENAI_BASE_URL:-https://api.openai.com/v1} (OPENAI_API_KEY${OPENAI_BASE_URL:+ / OPENAI_BASE_URL} from the environment or .env)"
fi
cat <<EOF

Try it:
  curl -s$auth_header -H 'Content-Type: application/json' \\
       -d '{"query": "What is 12 times 7?"}' $base_url/query
  curl -s$auth_header $base_url/agents
  .venv/bin/openagent ask "What is the weather in Paris?"
  .venv/bin/openagent keys create alice --role client   # a key for someone else (not an admin)
  API docs: $base_url/docs   Keys and roles: docs/operations/security.md

EOF
if [[ -z $api_key ]]; then
  echo "Note: OPENAGENT_API_KEY is empty in .env, so the master accepts requests without a key."
fi
echo "Following the logs below; Ctrl-C stops the master, the agents${demo_llm:+ and the demo LLM}."
echo

logs=("$master_log")
for id in "${agent_ids[@]}"; do logs+=("$RUN_DIR/$id.log"); done
tail -n +1 -F "${logs[@]}" &
tail_pid=$!

agent_reported=("" "" "")
while kill -0 "$master_pid" 2>/dev/null; do
  for index in "${!agent_ids[@]}"; do
    pid=${agent_pids[$index]}
    if [[ -z ${agent_reported[$index]} ]] && ! kill -0 "$pid" 2>/dev/null; then
      agent_status=0
      wait "$pid" || agent_status=$?
      warn "${agent_ids[$index]} exited with status $agent_status (see .run/${agent_ids[$index]}.log); the master keeps running"
      agent_reported[index]=1
    fi
  done
  if [[ -n $llm_pid ]] && ! kill -0 "$llm_pid" 2>/dev/null; then
    warn "the demo LLM exited (see .run/demo-llm.log); /query will fail"
    llm_pid=""
  fi
  sleep 1
done
master_status=0
wait "$master_pid" || master_status=$?
master_pid=""
die "the master exited with status $master_status (see .run/master.log)"
