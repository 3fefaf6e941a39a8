"""The OpenAgent wire protocol: the frames of an agent's connection.

Every WebSocket frame between an agent and the master is one JSON object with a
``type`` tag. This module models the frames of an agent's connection (registration, tool calls,
collaboration, liveness and errors) as Pydantic v2 models; the frames of a query and its run
(``query``, ``query_result``, ``cancel``, ``cancel_result``) and the shapes they carry are in
:mod:`protocol.queries`.

Direction of each message:

- agent → master: ``register``, ``query``, ``tool_result``, ``tool_progress``,
  ``peer_message``, ``collaboration_end``, ``ping``
- master → agent: ``registered``, ``query_result``, ``tool_call``,
  ``tool_progress`` (relayed to query clients), ``collaboration_start``,
  ``peer_message``, ``collaboration_end``, ``pong``, ``error``

The union of every frame, :data:`protocol.frames.Message`, is in :mod:`protocol.frames`
(with the master's ``run_event`` frame of :mod:`protocol.events`).

Unknown fields are ignored so that newer peers can talk to older ones; missing
or mistyped required fields make the frame invalid.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, field_validator

from protocol.errors import ErrorCode

__all__ = [
    "AGENT_ID_PATTERN",
    "CLOSE_AGENT_REPLACED",
    "CLOSE_POLICY_VIOLATION",
    "REPLACED_BY_ANOTHER_KEY",
    "CollaborationEnd",
    "CollaborationPeer",
    "CollaborationStart",
    "ErrorCode",
    "ErrorMessage",
    "PeerMessage",
    "Ping",
    "Pong",
    "Register",
    "Registered",
    "Role",
    "ToolCall",
    "ToolCancel",
    "ToolProgress",
    "ToolResult",
    "ToolSchema",
]

AGENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
"""Agent ids: 1-128 characters, letters, digits, ``.``, ``_``, ``:`` and ``-``."""

Role: TypeAlias = Literal["query", "action"]

CLOSE_POLICY_VIOLATION = 1008
"""WebSocket close code: missing or wrong API key."""
CLOSE_AGENT_REPLACED = 4001
"""WebSocket close code: a newer connection registered the same ``agent_id``; do not reconnect,
unless the close reason is :data:`REPLACED_BY_ANOTHER_KEY`."""
REPLACED_BY_ANOTHER_KEY = "replaced by a connection of another key"
"""Close reason (with :data:`CLOSE_AGENT_REPLACED`): the newer connection came with another key
(an administrator's, another agent key of the tenant, an action agent taking a query client's
id), not a second copy of this agent: reconnect with backoff (the ``agent_replaced`` error that
came first says who)."""
CLOSE_SERVICE_RESTART = 1012
"""WebSocket close code: the master is stopping (draining); reconnect at once, to another master."""

AgentId = Annotated[str, Field(pattern=AGENT_ID_PATTERN)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)


class ToolSchema(_Model):
    """A tool an action agent exposes, in OpenAI function-calling shape."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
    """Tool name, unique within its agent (OpenAI function-name rules)."""
    description: str = ""
    """What the tool does; the model reads this to decide when to call it."""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON Schema of the arguments object."""
    endpoint: Annotated[str, Field(pattern=r"^[A-Za-z0-9._~!$&'()*+,;=:@%/-]{0,512}$")] | None = None
    """HTTP path of this tool on an invocation agent (e.g. ``/run``): at most 512 ASCII URL-path characters."""
    annotations: dict[str, Any] | None = None
    """Hints about the tool's behaviour, as MCP tool annotations (``readOnlyHint``,
    ``destructiveHint``, ``idempotentHint``, ``openWorldHint``): shown in ``GET /agents``."""
    requires_approval: bool = False
    """A person must approve each call the orchestrator makes (``POST /approvals/{approval_id}``)
    before it runs; a query with ``approval: "never"`` gets an error for it instead."""

    @field_validator("requires_approval", mode="before")
    @classmethod
    def _null_is_false(cls, value: Any) -> Any:
        """``null`` (a workspace's tool that does not say) is ``false``."""
        return False if value is None else value


# --------------------------------------------------------------------------- registration


class Register(_Model):
    """First frame of every connection: who the agent is and what it offers."""

    type: Literal["register"] = "register"
    agent_id: AgentId
    """Unique id of the agent on this master."""
    role: Role
    """``query`` agents ask questions; ``action`` agents expose tools."""
    tools: list[ToolSchema] = Field(default_factory=list)
    """Tools of an action agent."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Free-form description (e.g. ``supports_collaboration``)."""
    invocation_url: str | None = None
    """Legacy: base URL of an HTTP invocation agent registering over WebSocket."""
    instance: Annotated[str, Field(pattern=AGENT_ID_PATTERN)] | None = None
    """Which replica of an action agent this connection is: connections of one ``agent_id``
    with different instances all serve its calls (balanced, least in flight first); a new
    connection with a live instance (leaving it out is an instance too) replaces that one."""


class Registered(_Model):
    """The master accepted a :class:`Register`."""

    type: Literal["registered"] = "registered"
    agent_id: str


# --------------------------------------------------------------------------- tools


class ToolCall(_Model):
    """The master asks an action agent to run one of its tools."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    traceparent: str | None = None
    """W3C trace context of the master's span for this call (when the master traces): the SDK
    starts the agent's span under it, so the agent's work joins the query's trace."""


class ToolResult(_Model):
    """An action agent's answer to a :class:`ToolCall`."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    success: bool
    result: Any = None
    """JSON value returned by the tool (when ``success``)."""
    error: str | None = None
    """Why the tool failed (when not ``success``)."""


class ToolProgress(_Model):
    """Progress of a running tool call."""

    type: Literal["tool_progress"] = "tool_progress"
    call_id: str
    message: str = ""
    progress: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    """Fraction done, 0..1, when known."""


class ToolCancel(_Model):
    """The master no longer waits for a call's result: its caller cancelled it (an MCP client that
    cancelled ``tools/call``, a query that was stopped). The agent should stop the work; a
    ``tool_result`` sent anyway is refused like any late result."""

    type: Literal["tool_cancel"] = "tool_cancel"
    call_id: str
    reason: str = ""
    """Why, for the agent's log."""


