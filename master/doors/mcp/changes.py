"""``notifications/tools/list_changed`` for the clients listening, when the hub's tools change.

The tools come from several sources (WebSocket agents here, other masters' agents, HTTP
invocation and registered protocol agents, each up or down), so the watch compares a fingerprint
of the tool list rather than trusting every source to say it changed: it checks at once when
poked (an agent connected to or left this master, a cluster heartbeat re-read the other
masters' agents) and every ``interval`` seconds anyway (health checks, agents registered
through another master). A change is told to:

- 2026-07-28 clients with a ``subscriptions/listen`` stream open: through the SDK's
  :class:`~mcp.server.subscriptions.SubscriptionBus`;
- 2025 clients with a session: on their session's standalone stream (the GET stream).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Callable, Hashable

from mcp.server.connection import Connection
from mcp.server.subscriptions import SubscriptionBus, ToolsListChanged

logger = logging.getLogger("master.doors.mcp")

NOTIFY_TIMEOUT = 5.0
"""Seconds to hand one session its notification (a client that stopped reading loses it)."""


class ToolListWatch:
    """Tells the listening clients when ``fingerprint()`` changes (module docstring)."""

    def __init__(self, fingerprint: Callable[[], Hashable], bus: SubscriptionBus, *, interval: float) -> None:
        self._fingerprint = fingerprint
        self._bus = bus
        self._interval = interval
        self._sessions: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.changes = 0
        """How many changes were told (tests wait on it)."""

    def session(self, connection: Connection) -> None:
        """A 2025 client's session: tell it too (forgotten with the connection)."""
        self._sessions.add(connection)

    def poke(self) -> None:
        """Something changed that may change the tools: check now."""
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="mcp-tools-watch")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _watch(self) -> None:
        last = self._fingerprint()
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._interval):
                    await self._wake.wait()
            self._wake.clear()
            try:
                now = self._fingerprint()
                if now != last:
                    last = now
                    await self._tell()
            except Exception:  # the watch must outlive anything one check throws
                logger.exception("checking the tool list for MCP clients failed")

    async def _tell(self) -> None:
        self.changes += 1
        await self._bus.publish(ToolsListChanged())
        for connection in list(self._sessions):
            if connection.initialized.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(NOTIFY_TIMEOUT):
                        await connection.send_tool_list_changed()
        logger.info("told MCP clients the tool list changed")
