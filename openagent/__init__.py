"""OpenAgent SDK: connect agents to an OpenAgent master.

Everything an agent author needs is importable from here:

- action agents, which expose tools: :class:`OrchestratorActionAgent` (a handler
  function), :class:`OrchestratorWebSocketActionAgent` (subclass it) and
  :func:`run_action_agent` (the entry point of agent scripts);
- query agents, which ask questions: :class:`QueryClient`;
- the transport under both: :class:`AgentClient` and :func:`connect_master`;
- configuration from the environment: :class:`ClientConfig`;
- the exceptions (see :mod:`openagent.errors` for the hierarchy);
- :class:`ToolSchema` and :class:`QueryResult` from the wire protocol (:mod:`protocol`).

Importing ``openagent`` never imports the master.
"""

from openagent.action import (
    OrchestratorActionAgent,
    OrchestratorWebSocketActionAgent,
    ProgressCallback,
    ToolHandler,
    run_action_agent,
)
from openagent.client import AgentClient, connect_master
from openagent.config import ClientConfig
from openagent.errors import (
    AgentReplacedError,
    AuthenticationError,
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

__all__ = [
    "AgentClient",
    "AgentReplacedError",
    "AuthenticationError",
    "ClientConfig",
    "ConfigurationError",
    "ConnectionFailedError",
    "ConnectionLostError",
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
    "run_action_agent",
]
