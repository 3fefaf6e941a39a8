""".env.example documents every variable of the spec's env tables, with the spec's defaults."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from dotenv import dotenv_values

ENV_EXAMPLE = Path(__file__).resolve().parents[2] / ".env.example"

UNSET = None
"""The spec's default is "unset" (or derived from another variable): the line is commented out."""

SPEC_ENV_TABLE: dict[str, str | None] = {
    # Master
    "REDIS_URL": "redis://127.0.0.1:6379",
    "REDIS_AGENT_TTL_SECONDS": "86400",
    "REDIS_SESSION_TTL_SECONDS": "86400",
    "MASTER_BASE_URL": UNSET,  # derived: http://MASTER_HOST:MASTER_PORT
    "OPENAI_API_KEY": "",
    # Orchestrator / models
    "OPENAGENT_CHAT_MODELS": UNSET,
    "ORCHESTRATOR_MODEL": UNSET,
    "AGENT_GENERATOR_MODEL": UNSET,
    "ORCHESTRATOR_MODEL_ALLOWLIST": UNSET,
    "ORCHESTRATOR_CONTEXT_MAX_TOKENS": "12000",
    "ORCHESTRATOR_RECENT_TURNS": "8",
    "SUMMARIZER_MODEL": UNSET,
    # Timeouts (seconds)
    "HEALTH_CHECK_TIMEOUT": "2.0",
    "TOOL_CALL_TIMEOUT": "30.0",
    "TOOL_INVOKE_HTTP_TIMEOUT": "2.0",
    # Agents (client -> master)
    "MASTER_WS": UNSET,  # derived: ws://MASTER_HOST:MASTER_PORT/ws
    "WS_CONNECT_TIMEOUT": "10.0",
    "WS_REGISTRATION_TIMEOUT": "10.0",
    "WS_KEEPALIVE_INTERVAL": "30",
    "QUERY_RESPONSE_TIMEOUT": "180.0",
    "HTTP_REGISTER_TIMEOUT": "10.0",
    # Orchestrator auto-mode
    "ORCHESTRATOR_AUTO_MAX_STEPS": "20",
    "ORCHESTRATOR_AUTO_SPAWN_WAIT_SECONDS": "120",
    # Feature toggles
    "OPENAGENT_YAML_RUNNER": "1",
    # RAG / attachments
    "OPENAGENT_EMBEDDING_MODEL": "text-embedding-3-small",
    "OPENAGENT_RAG_EXTRACT_MODEL": "gpt-4o-mini",
    "RAG_MAX_ATTACHMENT_BYTES": "2097152",
    "RAG_MAX_ATTACHMENTS": "5",
    "RAG_TOOL_HTTP_TIMEOUT": "120.0",
    "RAG_TOOL_CALL_TIMEOUT": "180.0",
    "RAG_EXTRACT_CACHE_TTL_SECONDS": "604800",
    # Kubernetes sandbox
    "OPENAGENT_K8S_SANDBOX": "0",  # the spec says 1; off by default here (README, "Kubernetes sandbox")
    "OPENAGENT_K8S_NAMESPACE": "agents",
    "OPENAGENT_K8S_POOL_LABEL_SELECTOR": "openagent.io/role=agent-pool",
    "OPENAGENT_K8S_MASTER_WS": "ws://host.minikube.internal:8000/ws",
    "OPENAGENT_K8S_AGENT_IMAGE": "openagent/agent-runtime:latest",
    "OPENAGENT_K8S_AGENT_IMAGE_PULL_POLICY": "Never",
    "OPENAGENT_K8S_POOL_RUNNER_IMAGE": "openagent/agent-pool-runner:latest",
    "OPENAGENT_K8S_POOL_RUNNER_PORT": "8080",
    "OPENAGENT_K8S_LOG_TAIL_LINES": "120",
    "OPENAGENT_K8S_INDEXER_REDIS_SIDECAR": "1",
    "OPENAGENT_K8S_INDEXER_REDIS_URL": UNSET,
    "OPENAGENT_K8S_SANDBOX_RUNTIME_TTL": "604800",
    # Invocation agent (demo)
    "INVOCATION_PORT": "9000",
    "INVOCATION_HOST": "127.0.0.1",
    "INVOCATION_BASE_URL": UNSET,
    # Collaboration
    "OPENAGENT_COLLABORATION": "1",
    "OPENAGENT_COLLAB_TIMEOUT": "120",
    "OPENAGENT_COLLAB_MAX_MESSAGES": "50",
    "OPENAGENT_COLLAB_SESSION_TTL": "86400",
}

