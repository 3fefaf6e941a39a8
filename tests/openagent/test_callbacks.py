"""``openagent._callbacks``: a call's result outlives a master restart.

A fake master on loopback speaks just enough HTTP: while "down" it closes every connection,
then it answers. The result must be retried until the master comes back (a plain restart takes
a second or more), honour a 503's ``Retry-After``, and stop when the call's record has expired.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
import pytest

from openagent._callbacks import CallReporter
from protocol import ToolResult
from tests.openagent.conftest import WAIT


@dataclass
class FlakyMaster:
    """Closes the first ``down_for`` connections, answers ``replies`` next, then 200."""

    down_for: int = 0
    replies: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    attempts: asyncio.Queue[float] = field(default_factory=asyncio.Queue)
    """When each request arrived (:func:`time.monotonic`)."""
    bodies: asyncio.Queue[bytes] = field(default_factory=asyncio.Queue)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            self.attempts.put_nowait(time.monotonic())
            if self.down_for > 0:
                self.down_for -= 1
                return
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            body = await reader.readexactly(length)
            status, headers = self.replies.pop(0) if self.replies else (200, {})
            if status == 200:
                self.bodies.put_nowait(body)
            extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
            payload = b'{"detail": "not now"}'
            writer.write(
                f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
                f"Connection: close\r\n{extra}\r\n".encode()
                + payload
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=WAIT)) as http:
        yield http


async def serve(master: FlakyMaster) -> asyncio.Server:
    server = await asyncio.start_server(master.handle, "127.0.0.1", 0)
    master.port = server.sockets[0].getsockname()[1]
    return server


def reporter(
    session: aiohttp.ClientSession, master: FlakyMaster, window: float | None = None
) -> CallReporter:
    url = f"http://127.0.0.1:{master.port}/tool_callback?call_id=c1&token=t"
    return CallReporter(lambda: session, "c1", url, result_window=window)


RESULT = ToolResult(call_id="c1", success=True, result={"echo": "hi"})


async def test_a_result_waits_for_a_master_that_is_down_then_answers(
    session: aiohttp.ClientSession,
) -> None:
    master = FlakyMaster(down_for=6)  # more attempts than a few tenths of a second allow
    server = await serve(master)
    try:
        delivery = asyncio.create_task(reporter(session, master).deliver(RESULT))
        async with asyncio.timeout(WAIT):
            body = await master.bodies.get()
            await delivery
        assert b'"echo":"hi"' in body and b'"call_id":"c1"' in body
        assert master.attempts.qsize() == 7  # six refused while down, then the one that landed
    finally:
        server.close()


async def test_a_503_retry_after_is_honoured(session: aiohttp.ClientSession) -> None:
    master = FlakyMaster(replies=[(503, {"Retry-After": "2"})])
    server = await serve(master)
    try:
        async with asyncio.timeout(WAIT):
            await reporter(session, master).deliver(RESULT)
            await master.bodies.get()
        first, second = master.attempts.get_nowait(), master.attempts.get_nowait()
        assert second - first >= 1.9  # waited as told, not the backoff's first tenth of a second
    finally:
        server.close()


async def test_retries_stop_when_the_call_record_has_expired(
    session: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    master = FlakyMaster(down_for=10_000)
    server = await serve(master)
    try:
        with caplog.at_level(logging.ERROR, "openagent.invocation"):
            async with asyncio.timeout(WAIT):
                await reporter(session, master, window=1.0).deliver(RESULT)
        assert master.bodies.empty()
        assert any("the master has forgotten the call" in r.getMessage() for r in caplog.records)
    finally:
        server.close()


async def test_a_4xx_is_final(session: aiohttp.ClientSession) -> None:
    master = FlakyMaster(replies=[(404, {})])
    server = await serve(master)
    try:
        async with asyncio.timeout(WAIT):
            await reporter(session, master).deliver(RESULT)
        assert master.attempts.qsize() == 1 and master.bodies.empty()
    finally:
        server.close()


async def test_retries_go_on_until_the_whole_window_closes_not_a_number_of_attempts(
    session: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    """The master's record of a call lasts its timeout plus 60 s (90 s by default): an agent
    retrying its result gives up only when that window has closed, however many attempts it
    took. A clock of its own moves by each wait, so the whole window passes at once."""
    master = FlakyMaster(down_for=10_000)
    server = await serve(master)
    now = 1000.0
    waited: list[float] = []

    def clock() -> float:
        return now

    async def sleep(seconds: float) -> None:
        nonlocal now
        waited.append(seconds)
        now += seconds

    url = f"http://127.0.0.1:{master.port}/tool_callback?call_id=c1&token=t"
    reporter = CallReporter(lambda: session, "c1", url, result_window=None, clock=clock, sleep=sleep)
    try:
        with caplog.at_level(logging.ERROR, "openagent.invocation"):
            async with asyncio.timeout(WAIT):
                await reporter.deliver(RESULT)
        assert sum(waited) == pytest.approx(90.0)  # the default window, to its end
        assert master.attempts.qsize() == len(waited) + 1 > 10  # one more than the waits between them
        assert master.bodies.empty()
        assert any("the master has forgotten the call" in r.getMessage() for r in caplog.records)
    finally:
        server.close()
