"""The drain's parts in one process: admission, the dispatcher's stop, the hand-off and the
SIGTERM hook in front of uvicorn's handler (the real processes: tests/test_drain.py)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from types import FrameType
from typing import Any, cast

import pytest
import uvicorn

from master.errors import AgentDisconnected, AgentUnavailable
from master.gateway.drain import Drain, hook_sigterm
from master.gateway.hub import Hub
from master.query.admission import DRAINING, Admission
from master.query.events import QueryRefused
from protocol import CLOSE_SERVICE_RESTART
from tests.factories import WEATHER_TOOL, answering_agent, dispatcher_for_tests


class FakeHub:
    """What the drain asks of the hub: refuse new connections, then close them all."""

    def __init__(self) -> None:
        self.refusing: tuple[int, str] | None = None
        self.handed_off: list[int] = []

    def refuse_connections(self, code: int, reason: str) -> None:
        self.refusing = (code, reason)

    async def hand_off(self, code: int, reason: str) -> int:
        self.handed_off.append(code)
        return 0


class FakeServer(uvicorn.Server):
    """A uvicorn server that only records its exit signals."""

    def __init__(self) -> None:
        super().__init__(uvicorn.Config(app=None))
        self.exits: list[int] = []

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.exits.append(sig)


@pytest.fixture
def uvicorn_sigterm() -> Iterator[FakeServer]:
    """SIGTERM handled by a (fake) uvicorn server, as under ``uvicorn.Server.serve``."""
    server = FakeServer()
    original = signal.signal(signal.SIGTERM, server.handle_exit)
    try:
        yield server
    finally:
        signal.signal(signal.SIGTERM, original)


def test_closed_admission_refuses_with_draining_and_lets_slots_finish() -> None:
    admission = Admission(4)
    admission.enter()
    admission.close("stopping")
    with pytest.raises(QueryRefused) as refused:
        admission.enter()
    assert (refused.value.code, refused.value.message) == (DRAINING, "stopping")
    admission.leave()
    assert admission.in_flight == 0


async def test_drain_waits_for_the_query_in_flight_then_hands_off() -> None:
    admission = Admission(4)
    hub = FakeHub()
    async with dispatcher_for_tests() as dispatcher:
        drain = Drain(seconds=60, admission=admission, dispatcher=dispatcher, hub=cast(Hub, hub))
        admission.enter()  # a query in flight
        running = asyncio.create_task(drain.run())
        async with asyncio.timeout(30):
            while hub.refusing is None:
                await asyncio.sleep(0.01)
        assert drain.draining and hub.refusing[0] == CLOSE_SERVICE_RESTART
        assert admission.closed is not None
        with pytest.raises(QueryRefused) as refused:
            admission.enter()
        assert refused.value.code == DRAINING
        assert not hub.handed_off  # the query still runs
        admission.leave()
        async with asyncio.timeout(30):
            await running
        assert hub.handed_off == [CLOSE_SERVICE_RESTART]
        with pytest.raises(AgentUnavailable, match="takes no new calls"):
            agent = answering_agent(dispatcher, "late", [WEATHER_TOOL], lambda name, args: {})
            await dispatcher.call(agent, "get_weather", {"city": "Rome"})


async def test_a_call_past_the_deadline_fails_naming_it() -> None:
    hub = FakeHub()
    async with dispatcher_for_tests() as dispatcher:
        silent = answering_agent(dispatcher, "silent", [WEATHER_TOOL])  # never answers
        call = asyncio.create_task(dispatcher.call(silent, "get_weather", {"city": "Oslo"}))
        async with asyncio.timeout(30):
            while dispatcher.in_flight == 0:
                await asyncio.sleep(0.01)
        drain = Drain(seconds=0, admission=Admission(4), dispatcher=dispatcher, hub=cast(Hub, hub))
        await drain.run()
        with pytest.raises(AgentDisconnected) as failed:
            await call
        assert "did not finish within its drain deadline (OPENAGENT_DRAIN_SECONDS=0)" in str(failed.value)
        assert hub.handed_off == [CLOSE_SERVICE_RESTART]


async def test_sigterm_drains_before_uvicorn_stops(uvicorn_sigterm: FakeServer) -> None:
    hub = FakeHub()
    async with dispatcher_for_tests() as dispatcher:
        drain = Drain(seconds=60, admission=Admission(4), dispatcher=dispatcher, hub=cast(Hub, hub))
        undo = hook_sigterm(drain)
        assert undo is not None
        handler: Any = signal.getsignal(signal.SIGTERM)
        handler(signal.SIGTERM, None)  # what the interpreter does on SIGTERM
        async with asyncio.timeout(30):
            while drain.task is None:
                await asyncio.sleep(0.01)
            await drain.task
        assert hub.handed_off == [CLOSE_SERVICE_RESTART]
        assert uvicorn_sigterm.exits == [signal.SIGTERM]  # uvicorn stops after the drain
        handler(signal.SIGTERM, None)  # a second SIGTERM goes straight to uvicorn
        assert uvicorn_sigterm.exits == [signal.SIGTERM, signal.SIGTERM]
        undo()
        assert signal.getsignal(signal.SIGTERM) == uvicorn_sigterm.handle_exit


async def test_no_hook_when_sigterm_is_not_uvicorns() -> None:
    async with dispatcher_for_tests() as dispatcher:
        drain = Drain(seconds=60, admission=Admission(4), dispatcher=dispatcher, hub=cast(Hub, FakeHub()))
        original = signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            assert hook_sigterm(drain) is None
            assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        finally:
            signal.signal(signal.SIGTERM, original)
