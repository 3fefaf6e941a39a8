"""The workspace schema (version 2): what the UI exports and uploads, and what the master restores.

A workspace is the master's URLs, the agents (id, transport, invocation base URL or MCP
server or A2A agent URL, tools, handler module, metadata), the links between agents and the
orchestrator, and the canvas layout. Version 2 added MCP servers (``transport: mcp``) and A2A
agents (``transport: a2a``); a version 1 file is
read as it always was. Every model forbids unknown fields, so a typo is an error naming the field rather
than a silent drop. The JSON Schema published in ``docs/workspace.schema.json`` is
``Workspace.model_json_schema()`` (:func:`json_schema_text`; regenerate the file with
``python -m openagent.workspace schema > docs/workspace.schema.json``).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema, model_validator

from protocol import AGENT_ID_PATTERN

SCHEMA_VERSION: Literal[2] = 2
"""The workspace schema version this SDK writes; it reads this one and every earlier one."""
SchemaVersion = Literal[1, 2]
"""The versions this SDK reads."""
ORCHESTRATOR_NODE = "orchestrator"
"""The id of the orchestrator node in ``links`` and ``layout``."""
QUERY_CLIENT_ID = "query-client"
"""The id of the built-in query client: stripped from exports, injected on load."""
ALLOWED_HANDLER_FOLDERS = ("agents", "system_agents", "sample_agents")
"""The only packages a workspace's handler modules may come from."""
HANDLER_PATTERN = (
    r"^(agents|system_agents|sample_agents)(\.[A-Za-z_][A-Za-z0-9_]*)+(:[A-Za-z_][A-Za-z0-9_]*)?$"
)
"""``folder.module`` or ``folder.module:function``, the folder one of :data:`ALLOWED_HANDLER_FOLDERS`."""

NodeId = Annotated[str, Field(pattern=AGENT_ID_PATTERN)]
HEADER_NAME_PATTERN = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$"
"""An HTTP header name (an RFC 9110 token)."""
SECRET_REFERENCE_PATTERN = r"^([A-Za-z][A-Za-z0-9-]{0,31} )?\$\{[A-Za-z_][A-Za-z0-9_]{0,127}\}$"
"""A header value in a workspace: a reference to an environment variable, ``${MCP_TOKEN}``,
optionally after an authentication scheme, ``Bearer ${MCP_TOKEN}``. Never the secret itself."""
SECRET_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]{0,127})\}")
"""Finds the variable name of a :data:`SECRET_REFERENCE_PATTERN` value."""


def _secret_reference(value: str) -> str:
    # The message never repeats the value: it may be the very secret that must not be here.
    if not re.fullmatch(SECRET_REFERENCE_PATTERN, value):
        raise ValueError(
            "must refer to an environment variable, e.g. '${MCP_TOKEN}' or 'Bearer ${MCP_TOKEN}'; "
            "a workspace never holds the secret itself"
        )
    return value


