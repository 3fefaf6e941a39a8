"""Agents reached through another protocol: MCP servers and A2A agents registered with ``POST /register``.

Such an agent is stored and followed exactly like an HTTP invocation agent
(:mod:`master.agents.invocation`: the same Redis index and TTL, reloaded at start-up and across
masters, health-checked by ``/refresh``, a row in ``GET /agents``); only its ``transport`` differs,
and a :class:`Connector` of that transport lists its tools, calls them and checks its health.

A connector is built once per master from :data:`CONNECTORS` (a transport name and a factory
taking a :class:`ConnectorContext`). Header values given at registration (``mcp_headers``,
``a2a_headers``) are secrets: a connector sends them and never logs them, never puts them in an
error message, and the agent's row never shows them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import aiohttp

from master.agents.url_policy import AgentUrlPolicy
from master.errors import MasterError
from master.settings import Settings
from protocol import ToolSchema

if TYPE_CHECKING:
    from master.agents.invocation import InvocationAgent

ProgressSink = Callable[[str, float | None], None]
"""``(message, fraction done or None)``: a remote call's progress, relayed as ``tool_progress``."""


class ConnectorError(MasterError):
    """The remote agent could not be listed or reached; the message never holds a header value."""


@dataclass(frozen=True)
class Discovered:
    """What a connector learnt about a remote agent at registration."""

    tools: list[ToolSchema]
    metadata: dict[str, Any] = field(default_factory=dict)
    """Shown in ``GET /agents`` (the server's name and version, the card's summary...)."""
    agent_id: str | None = None
    """An id the remote agent suggests (an A2A card's name), used when the registration gives none."""
    endpoints: list[str] = field(default_factory=list)
    """Other URLs the master will call for the agent (an A2A card's endpoint): the agent URL
    policy judges them at registration like the registered URL."""


class Connector(Protocol):
    """How the master talks to the agents of one transport."""

    transport: str

    async def discover(self, url: str, headers: Mapping[str, str], wait_seconds: float) -> Discovered:
        """List the agent's tools; raises :class:`ConnectorError`."""
        ...

    async def call(
        self,
        agent: InvocationAgent,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        wait_seconds: float,
        on_progress: ProgressSink,
    ) -> Any:
        """The tool's result. Raises :class:`master.errors.ToolFailed` for a tool error and
        :class:`master.errors.AgentUnavailable` when the agent cannot be reached. Cancelled when
        the call times out or its asker goes away: it then cancels the remote work it started."""
        ...

    async def check(self, agent: InvocationAgent, wait_seconds: float) -> str | None:
        """``None`` when the agent answers, else why not."""
        ...

    async def forget(self, agent_id: str) -> None:
        """Close what the connector holds for ``agent_id`` (unregistered, here or on another master)."""
        ...

    async def aclose(self) -> None:
        """Close what the connector holds (the master stops)."""
        ...


ToolsChanged = Callable[[str, list[ToolSchema]], Awaitable[None]]
"""``(agent_id, tools)``: a remote agent said its tool list changed."""


@dataclass(frozen=True)
class ConnectorContext:
    """What a connector is built with."""

    settings: Settings
    http: aiohttp.ClientSession
    """The master's shared aiohttp session (a connector may keep its own protocol client instead)."""
    tools_changed: ToolsChanged
    url_policy: AgentUrlPolicy = field(default_factory=AgentUrlPolicy)
    """The agent URL policy: a connector's HTTP clients connect only to addresses it allowed."""


ConnectorFactory = Callable[[ConnectorContext], Connector]

CONNECTORS: dict[str, ConnectorFactory] = {}
"""Transport name (``mcp``, ``a2a``) → factory; each connector module adds its own below."""


def transport_of(body: Mapping[str, Any]) -> str:
    """The transport a ``POST /register`` body asks for: ``mcp`` with ``mcp_url``, ``a2a`` with
    ``a2a_url``, else ``invocation``."""
    if "mcp_url" in body:
        return "mcp"
    if "a2a_url" in body:
        return "a2a"
    return "invocation"


def _mcp(context: ConnectorContext) -> Connector:
    from master.agents.mcp_client import McpConnector  # the mcp SDK is imported when a master starts

    return McpConnector(context)


CONNECTORS["mcp"] = _mcp


def _a2a(context: ConnectorContext) -> Connector:
    from master.agents.a2a_client import connector  # it imports this module

    return connector(context)


CONNECTORS["a2a"] = _a2a
