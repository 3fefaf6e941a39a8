#!/usr/bin/env bash
# shellcheck shell=bash
# Helpers shared by scripts/run.sh and scripts/test.sh; source it, do not run it.
#
#   ensure_venv EXTRA     .venv exists and holds `pip install -e '.[EXTRA]'` (skipped when
#                         pyproject.toml has not changed since the last install)
#   ensure_redis          Redis answers PING at $REDIS_URL; starts a local one if it can
#   load_env_file FILE    exports every variable of FILE, letting the environment win
#   master_urls           where the master listens and is reached (MASTER_PORT moves it)
#   save_master_port FILE writes MASTER_PORT into FILE (.env) when the environment moved it
#   llm_configured        true when OPENAI_API_KEY or OPENAI_BASE_URL is set
#   log / warn / die      messages on stderr, prefixed with the script's name
#
# After sourcing: ROOT (repository root), VENV_DIR, VENV_PY, RUN_DIR (.run, logs and state).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV_DIR="$ROOT/.venv"
VENV_PY="$VENV_DIR/bin/python"
RUN_DIR="$ROOT/.run"
_SCRIPT_NAME="$(basename "${BASH_SOURCE[-1]:-$0}")"

log() { printf '[%s] %s\n' "$_SCRIPT_NAME" "$*" >&2; }
warn() { printf '[%s] warning: %s\n' "$_SCRIPT_NAME" "$*" >&2; }
die() {
  printf '[%s] error: %s\n' "$_SCRIPT_NAME" "$*" >&2
  exit 1
}

# _python_ok PY: PY runs and is Python >= 3.11.
_python_ok() {
  "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' </dev/null 2>/dev/null
}

_python_version() {
  "$1" -c 'import sys; print(".".join(map(str, sys.version_info[:3])))' </dev/null 2>/dev/null || echo "unknown"
}