HeaderReferences = dict[
    Annotated[str, Field(pattern=HEADER_NAME_PATTERN)],
    Annotated[
        str,
        AfterValidator(_secret_reference),
        WithJsonSchema({"type": "string", "pattern": SECRET_REFERENCE_PATTERN}),
    ],
]
"""Header names and their values as references to environment variables (``mcp_headers``,
``a2a_headers``)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class MasterUrls(_Strict):
    """Where the master that owns this workspace listens. Never carries credentials."""

    base_url: Annotated[str, Field(pattern=r"^https?://[^\s]+$", max_length=2048)] = "http://127.0.0.1:8000"
    """HTTP base URL of the master (``MASTER_BASE_URL``)."""
    ws_url: Annotated[str, Field(pattern=r"^wss?://[^\s]+$", max_length=2048)] = "ws://127.0.0.1:8000/ws"
    """WebSocket URL agents connect to (``MASTER_WS``)."""


class ToolSpec(_Strict):
    """One tool of an agent, in OpenAI function-calling shape."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
    """Tool name, unique within its agent."""
    description: str = ""
    """What the tool does; the orchestrator's model reads it."""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON Schema of the arguments object."""
    endpoint: str | None = None
    """HTTP path of the tool on an invocation agent (e.g. ``/run``); ``/invoke`` when omitted."""
    requires_approval: bool | None = None
    """``true``: each call the orchestrator makes waits for a person's approval
    (``POST /approvals/{approval_id}``)."""


class AgentSpec(_Strict):
    """One agent of the workspace."""

    agent_id: NodeId
    """Unique id on the master."""
    role: Literal["action", "query"] = "action"
    """``action`` agents expose tools; ``query`` agents ask questions (the built-in query client)."""
    transport: Literal["websocket", "invocation", "mcp", "a2a"] = "websocket"
    """``websocket``: connects to the master (the YAML runner can start it from ``handler``).
    ``invocation``: an HTTP server at ``invocation_base_url`` the master calls.
    ``mcp``: a remote MCP server (Streamable HTTP) at ``mcp_url`` the master calls.
    ``a2a``: an A2A agent at ``a2a_url`` the master calls (its tools are its card's skills)."""
    invocation_base_url: (
        Annotated[str, Field(pattern=r"^https?://[^\s/]+(/\S*)?$", max_length=2048)] | None
    ) = None
    """Base URL of an invocation agent's HTTP server; required for, and only for, ``invocation``."""
    mcp_url: Annotated[str, Field(pattern=r"^https?://[^\s/]+(/\S*)?$", max_length=2048)] | None = None
    """The MCP server's Streamable-HTTP endpoint, e.g. ``http://127.0.0.1:9000/mcp``; required
    for, and only for, ``mcp``."""
    mcp_headers: HeaderReferences = Field(default_factory=dict)
    """Headers the master sends to the MCP server, each value a reference to an environment
    variable (``Authorization: Bearer ${MCP_TOKEN}``) resolved when the workspace is restored;
    a workspace never holds the secret itself."""
    a2a_url: Annotated[str, Field(pattern=r"^https?://[^\s/]+(/\S*)?$", max_length=2048)] | None = None
    """The A2A agent's base URL (its card is at ``{a2a_url}/.well-known/agent-card.json``);
    required for, and only for, ``a2a``."""
    a2a_headers: HeaderReferences = Field(default_factory=dict)
    """Headers the master sends to the A2A agent, references like ``mcp_headers``."""
    handler: Annotated[str, Field(pattern=HANDLER_PATTERN)] | None = None
    """Module of the agent's code, e.g. ``agents.unit_converter`` or ``agents.unit_converter:handle_tool``."""
    tools: list[ToolSpec] = Field(default_factory=list)
    """The agent's tools."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Free-form description (secrets in it are dropped on export)."""
    builtin: bool = False
    """The built-in query client (always present in the UI, never exported)."""

    @model_validator(mode="after")
    def _transport_fields(self) -> AgentSpec:
        if self.transport == "invocation" and self.invocation_base_url is None:
            raise ValueError(f"agent {self.agent_id!r}: transport 'invocation' needs invocation_base_url")
        if self.transport != "invocation" and self.invocation_base_url is not None:
            raise ValueError(
                f"agent {self.agent_id!r}: invocation_base_url is only for transport 'invocation'"
            )
        if self.transport == "mcp" and self.mcp_url is None:
            raise ValueError(f"agent {self.agent_id!r}: transport 'mcp' needs mcp_url")
        if self.transport != "mcp" and (self.mcp_url is not None or self.mcp_headers):
            raise ValueError(f"agent {self.agent_id!r}: mcp_url and mcp_headers are only for transport 'mcp'")
        if self.transport == "a2a" and self.a2a_url is None:
            raise ValueError(f"agent {self.agent_id!r}: transport 'a2a' needs a2a_url")
        if self.transport != "a2a" and (self.a2a_url is not None or self.a2a_headers):
            raise ValueError(f"agent {self.agent_id!r}: a2a_url and a2a_headers are only for transport 'a2a'")
        if self.builtin and self.role != "query":
            raise ValueError(f"agent {self.agent_id!r}: only a query agent can be builtin")
        names = [tool.name for tool in self.tools]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"agent {self.agent_id!r}: duplicate tool names {duplicates}")
        return self


