"""The tool-list watch of the MCP server: it compares only while someone listens, and tells
the listeners of a change once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from mcp.server.subscriptions import ServerEvent, ToolsListChanged

from master.doors.mcp.changes import ToolListWatch

DEADLINE = 30.0


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(DEADLINE):
        while not condition():
            await asyncio.sleep(0.01)


async def test_nothing_is_compared_while_nobody_listens_then_a_change_is_told() -> None:
    tools = ["a__x"]
    looked = 0

    def fingerprint() -> tuple[str, ...]:
        nonlocal looked
        looked += 1
        return tuple(tools)

    watch = ToolListWatch(fingerprint, interval=0.05)
    watch.start()
    try:
        for _ in range(100):  # a burst of registrations with nobody listening
            watch.poke()
        await until(lambda: watch.rounds >= 3)
        assert looked == 0

        heard: list[ServerEvent] = []
        unsubscribe = watch.bus.subscribe(heard.append)  # a listen stream opens
        assert looked == 1  # the list it saw, taken at once to compare with
        assert heard == []
        tools.append("b__y")
        watch.poke()
        await until(lambda: len(heard) == 1)
        assert isinstance(heard[0], ToolsListChanged) and watch.changes == 1

        unsubscribe()
        unsubscribe()  # idempotent, counted once
        assert watch.bus.listeners == 0
    finally:
        await watch.aclose()
