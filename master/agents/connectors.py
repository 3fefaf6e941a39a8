"""PROVISIONAL copy of the seam in /work/wt/_notes/SEAM.md (the lead's version replaces it at merge).

Registered protocol agents (MCP servers, A2A agents): one :class:`Connector` per transport.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import aiohttp

from master.settings import Settings
from protocol import ToolSchema

if TYPE_CHECKING:
    from master.agents.invocation import InvocationAgent


class ConnectorError(Exception):
    """Discovery or a call failed; the message is safe to show (never contains header values)."""


@dataclass(frozen=True)
class Discovered:
    tools: list[ToolSchema]
    metadata: dict[str, Any]
    agent_id: str | None = None


class Connector(Protocol):
    transport: str

    async def discover(self, url: str, headers: Mapping[str, str], timeout: float) -> Discovered: ...  # noqa: ASYNC109 - the seam

    async def call(
        self,
        agent: InvocationAgent,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        timeout: float,  # noqa: ASYNC109 - the seam's (the dispatcher bounds the call)
        on_progress: Callable[[str, float | None], None],
    ) -> Any: ...

    async def check(self, agent: InvocationAgent, timeout: float) -> str | None: ...  # noqa: ASYNC109 - the seam

    async def aclose(self) -> None: ...


@dataclass
class ConnectorContext:
    settings: Settings
    http: aiohttp.ClientSession
    tools_changed: Callable[[str, list[ToolSchema]], Awaitable[None]] = field(repr=False)


def _mcp(context: ConnectorContext) -> Connector:
    from master.agents.mcp_client import McpConnector  # imports the mcp SDK only when built

    return McpConnector(context)


CONNECTORS: dict[str, Callable[[ConnectorContext], Connector]] = {"mcp": _mcp}
