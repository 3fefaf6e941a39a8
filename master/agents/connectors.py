"""TEMPORARY stub of the connector seam (SEAM.md section 2) until the lead lands it on main.

Replaced wholesale by main's ``master/agents/connectors.py`` at the merge; only the names the
A2A connector uses are here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import aiohttp

from master.settings import Settings
from protocol import ToolSchema

if TYPE_CHECKING:
    from master.agents.invocation import InvocationAgent


class ConnectorError(Exception):
    """A discovery that failed; the message is safe to show (never contains header values)."""


@dataclass(frozen=True)
class Discovered:
    tools: list[ToolSchema]
    metadata: dict[str, Any]
    agent_id: str | None = None


class Connector(Protocol):
    transport: str

    async def discover(self, url: str, headers: Mapping[str, str], timeout: float) -> Discovered: ...  # noqa: ASYNC109

    async def call(
        self,
        agent: InvocationAgent,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        timeout: float,  # noqa: ASYNC109
        on_progress: Callable[[str, float | None], None],
    ) -> Any: ...

    async def check(self, agent: InvocationAgent, timeout: float) -> str | None: ...  # noqa: ASYNC109

    async def aclose(self) -> None: ...


@dataclass
class ConnectorContext:
    settings: Settings
    http: aiohttp.ClientSession | None = None
    tools_changed: Callable[[str, list[ToolSchema]], Any] = field(default=lambda agent_id, tools: None)


CONNECTORS: dict[str, Callable[[ConnectorContext], Connector]] = {}