# --------------------------------------------------------------------------- collaboration


class CollaborationPeer(_Model):
    """Another agent in a collaboration session."""

    agent_id: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    tools: list[ToolSchema] = Field(default_factory=list)


class CollaborationStart(_Model):
    """The master introduces an agent to its peers for a collaboration."""

    type: Literal["collaboration_start"] = "collaboration_start"
    session_id: str
    """Collaboration session id (``collab:{session_id}`` in Redis)."""
    task: str
    peers: list[CollaborationPeer] = Field(default_factory=list)
    """The other agents of the session."""
    role: Literal["initiator", "responder"]
    context: dict[str, Any] = Field(default_factory=dict)


class PeerMessage(_Model):
    """A message between two agents of a collaboration, relayed by the master."""

    type: Literal["peer_message"] = "peer_message"
    session_id: str
    to_agent: str | None = None
    """Recipient (set by the sender)."""
    from_agent: str | None = None
    """Sender (stamped by the master; ignored when an agent sets it)."""
    content: dict[str, Any] = Field(default_factory=dict)


class CollaborationEnd(_Model):
    """A collaboration is over: sent by a peer, or by the master to the others."""

    type: Literal["collaboration_end"] = "collaboration_end"
    session_id: str
    summary: str = ""
    from_agent: str | None = None
    """The peer that ended it (stamped by the master); ``None`` when the master did."""
    reason: str | None = None
    """Why it ended early: set by the master (``timeout``, ``max_messages``, ``peer_disconnected``,
    ``cancelled``, ``shutdown``) or by a peer giving up (the SDK sends ``handler_error``);
    ``None`` for a normal end."""


# --------------------------------------------------------------------------- liveness and errors


class Ping(_Model):
    """Keepalive from an agent."""

    type: Literal["ping"] = "ping"


class Pong(_Model):
    """The master's answer to :class:`Ping`."""

    type: Literal["pong"] = "pong"


class ErrorMessage(_Model):
    """The master could not act on a frame; the connection stays usable."""

    type: Literal["error"] = "error"
    message: str
    """Human-readable, naming the offending value."""
    code: ErrorCode
    """A stable :class:`~protocol.errors.ErrorCode`."""
    ref: str | None = None
    """The id the error is about (``call_id``, ``query_id``, ``agent_id``, collaboration ``session_id``), when there is one."""