# ensure_venv EXTRA: create .venv with ${PYTHON:-python3} when missing and install the
# project editable with the given extra ("master" or "dev"). A stamp file per extra in .venv
# holds the sha256 of pyproject.toml, so an unchanged project is not reinstalled.
ensure_venv() {
  local extra=${1:?ensure_venv needs an extra, e.g. master or dev}
  local python=${PYTHON:-python3}

  if [[ ! -x $VENV_PY ]] || ! "$VENV_PY" -c 'import sys' </dev/null >/dev/null 2>&1; then
    command -v "$python" >/dev/null 2>&1 ||
      die "'$python' not found; install Python >= 3.11 or set PYTHON=/path/to/python3.11"
    _python_ok "$python" ||
      die "$python is Python $(_python_version "$python"); OpenAgent needs Python >= 3.11 (set PYTHON=/path/to/python3.11)"
    log "creating the virtualenv .venv with $python ($(_python_version "$python"))"
    "$python" -m venv "$VENV_DIR" </dev/null ||
      die "'$python -m venv .venv' failed (on Debian/Ubuntu: apt-get install python3-venv)"
  fi
  _python_ok "$VENV_PY" ||
    die ".venv has Python $(_python_version "$VENV_PY"); OpenAgent needs >= 3.11: remove .venv and rerun (PYTHON=/path/to/python3.11 to choose the interpreter)"

  local stamp="$VENV_DIR/.openagent-$extra.stamp" want
  want=$("$VENV_PY" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' \
    "$ROOT/pyproject.toml" </dev/null) || die "cannot read $ROOT/pyproject.toml"
  if [[ -f $stamp && "$(<"$stamp")" == "$want" ]]; then
    return 0
  fi

  log "installing the project into .venv: pip install -e '.[$extra]' (first run takes a minute)"
  (cd "$ROOT" && "$VENV_PY" -m pip install --disable-pip-version-check --quiet -e ".[$extra]" </dev/null) ||
    die "pip install -e '.[$extra]' failed (see the pip output above); fix it and rerun"
  printf '%s\n' "$want" >"$stamp"
  if [[ $extra == dev ]]; then
    # The dev extra includes the master extra.
    printf '%s\n' "$want" >"$VENV_DIR/.openagent-master.stamp"
  fi
}

# redis_ping URL: true when a Redis at URL answers PING (redis-py from .venv, else redis-cli).
redis_ping() {
  local url=$1
  if [[ -x $VENV_PY ]] && "$VENV_PY" -c 'import redis' </dev/null >/dev/null 2>&1; then
    "$VENV_PY" - "$url" >/dev/null 2>&1 <<'PY'
import sys

import redis

client = redis.Redis.from_url(sys.argv[1], socket_connect_timeout=1, socket_timeout=1)
try:
    sys.exit(0 if client.ping() else 1)
finally:
    client.close()
PY
  elif command -v redis-cli >/dev/null 2>&1; then
    [[ "$(redis-cli -u "$url" ping </dev/null 2>/dev/null)" == PONG ]]
  else
    return 1
  fi
}

# _redis_url_parts URL: prints "host", "port", "loopback|remote" and the password, one a line.
_redis_url_parts() {
  local python=$VENV_PY
  [[ -x $python ]] || python=${PYTHON:-python3}
  "$python" - "$1" <<'PY'
import ipaddress
import sys
from urllib.parse import unquote, urlsplit

url = urlsplit(sys.argv[1])
if url.scheme not in ("redis", "rediss"):
    sys.exit(f"unsupported scheme {url.scheme!r} (expected redis://)")
host = url.hostname or "127.0.0.1"
try:
    port = url.port or 6379
except ValueError as exc:
    sys.exit(str(exc))
try:
    loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
except ValueError:
    loopback = False
print(host)
print(port)
print("loopback" if loopback and url.scheme == "redis" else "remote")
print(unquote(url.password or ""))
PY
}

_redis_server_bin() {
  local candidate
  for candidate in "$(command -v redis-server 2>/dev/null || true)" /usr/bin/redis-server /usr/sbin/redis-server \
    /usr/local/bin/redis-server; do
    if [[ -n $candidate && -x $candidate ]]; then
      printf '%s\n' "$candidate"
      return 0
    fi
  done
  return 1
}

# shown_url URL: URL as messages show it, without its password.
shown_url() {
  sed -E 's#//([^:@/]*):[^@/]*@#//\1:***@#' <<<"$1"
}

# ensure_redis: Redis answers PING at ${REDIS_URL:-redis://127.0.0.1:6379}. When it does not
# and the URL is on loopback, start a redis-server with append-only persistence (AOF, fsync every
# second; data dir and log in .run/redis-PORT/, so sessions and registrations survive a Redis
# restart), installing the Debian package first when we are root with apt-get.
ensure_redis() {
  local url=${REDIS_URL:-redis://127.0.0.1:6379}
  local shown
  shown=$(shown_url "$url")
  if redis_ping "$url"; then
    log "Redis answers at REDIS_URL=$shown"
    return 0
  fi

  local parts
  parts=$(_redis_url_parts "$url") || die "cannot parse REDIS_URL=$shown"
  local host port where password
  {
    IFS= read -r host
    IFS= read -r port
    IFS= read -r where
    IFS= read -r password || true
  } <<<"$parts"
  if [[ $where != loopback ]]; then
    die "Redis does not answer PING at REDIS_URL=$shown; start it or point REDIS_URL at a running Redis"
  fi

  local server
  if ! server=$(_redis_server_bin); then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
      log "redis-server is not installed; installing it: apt-get install -y redis-server"
      {
        DEBIAN_FRONTEND=noninteractive apt-get update -q &&
          DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server
      } </dev/null >&2 || die "apt-get install redis-server failed; install Redis or set REDIS_URL"
      # The package may have started its own server on the default port.
      if redis_ping "$url"; then
        log "Redis answers at REDIS_URL=$shown"
        return 0
      fi
      server=$(_redis_server_bin) || die "redis-server is still not on PATH after apt-get install"
    else
      die "Redis does not answer at REDIS_URL=$shown and redis-server is not installed; install it (e.g. 'sudo apt-get install redis-server') or point REDIS_URL at a running Redis"
    fi
  fi

  local data_dir="$RUN_DIR/redis-$port"
  if ! mkdir -p "$data_dir" 2>/dev/null || [[ ! -w $data_dir ]]; then
    data_dir=$(mktemp -d "${TMPDIR:-/tmp}/openagent-redis.XXXXXX")
  fi
  chmod 700 "$data_dir" 2>/dev/null || true # its AOF holds the key table and the sessions
  local logfile="$data_dir/redis.log"
  local bind=127.0.0.1
  [[ $host == *:* ]] && bind=$host
  local args=(--daemonize yes --bind "$bind" --port "$port" --save "" --appendonly yes --appendfsync everysec
    --dir "$data_dir" --logfile "$logfile")
  [[ -n $password ]] && args+=(--requirepass "$password")

  log "Redis does not answer at REDIS_URL=$shown; starting $server on $bind:$port (log: $logfile)"
  "$server" "${args[@]}" </dev/null >&2 || die "could not start redis-server for REDIS_URL=$shown (log: $logfile)"

  local deadline=$((SECONDS + 10))
  until redis_ping "$url"; do
    if ((SECONDS >= deadline)); then
      [[ -f $logfile ]] && tail -n 20 "$logfile" >&2
      die "started redis-server but REDIS_URL=$shown still does not answer PING after 10 s (log: $logfile)"
    fi
    sleep 0.2
  done
  log "Redis is up at REDIS_URL=$shown (daemonized; stop it with: redis-cli -p $port shutdown)"
}

# load_env_file FILE: export every NAME=value of FILE (bash syntax). A variable already set in
# the environment keeps its value, as with pydantic-settings and python-dotenv.
load_env_file() {
  local _lef_file=$1 _lef_line _lef_name
  local -A _lef_keep=()
  while IFS= read -r _lef_line || [[ -n $_lef_line ]]; do
    if [[ $_lef_line =~ ^[[:space:]]*(export[[:space:]]+)?([A-Za-z_][A-Za-z0-9_]*)= ]]; then
      _lef_name=${BASH_REMATCH[2]}
      if [[ -n ${!_lef_name+set} ]]; then
        _lef_keep[$_lef_name]=${!_lef_name}
      fi
    fi
  done <"$_lef_file"
  set -a
  # shellcheck disable=SC1090
  . "$_lef_file"
  set +a
  for _lef_name in "${!_lef_keep[@]}"; do
    export "$_lef_name=${_lef_keep[$_lef_name]}"
  done
}

# master_urls: default MASTER_HOST (127.0.0.1) and MASTER_PORT (8000); set base_url and ws_url,
# where local clients reach the master (a wildcard bind address is not connectable); export
# MASTER_BASE_URL and MASTER_WS as those unless they are set, so MASTER_PORT alone moves the
# master's callback URL and the agents' WebSocket URL too.
master_urls() {
  MASTER_HOST=${MASTER_HOST:-127.0.0.1}
  MASTER_PORT=${MASTER_PORT:-8000}
  if ! [[ $MASTER_PORT =~ ^[1-9][0-9]{0,4}$ ]] || ((MASTER_PORT > 65535)); then
    die "MASTER_PORT must be a port number (1-65535), got '$MASTER_PORT'"
  fi
  local client_host
  case $MASTER_HOST in
    0.0.0.0) client_host=127.0.0.1 ;;
    :: | "[::]") client_host="[::1]" ;;
    \[*) client_host=$MASTER_HOST ;;
    *:*) client_host="[$MASTER_HOST]" ;;
    *) client_host=$MASTER_HOST ;;
  esac
  base_url="http://$client_host:$MASTER_PORT"
  ws_url="ws://$client_host:$MASTER_PORT/ws"
  export MASTER_HOST MASTER_PORT
  export MASTER_BASE_URL=${MASTER_BASE_URL:-$base_url}
  export MASTER_WS=${MASTER_WS:-$ws_url}
}

