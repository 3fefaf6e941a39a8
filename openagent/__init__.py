"""OpenAgent SDK: connect agents to an OpenAgent master.

Everything an agent author needs is importable from here:

- action agents, which expose tools: :class:`OrchestratorActionAgent` (a handler
  function), :class:`OrchestratorWebSocketActionAgent` (subclass it) and
  :func:`run_action_agent` (the entry point of agent scripts);
- query agents, which ask questions: :class:`QueryClient`;
- collaboration sessions between agents: :class:`CollaborationContext` (what an
  ``OrchestratorActionAgent``'s ``collaboration_handler`` receives);
- the transport under both: :class:`AgentClient` and :func:`connect_master`;
- configuration from the environment: :class:`ClientConfig`;
- the exceptions (see :mod:`openagent.errors` for the hierarchy);
- :class:`ToolSchema` and :class:`QueryResult` from the wire protocol (:mod:`protocol`).

- HTTP invocation agents: :class:`InvocationActionAgent` and :func:`run_invocation_agent`
  (``pip install 'openagent[invocation]'``), and :func:`register_invocation_agent` for an
  agent served another way; all three are imported on first use.
- MCP servers as agents: :class:`McpBridge` runs a local (stdio) MCP server and connects its
  tools as one agent (``pip install 'openagent[mcp]'``; imported on first use).

Importing ``openagent`` never imports the master.
"""

import importlib
from typing import TYPE_CHECKING, Any

from openagent.action import (
    OrchestratorActionAgent,
    OrchestratorWebSocketActionAgent,
    ProgressCallback,
    ToolHandler,
    run_action_agent,
)
from openagent.client import AgentClient, connect_master
from openagent.collaboration import CollaborationContext
from openagent.config import ClientConfig
from openagent.errors import (
    AgentReplacedError,
    AuthenticationError,
    CollaborationError,
    ConfigurationError,
    ConnectionFailedError,
    ConnectionLostError,
    OpenAgentError,
    QueryError,
    QueryTimeoutError,
    RegistrationError,
    ToolError,
    TransportError,
)
from openagent.query import QueryClient
from protocol import QueryResult, ToolSchema

if TYPE_CHECKING:
    from openagent.invocation import InvocationActionAgent, run_invocation_agent
    from openagent.mcp import McpBridge
    from openagent.registration import register_invocation_agent

_LAZY = {
    "InvocationActionAgent": ("openagent.invocation", "invocation"),
    "McpBridge": ("openagent.mcp", "mcp"),
    "register_invocation_agent": ("openagent.registration", "invocation"),
    "run_invocation_agent": ("openagent.invocation", "invocation"),
}
"""Imported on first use, with the extra they need: HTTP invocation agents the ``invocation``
extra (starlette, uvicorn), the MCP bridge the ``mcp`` extra (the MCP SDK)."""


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module_name, extra = _LAZY[name]
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ImportError(
                f"openagent.{name} needs the '{extra}' extra: pip install 'openagent[{extra}]' "
                f"(missing: {exc.name or exc})"
            ) from exc
        return getattr(module, name)
    raise AttributeError(f"module 'openagent' has no attribute {name!r}")


__all__ = [
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
