"""The workspace schema (version 1): what the UI exports and uploads, and what the master restores.

A workspace is the master's URLs, the agents (id, transport, invocation base URL or protocol
URL and headers, tools, handler module, metadata), the links between agents and the orchestrator, and the canvas
layout. Every model forbids unknown fields, so a typo is an error naming the field rather
than a silent drop. The JSON Schema published in ``docs/workspace.schema.json`` is
``Workspace.model_json_schema()`` (:func:`json_schema_text`; regenerate the file with
``python -m openagent.workspace schema > docs/workspace.schema.json``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from protocol import AGENT_ID_PATTERN

SCHEMA_VERSION: Literal[1] = 1
"""The workspace schema version this SDK reads and writes."""
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

PROTOCOL_TRANSPORTS = ("a2a",)
"""Transports of agents the master reaches by a standard protocol at ``url``, with ``headers``."""
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""``${NAME}``: a variable of the master's environment, put in a header value on restore."""
HEADER_VALUE_PATTERN = r"^[ -#%-~]*(\$\{[A-Za-z_][A-Za-z0-9_]*\}[ -#%-~]*)+$"
"""A header value of a workspace: printable ASCII holding at least one ``${NAME}`` and no other ``$``."""

NodeId = Annotated[str, Field(pattern=AGENT_ID_PATTERN)]
HeaderName = Annotated[str, Field(pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,256}$")]
HeaderValue = Annotated[str, Field(max_length=4096, json_schema_extra={"pattern": HEADER_VALUE_PATTERN})]
"""Checked by :meth:`AgentSpec._references_only`, whose message says what to write instead."""


def resolve_headers(headers: dict[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """The header values with each ``${NAME}`` replaced by ``environ[NAME]``; ``KeyError`` naming
    the first variable that is not set, ``ValueError`` naming one whose value cannot be sent in a
    header (a control character: it would start another header)."""
    names = sorted({name for value in headers.values() for name in ENV_REFERENCE.findall(value)})
    for name in names:
        if name not in environ:
            raise KeyError(name)
        if any(ord(char) < 32 or ord(char) == 127 for char in environ[name]):
            raise ValueError(f"the variable {name!r} holds a control character")
    return {
        key: ENV_REFERENCE.sub(lambda match: environ[match.group(1)], value) for key, value in headers.items()
    }


def header_reference(agent_id: str, header: str) -> str:
    """The variable an export names for a header's value: ``${CURRENCY_AGENT_X_API_KEY}``."""
    return "${" + re.sub(r"[^A-Z0-9]+", "_", f"{agent_id}_{header}".upper()).strip("_") + "}"


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


class AgentSpec(_Strict):
    """One agent of the workspace."""

    agent_id: NodeId
    """Unique id on the master."""
    role: Literal["action", "query"] = "action"
    """``action`` agents expose tools; ``query`` agents ask questions (the built-in query client)."""
    transport: Literal["websocket", "invocation", "a2a"] = "websocket"
    """``websocket``: connects to the master (the YAML runner can start it from ``handler``).
    ``invocation``: an HTTP server at ``invocation_base_url`` the master calls.
    ``a2a``: an A2A agent at ``url`` (its tools are its card's skills, read on restore)."""
    invocation_base_url: (
        Annotated[str, Field(pattern=r"^https?://[^\s/]+(/\S*)?$", max_length=2048)] | None
    ) = None
    """Base URL of an invocation agent's HTTP server; required for, and only for, ``invocation``."""
    url: Annotated[str, Field(pattern=r"^https?://[^\s/]+(/\S*)?$", max_length=2048)] | None = None
    """Where a protocol agent listens (an A2A agent's base URL, its card under
    ``/.well-known/agent-card.json``); required for, and only for, ``a2a``."""
    headers: dict[HeaderName, HeaderValue] = Field(default_factory=dict)
    """HTTP headers the master sends to a protocol agent. Each value refers to variables of the
    master's environment, resolved on restore, so that a workspace never holds a secret:
    ``{"Authorization": "Bearer ${A2A_TOKEN}"}``."""
    handler: Annotated[str, Field(pattern=HANDLER_PATTERN)] | None = None
    """Module of the agent's code, e.g. ``agents.unit_converter`` or ``agents.unit_converter:handle_tool``."""
    tools: list[ToolSpec] = Field(default_factory=list)
    """The agent's tools."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Free-form description (secrets in it are dropped on export)."""
    builtin: bool = False
    """The built-in query client (always present in the UI, never exported)."""

    @field_validator("headers")
    @classmethod
    def _references_only(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if not re.fullmatch(HEADER_VALUE_PATTERN, value):
                raise ValueError(
                    f"header {name!r} must refer to the master's environment, e.g. 'Bearer ${{A2A_TOKEN}}': "
                    "a workspace never holds a secret"
                )
        return headers

    @model_validator(mode="after")
    def _transport_fields(self) -> AgentSpec:
        if self.transport == "invocation" and self.invocation_base_url is None:
            raise ValueError(f"agent {self.agent_id!r}: transport 'invocation' needs invocation_base_url")
        if self.transport != "invocation" and self.invocation_base_url is not None:
            raise ValueError(
                f"agent {self.agent_id!r}: invocation_base_url is only for transport 'invocation'"
            )
        protocol = self.transport in PROTOCOL_TRANSPORTS
        if protocol and self.url is None:
            raise ValueError(f"agent {self.agent_id!r}: transport {self.transport!r} needs url")
        if not protocol and (self.url is not None or self.headers):
            raise ValueError(
                f"agent {self.agent_id!r}: url and headers are only for transports {list(PROTOCOL_TRANSPORTS)}"
            )
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
            "$id": "https://openagent.dev/schemas/workspace-v1.json",
        },
    )

    version: Literal[1] = SCHEMA_VERSION
    """Schema version; this SDK reads and writes version 1."""
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