# save_master_port FILE: when MASTER_PORT (from the environment) is not the one FILE holds, write
# it into FILE, so the openagent command, which reads FILE, finds the master started on it.
save_master_port() {
  local file=$1 saved
  saved=$(sed -n -E 's/^[[:space:]]*(export[[:space:]]+)?MASTER_PORT=(.*)$/\2/p' "$file" | tail -n 1)
  saved=${saved//[\"\' ]/}
  [[ $saved == "$MASTER_PORT" ]] && return 0
  if [[ -n $saved ]] || grep -qE '^[[:space:]]*(export[[:space:]]+)?MASTER_PORT=' "$file"; then
    sed -i -E "s/^[[:space:]]*(export[[:space:]]+)?MASTER_PORT=.*/MASTER_PORT=$MASTER_PORT/" "$file"
  else
    [[ -s $file && -n $(tail -c 1 "$file") ]] && printf '\n' >>"$file"  # a last line without its newline
    printf 'MASTER_PORT=%s\n' "$MASTER_PORT" >>"$file"
  fi
  log "wrote MASTER_PORT=$MASTER_PORT into $file: the openagent command reads the port from there"
}

# llm_configured: true when an LLM is configured (OPENAI_API_KEY or OPENAI_BASE_URL not empty),
# as the master decides it (master/settings.py llm_configured).
llm_configured() {
  [[ -n ${OPENAI_API_KEY:-} || -n ${OPENAI_BASE_URL:-} ]]
}

# ---------------------------------------------------------------- MCP conformance suite
#   conformance_deps      npm ci in tests/mcp_conformance (the pinned @modelcontextprotocol/conformance)
#                         when node_modules is missing or older than package-lock.json; a warning
#                         without npm (tests/master/doors/test_mcp_conformance.py then skips)
CONFORMANCE_DIR="$ROOT/tests/mcp_conformance"

conformance_deps() {
  if ! command -v npm >/dev/null 2>&1; then
    warn "npm not found: the MCP conformance test will be skipped (apt-get install nodejs npm)"
    return 0
  fi
  local lock="$CONFORMANCE_DIR/package-lock.json" stamp="$CONFORMANCE_DIR/node_modules/.package-lock.json"
  if [[ ! -f $stamp || $lock -nt $stamp ]]; then
    log "installing the MCP conformance suite: npm ci (tests/mcp_conformance)"
    (cd "$CONFORMANCE_DIR" && npm ci --no-audit --no-fund --loglevel=error </dev/null) ||
      die "npm ci failed in tests/mcp_conformance (output above)"
  fi
}

# ---------------------------------------------------------------- A2A 0.3 client
#   a2a_v03_client_deps   the a2a-sdk 0.3 client ($A2A_V03_SDK) in .venv/a2a-sdk-0.3, installed with
#                         pip --target apart from the 1.x in .venv (they conflict), when missing or
#                         pinned differently; tests/master/doors/test_a2a_compat.py runs it
A2A_V03_SDK="a2a-sdk==0.3.26"
A2A_V03_DIR="$VENV_DIR/a2a-sdk-0.3"

a2a_v03_client_deps() {
  local stamp="$A2A_V03_DIR/.openagent.stamp"
  if [[ -f $stamp && "$(<"$stamp")" == "$A2A_V03_SDK" ]]; then
    return 0
  fi
  log "installing the A2A 0.3 client: pip install --target .venv/a2a-sdk-0.3 $A2A_V03_SDK"
  rm -rf "$A2A_V03_DIR"
  "$VENV_PY" -m pip install --disable-pip-version-check --quiet --target "$A2A_V03_DIR" "$A2A_V03_SDK" </dev/null ||
    die "pip install --target .venv/a2a-sdk-0.3 $A2A_V03_SDK failed (output above)"
  printf '%s\n' "$A2A_V03_SDK" >"$stamp"
}

# ---------------------------------------------------------------- AG-UI client
#   agui_client_deps      npm ci in tests/ag_ui_client (the pinned @ag-ui/client that
#                         tests/master/doors/test_agui_client.py drives against /ag-ui) when
#                         node_modules is missing or older than package-lock.json; a warning without
#                         npm (the test then skips)
AGUI_CLIENT_DIR="$ROOT/tests/ag_ui_client"

agui_client_deps() {
  if ! command -v npm >/dev/null 2>&1; then
    warn "npm not found: the AG-UI client test will be skipped (apt-get install nodejs npm)"
    return 0
  fi
  local lock="$AGUI_CLIENT_DIR/package-lock.json" stamp="$AGUI_CLIENT_DIR/node_modules/.package-lock.json"
  if [[ ! -f $stamp || $lock -nt $stamp ]]; then
    log "installing the AG-UI client: npm ci (tests/ag_ui_client)"
    (cd "$AGUI_CLIENT_DIR" && npm ci --no-audit --no-fund --loglevel=error </dev/null) ||
      die "npm ci failed in tests/ag_ui_client (output above)"
  fi
}

# ---------------------------------------------------------------- web UI (openagent-ui/)
#   ui_deps               npm ci in openagent-ui when node_modules is missing or older than package-lock.json
#   ui_build_if_stale     npm run build when openagent-ui/dist is missing or older than its sources
#   ensure_chromium       Debian's chromium for Playwright (apt-get install when missing)
UI_DIR="$ROOT/openagent-ui"

ui_deps() {
  command -v npm >/dev/null 2>&1 || die "npm not found: the web UI needs Node.js 20+ (apt-get install nodejs npm)"
  local lock="$UI_DIR/package-lock.json" stamp="$UI_DIR/node_modules/.package-lock.json"
  if [[ ! -f $stamp || $lock -nt $stamp ]]; then
    log "installing the web UI's dependencies: npm ci (openagent-ui)"
    (cd "$UI_DIR" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error </dev/null) ||
      die "npm ci failed in openagent-ui (output above)"
  fi
}

# _ui_sources_hash: one hash over the files the build reads.
_ui_sources_hash() {
  (cd "$UI_DIR" && find src index.html package-lock.json vite.config.ts tsconfig*.json -type f -print0 |
    LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
}

ui_build_if_stale() {
  local stamp="$UI_DIR/dist/.sources.sha256" want
  want=$(_ui_sources_hash)
  if [[ -f $UI_DIR/dist/index.html && -f $stamp && "$(<"$stamp")" == "$want" ]]; then
    return 0
  fi
  ui_deps
  log "building the web UI: npm run build (openagent-ui/dist)"
  (cd "$UI_DIR" && npm run build --silent </dev/null) || die "the web UI did not build (output above)"
  printf '%s\n' "$want" >"$stamp"
}

ensure_chromium() {
  CHROMIUM_PATH=${CHROMIUM_PATH:-/usr/bin/chromium}
  if [[ ! -x $CHROMIUM_PATH ]]; then
    command -v apt-get >/dev/null 2>&1 || die "no Chromium at $CHROMIUM_PATH and no apt-get: set CHROMIUM_PATH"
    log "installing Debian's chromium for the browser tests (apt-get install chromium)"
    local sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    ($sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium) </dev/null ||
      die "apt-get install chromium failed; install it or set CHROMIUM_PATH"
  fi
  export CHROMIUM_PATH
}
