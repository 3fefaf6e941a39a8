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

    async def discover(self, url: str, headers: Mapping[str, str], timeout: float) -> Discovered: ...

    async def call(
        self,
        agent: InvocationAgent,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        timeout: float,
        on_progress: Callable[[str, float | None], None],
    ) -> Any: ...

    async def check(self, agent: InvocationAgent, timeout: float) -> str | None: ...

    async def aclose(self) -> None: ...


@dataclass
class ConnectorContext:
    settings: Settings
    http: aiohttp.ClientSession
    tools_changed: Callable[[str, list[ToolSchema]], Awaitable[None]] = field(repr=False)


CONNECTORS: dict[str, Callable[[ConnectorContext], Connector]] = {}
