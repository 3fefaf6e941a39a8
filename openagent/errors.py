"""Exceptions raised by the OpenAgent SDK.

Every exception the SDK raises on purpose derives from :class:`OpenAgentError`,
so ``except OpenAgentError`` catches them all::

    OpenAgentError
    ├── ConfigurationError        developer misuse: fix the code or the environment
    ├── TransportError            reaching the master: WebSocket connection, HTTP registration
    │   ├── ConnectionFailedError     could not open the connection
    │   ├── AuthenticationError       master refused the API key (close 1008, HTTP 401)  [fatal]
    │   ├── AgentReplacedError        a newer connection took the agent_id (close 4001)  [fatal]
    │   ├── RegistrationError         master rejected (HTTP: 4xx) or never answered ``register``
    │   └── ConnectionLostError       the connection dropped, or is not open
    ├── QueryError                master answered a query with an ``error`` frame
    │   └── QueryTimeoutError         no ``query_result`` in time
    ├── CollaborationError        misuse of a collaboration session (ended, or not a peer)
    ├── ToolError                 raised by a tool handler: a clean failure the model sees
    │   └── DocumentError             RAG agents: a file that cannot be read (names file and problem)
    ├── WorkspaceError            a workspace YAML that cannot be used (too large, bomb, invalid)
    └── AgentModuleError          a handler module refused (outside the allowed folders), missing or broken

The three families mean different things to the caller:

- :class:`ConfigurationError` is a bug in the calling code or a bad environment
  variable; the message names the fix. Retrying will not help.
- :class:`TransportError` subclasses are runtime failures. The client reconnects
  on its own after :class:`ConnectionLostError`; it never reconnects after the
  two *fatal* ones, :class:`AuthenticationError` and :class:`AgentReplacedError`.
  HTTP invocation agents register with ``POST /register`` instead
  (:func:`~openagent.registration.register_invocation_agent`), retrying while the
  master is unreachable or answers 5xx; a 401 raises :class:`AuthenticationError`,
  any other 4xx :class:`RegistrationError`, and neither is retried.
- :class:`ToolError` is not a crash: a tool handler raises it to report a failure
  (``tool_result`` with ``success: false`` and the error's message) that the
  orchestrator's model reads and may recover from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "AgentReplacedError",
    "AuthenticationError",
    "CollaborationError",
    "ConfigurationError",
    "ConnectionFailedError",
    "ConnectionLostError",
    "DocumentError",
    "OpenAgentError",
    "QueryError",
    "QueryTimeoutError",
    "RegistrationError",
    "AgentModuleError",
    "ToolError",
    "TransportError",
    "WorkspaceError",
    "WorkspaceProblem",
]


class OpenAgentError(Exception):
    """Base class of every exception raised by the OpenAgent SDK."""


class ConfigurationError(OpenAgentError):
    """The SDK was used wrongly: a bad argument, tool schema or environment variable.

    The message names the offending value and how to fix it.
    """


# --------------------------------------------------------------------------- transport


class TransportError(OpenAgentError):
    """Base class of failures to reach the master or to be accepted by it: the WebSocket
    connection of agents and query clients, and the HTTP registration of invocation agents
    (:func:`~openagent.registration.register_invocation_agent`)."""


class ConnectionFailedError(TransportError):
    """The WebSocket to the master could not be opened (refused, timed out, bad handshake).

    Check that the master is running and that ``MASTER_WS`` points at its ``/ws`` endpoint.
    """


class AuthenticationError(TransportError):
    """The master refused the connection's API key.

    Raised when the master closes the socket with code 1008
    (:data:`protocol.CLOSE_POLICY_VIOLATION`), rejects the WebSocket handshake with
    HTTP 401/403, or answers ``register`` with an ``unauthorized`` error; and when it
    answers an invocation agent's ``POST /register`` with HTTP 401. Set
    ``OPENAGENT_API_KEY`` to the master's key. Neither the client nor the HTTP
    registration retries after it.
    """


class AgentReplacedError(TransportError):
    """A newer connection registered the same ``agent_id``; this one was closed (code 4001).

    The client stops instead of reconnecting: reconnecting would in turn kick out the
    newer connection, and the two would fight forever. Run each agent once, or give
    each copy its own ``agent_id``. Only a newer connection of the same key (a second copy of
    the agent) ends it so; one of another key (an administrator's, another agent key of the
    tenant) is logged and the client reconnects with backoff.
    """


class RegistrationError(TransportError):
    """The master rejected ``register`` (its message is this error's message) or did not
    answer within ``WS_REGISTRATION_TIMEOUT``.

    Also raised when the master answers an invocation agent's ``POST /register`` with a
    4xx status other than 401 (e.g. 409 or 422); the message carries the status and the
    master's ``detail``, and the registration is not retried.
    """


class ConnectionLostError(TransportError):
    """The connection to the master dropped, or a frame was sent while not connected.

    Agents reconnect and re-register on their own after a drop; work that was in
    flight on the lost connection (such as a pending query) fails with this error.
    """


# --------------------------------------------------------------------------- queries


class QueryError(OpenAgentError):
    """The master answered a query with an ``error`` frame instead of a ``query_result``.

    A query the orchestrator ran but could not answer is *not* an exception: it comes
    back as a :class:`protocol.QueryResult` with ``success`` false.

    Attributes:
        query_id: The id of the failed query.
        code: The master's stable error code (e.g. ``invalid_query``), when it sent one.
    """

    def __init__(self, message: str, *, query_id: str, code: str | None = None) -> None:
        super().__init__(message)
        self.query_id = query_id
        self.code = code


class QueryTimeoutError(QueryError):
    """No ``query_result`` arrived within the query's timeout (``QUERY_RESPONSE_TIMEOUT``)."""


# --------------------------------------------------------------------------- collaboration


class CollaborationError(OpenAgentError):
    """A :class:`~openagent.collaboration.CollaborationContext` cannot do what was asked.

    Raised by ``send_message`` when the session is over (a peer or the master ended it,
    or the handler called ``end``) or when ``to_agent`` is not one of the session's peers.

    Attributes:
        session_id: The collaboration session.
    """

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id


# --------------------------------------------------------------------------- tools


class ToolError(OpenAgentError):
    """Raise from a tool handler to fail the call with a clean message.

    The message becomes the ``error`` of the ``tool_result`` as is (no exception type
    prefix, no traceback in the logs), for the orchestrator's model to read::

        async def handle(tool_name, arguments):
            if arguments["city"] not in KNOWN_CITIES:
                raise ToolError(f"unknown city {arguments['city']!r}")
    """


class DocumentError(ToolError):
    """A RAG agent cannot read a file: corrupt, encrypted, empty, too large, or not what its
    declared type says. The message starts with the filename and says what is wrong.

    Attributes:
        filename: The file that could not be read.
    """

    def __init__(self, filename: str, problem: str) -> None:
        super().__init__(f"{filename}: {problem}")
        self.filename = filename
        self.problem = problem


# --------------------------------------------------------------------------- workspaces


@dataclass(frozen=True, slots=True)
class WorkspaceProblem:
    """One thing wrong with a workspace YAML: where (``line``, ``field``) and what."""

    message: str
    line: int | None = None
    """1-based line of the offending key or value, when known."""
    field: str | None = None
    """Dotted path of the offending field, e.g. ``agents[0].toolz``."""

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        what = f"{self.field}: " if self.field else ""
        return f"{where}{what}{self.message}"


WorkspaceErrorCode = Literal["too_large", "yaml_bomb", "too_deep", "yaml_syntax", "invalid"]


class WorkspaceError(OpenAgentError):
    """A workspace YAML that cannot be used; :attr:`problems` names each line and field.

    Attributes:
        code: ``too_large`` (over the size cap), ``yaml_bomb`` (aliases expanding past the
            node cap), ``too_deep`` (nesting), ``yaml_syntax`` (not YAML, or more than one
            document) or ``invalid`` (does not fit the schema: unknown fields, bad values).
        problems: What is wrong, each with its line and field when known.
    """

    def __init__(self, code: WorkspaceErrorCode, problems: list[WorkspaceProblem]) -> None:
        super().__init__("invalid workspace: " + "; ".join(str(problem) for problem in problems))
        self.code: WorkspaceErrorCode = code
        self.problems = problems


# --------------------------------------------------------------------------- agent modules


AgentModuleErrorKind = Literal["refused", "not_found", "import_failed"]


class AgentModuleError(OpenAgentError):
    """A handler module that cannot be used.

    Attributes:
        kind: ``refused`` (not a module path under ``agents/``, ``system_agents/`` or
            ``sample_agents/``, a traversal, or a symlink out of them), ``not_found``, or
            ``import_failed`` (the module raised while loading, or does not define an agent).
    """

    def __init__(self, kind: AgentModuleErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: AgentModuleErrorKind = kind