class Link(_Strict):
    """An edge of the canvas: ``source`` is linked to ``target`` (usually the orchestrator)."""

    source: NodeId
    """An agent id, or ``orchestrator``."""
    target: NodeId = ORCHESTRATOR_NODE
    """An agent id, or ``orchestrator``."""


class Position(_Strict):
    """A node's position on the canvas."""

    x: float = 0.0
    y: float = 0.0


class Viewport(_Strict):
    """The canvas viewport."""

    x: float = 0.0
    y: float = 0.0
    zoom: Annotated[float, Field(gt=0)] = 1.0


class Layout(_Strict):
    """Canvas layout: node positions keyed by node id (agent ids and ``orchestrator``)."""

    nodes: dict[NodeId, Position] = Field(default_factory=dict)
    viewport: Viewport | None = None


class Workspace(_Strict):
    """An OpenAgent workspace: master URLs, agents, links to the orchestrator, canvas layout."""

    model_config = ConfigDict(
        extra="forbid",
        use_attribute_docstrings=True,
        frozen=True,
        json_schema_extra={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://openagent.dev/schemas/workspace-v2.json",
        },
    )

    version: SchemaVersion = SCHEMA_VERSION
    """Schema version: this SDK writes 2 and reads 1 and 2 (2 added ``transport: mcp`` and ``a2a``)."""
    master: MasterUrls = Field(default_factory=MasterUrls)
    """The master's URLs."""
    agents: list[AgentSpec] = Field(default_factory=list)
    """The agents, in any order (exports sort them by ``agent_id``)."""
    links: list[Link] = Field(default_factory=list)
    """Edges of the canvas; an action agent linked to the orchestrator may be used by queries."""
    layout: Layout = Field(default_factory=Layout)
    """Canvas layout."""

    @model_validator(mode="after")
    def _consistent(self) -> Workspace:
        ids = [agent.agent_id for agent in self.agents]
        duplicates = sorted({agent_id for agent_id in ids if ids.count(agent_id) > 1})
        if duplicates:
            raise ValueError(f"duplicate agent ids {duplicates}")
        if ORCHESTRATOR_NODE in ids:
            raise ValueError(f"{ORCHESTRATOR_NODE!r} is the orchestrator's node id; rename the agent")
        known = {*ids, ORCHESTRATOR_NODE, QUERY_CLIENT_ID}
        for link in self.links:
            for end in (link.source, link.target):
                if end not in known:
                    raise ValueError(f"link {link.source!r} -> {link.target!r} names unknown node {end!r}")
        return self

    def secret_references(self) -> list[str]:
        """The environment variables the agents' header values refer to, sorted."""
        names = {
            match.group(1)
            for agent in self.agents
            for value in [*agent.mcp_headers.values(), *agent.a2a_headers.values()]
            for match in SECRET_REFERENCE.finditer(value)
        }
        return sorted(names)

    def agent(self, agent_id: str) -> AgentSpec | None:
        """The agent with this id, if any."""
        return next((agent for agent in self.agents if agent.agent_id == agent_id), None)

    def linked_to_orchestrator(self) -> list[str]:
        """Agent ids linked (either way) to the orchestrator, sorted."""
        ends = {
            link.source if link.target == ORCHESTRATOR_NODE else link.target
            for link in self.links
            if ORCHESTRATOR_NODE in (link.source, link.target)
        }
        return sorted(ends - {ORCHESTRATOR_NODE})


def json_schema() -> dict[str, Any]:
    """The workspace's JSON Schema (what ``docs/workspace.schema.json`` holds)."""
    return Workspace.model_json_schema()


def json_schema_text() -> str:
    """:func:`json_schema` as the exact text of ``docs/workspace.schema.json``."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
