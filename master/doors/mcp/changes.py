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

The tool list is only compared while someone listens (building it is linear in the tools, and
ten thousand agents may register in a burst), and a burst of pokes is taken as one
(:data:`SETTLE_SECONDS`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Callable, Hashable

from mcp.server.connection import Connection
from mcp.server.subscriptions import InMemorySubscriptionBus, ServerEvent, ToolsListChanged

logger = logging.getLogger("master.doors.mcp")

NOTIFY_TIMEOUT = 5.0
"""Seconds to hand one session its notification (a client that stopped reading loses it)."""
SETTLE_SECONDS = 0.1
"""After a poke, the watch waits this long for more changes before it compares."""


class ListenerBus(InMemorySubscriptionBus):
    """The SDK's in-process bus, counting its listeners (the open ``subscriptions/listen`` streams)."""

    def __init__(self, on_subscribe: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.listeners = 0
        self._on_subscribe = on_subscribe

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        unsubscribe = super().subscribe(listener)
        self.listeners += 1
        if self._on_subscribe is not None:
            self._on_subscribe()
        done = False

        def once() -> None:
            nonlocal done
            if not done:
                done = True
                self.listeners -= 1
                unsubscribe()

        return once


class ToolListWatch:
    """Tells the listening clients when ``fingerprint()`` changes (module docstring)."""

    def __init__(self, fingerprint: Callable[[], Hashable], *, interval: float) -> None:
        self._fingerprint = fingerprint
        self.bus = ListenerBus(self._listener_came)
        """The bus the ``subscriptions/listen`` handler serves from."""
        self._interval = interval
        self._sessions: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last: Hashable | None = None
        """The tool list the listening clients saw (``None``: nobody listens)."""
        self.changes = 0
        """How many changes were told."""
        self.rounds = 0
        """How many times the watch woke (tests wait on it)."""

    def session(self, connection: Connection) -> None:
        """A 2025 client's session: tell it too (forgotten with the connection)."""
        if connection not in self._sessions:
            self._sessions.add(connection)
            self._listener_came()

    def _listener_came(self) -> None:
        """A client starts listening: the tools it saw are the ones to compare with (taken now,
        so that a change right after is not missed)."""
        if self._last is None:
            self._last = self._fingerprint()

    def poke(self) -> None:
        """Something changed that may change the tools: check now."""
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="mcp-tools-watch")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _listening(self) -> bool:
        return self.bus.listeners > 0 or len(self._sessions) > 0

    async def _watch(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._interval):
                    await self._wake.wait()
                await asyncio.sleep(SETTLE_SECONDS)  # a burst of changes is one
            self._wake.clear()
            self.rounds += 1
            if not self._listening():
                self._last = None
                continue
            try:
                now = self._fingerprint()
                if self._last is not None and now != self._last:
                    await self._tell()
                self._last = now
            except Exception:  # the watch must outlive anything one check throws
                logger.exception("checking the tool list for MCP clients failed")

    async def _tell(self) -> None:
        self.changes += 1
        await self.bus.publish(ToolsListChanged())
        for connection in list(self._sessions):
            if connection.initialized.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(NOTIFY_TIMEOUT):
                        await connection.send_tool_list_changed()
        logger.info("told MCP clients the tool list changed")
