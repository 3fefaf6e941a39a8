"""The SDK's front door: ``openagent.__all__`` is pinned and importing it stays light."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import openagent
import protocol

ROOT = Path(__file__).resolve().parents[2]

EXPORTED = [
    "AgentClient",
    "AgentReplacedError",
    "AuthenticationError",
    "ClientConfig",
    "CollaborationContext",
    "CollaborationError",
    "ConfigurationError",
    "ConnectionFailedError",
    "ConnectionLostError",
    "InvocationActionAgent",
    "McpBridge",
    "OpenAgentError",
    "OrchestratorActionAgent",
    "OrchestratorWebSocketActionAgent",
    "ProgressCallback",
    "QueryClient",
    "QueryError",
    "QueryResult",
    "QueryTimeoutError",
    "RegistrationError",
    "ToolError",
    "ToolHandler",
    "ToolSchema",
    "TransportError",
    "connect_master",
    "register_invocation_agent",
    "run_action_agent",
    "run_invocation_agent",
]


def test_all_is_pinned_and_sorted() -> None:
    assert openagent.__all__ == EXPORTED
    assert openagent.__all__ == sorted(openagent.__all__, key=lambda name: (name[0].islower(), name))


def test_every_exported_name_exists() -> None:
    for name in openagent.__all__:
        assert getattr(openagent, name) is not None, name


def test_protocol_models_are_re_exported_unchanged() -> None:
    assert openagent.ToolSchema is protocol.ToolSchema
    assert openagent.QueryResult is protocol.QueryResult


def test_errors_share_one_base() -> None:
    errors = [getattr(openagent, name) for name in openagent.__all__ if name.endswith("Error")]
    assert all(issubclass(error, openagent.OpenAgentError) for error in errors)
    assert issubclass(openagent.QueryTimeoutError, openagent.QueryError)
    for fatal in (openagent.AuthenticationError, openagent.AgentReplacedError):
        assert issubclass(fatal, openagent.TransportError)


def test_importing_openagent_does_not_import_the_master() -> None:
    code = (
        "import sys, openagent\n"
        "leaked = sorted(m for m in sys.modules if m == 'master' or m.startswith('master.'))\n"
        "assert not leaked, leaked\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0, completed.stderr


def test_invocation_agents_load_lazily() -> None:
    code = (
        "import sys, openagent\n"
        "assert 'starlette' not in sys.modules and 'uvicorn' not in sys.modules\n"
        "assert openagent.register_invocation_agent.__name__ == 'register_invocation_agent'\n"
        "assert 'starlette' not in sys.modules  # registering needs no server\n"
        "assert openagent.InvocationActionAgent.__name__ == 'InvocationActionAgent'\n"
        "assert 'starlette' in sys.modules\n"
        "import openagent.invocation\n"
        "assert openagent.invocation.register_invocation_agent is openagent.register_invocation_agent\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60)


def test_missing_invocation_extra_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiohttp", None)  # as if the extra were not installed
    monkeypatch.delitem(sys.modules, "openagent.invocation", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'openagent\[invocation\]'"):
        openagent.InvocationActionAgent  # noqa: B018


def test_the_mcp_bridge_loads_lazily_and_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    code = "import sys, openagent\nassert 'openagent.mcp' not in sys.modules and 'mcp' not in sys.modules\n"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60)
    from openagent.mcp import McpBridge

    assert openagent.McpBridge is McpBridge
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if the extra were not installed
    with pytest.raises(openagent.ConfigurationError, match=r"pip install 'openagent\[mcp\]'"):
        McpBridge("time", ["python", "-m", "mcp_server_time"], config=openagent.ClientConfig())