PROJECT_EXTRAS: dict[str, str | None] = {
    "OPENAGENT_K8S_AGENT_CPU_REQUEST": "50m",
    "OPENAGENT_K8S_AGENT_CPU_LIMIT": "500m",
    "OPENAGENT_K8S_AGENT_MEMORY_REQUEST": "128Mi",
    "OPENAGENT_K8S_AGENT_MEMORY_LIMIT": "512Mi",
    "OPENAGENT_K8S_RUNTIME_CLASS": UNSET,
    "OPENAGENT_K8S_API_TIMEOUT": "10",
    "OPENAI_BASE_URL": UNSET,
    "OPENAGENT_DEMO_LLM_PORT": UNSET,
    "OPENAGENT_START_TIMEOUT_SECONDS": "180",
    "OPENAGENT_API_KEY": "",
    "OPENAGENT_WS_MAX_MESSAGE_BYTES": "16777216",
    "OPENAGENT_LLM_TIMEOUT": "60",
    "OPENAGENT_LLM_MAX_RETRIES": "2",
    "MASTER_HOST": "127.0.0.1",
    "MASTER_PORT": "8000",
    "WEATHER_GEOCODING_URL": "https://geocoding-api.open-meteo.com/v1/search",
    "WEATHER_FORECAST_URL": "https://api.open-meteo.com/v1/forecast",
}

_ASSIGNMENT = re.compile(r"^(?P<commented>#\s*)?(?P<name>[A-Z][A-Z0-9_]*)=(?P<value>.*)$")


def parse_env_example() -> tuple[dict[str, str], set[str]]:
    """The active ``NAME=value`` lines, and the names of commented-out ``# NAME=value`` lines."""
    active: dict[str, str] = {}
    commented: set[str] = set()
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        match = _ASSIGNMENT.match(line.strip())
        if match is None:
            continue
        name = match["name"]
        if match["commented"]:
            commented.add(name)
        else:
            assert name not in active, f"{name} is set twice in .env.example"
            active[name] = match["value"]
    return active, commented


@pytest.mark.parametrize("name", sorted(SPEC_ENV_TABLE | PROJECT_EXTRAS))
def test_variable_is_documented_with_its_default(name: str) -> None:
    active, commented = parse_env_example()
    default = (SPEC_ENV_TABLE | PROJECT_EXTRAS)[name]
    if default is UNSET:
        assert name in commented, f"{name} (unset by default) should be a commented-out line"
        assert name not in active, f"{name} is unset by default and should not be set"
    else:
        assert active.get(name) == default, f"{name} should default to {default!r}"


def test_every_variable_has_a_comment_line_above_it() -> None:
    lines = ENV_EXAMPLE.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines):
        match = _ASSIGNMENT.match(line.strip())
        if match is None or match["commented"]:
            continue
        above = lines[number - 1].strip() if number else ""
        assert above.startswith("#"), f"{match['name']} has no comment line above it"


def test_python_dotenv_reads_the_same_values() -> None:
    active, _ = parse_env_example()
    assert dotenv_values(ENV_EXAMPLE) == active


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_can_source_it_as_run_sh_does() -> None:
    active, _ = parse_env_example()
    script = (
        'set -euo pipefail; set -a; . "$1"; set +a; '
        'for n in "${@:2}"; do printf "%s=%s\\n" "$n" "${!n}"; done'
    )
    out = subprocess.run(
        ["bash", "-c", script, "bash", str(ENV_EXAMPLE), *active],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    assert dict(line.split("=", 1) for line in out.splitlines()) == active
