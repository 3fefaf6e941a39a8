"""Shared helpers of the SDK tests: a small fake master that speaks the protocol, and the
``openagent`` command's surroundings.

:class:`FakeMaster` is a real ``websockets`` server on 127.0.0.1. It authenticates,
registers agents (replacing an older connection of the same ``agent_id`` with
``error agent_replaced`` + close 4001, like the real master), answers pings, and
queues every other frame for the test to inspect and answer.

The command's tests run it in ``workdir`` (no ``.env``, no master variables), point it at
their master with ``point_cli`` and run it with :func:`run_cli`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest
from pydantic import BaseModel
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from openagent import ClientConfig, cli
from protocol import (
    CLOSE_AGENT_REPLACED,
    CLOSE_POLICY_VIOLATION,
    ErrorMessage,
    Message,
    Ping,
    Pong,
    Register,
    Registered,
    dump_message,
    parse_message,
)

WAIT = 30.0
"""Upper bound of every wait in these tests, in seconds."""


def fast_config(url: str, **overrides: Any) -> ClientConfig:
    """A configuration with short timeouts and reconnect delays, pointed at ``url``."""
    values: dict[str, Any] = {
        "master_ws": url,
        "connect_timeout": 2.0,
        "registration_timeout": 2.0,
        "keepalive_interval": 0,
        "query_timeout": 5.0,
        "reconnect_initial_delay": 0.01,
        "reconnect_max_delay": 0.05,
    }
    values.update(overrides)
    return ClientConfig(**values)


async def eventually(predicate: Callable[[], bool], timeout: float = WAIT) -> None:
    """Wait until ``predicate()`` is true, polling; fail after ``timeout`` seconds."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


class FakeMaster:
    """A protocol-speaking WebSocket server standing in for the master.

    Args:
        port: Port to listen on; 0 picks a free one (see :attr:`port` after start).
        api_key: When set, connections without ``Authorization: Bearer <api_key>`` are
            closed with 1008 after the handshake (or, with ``reject_in_handshake``,
            refused with HTTP 403 like FastAPI does before ``accept``).
    """

    def __init__(
        self, *, port: int = 0, api_key: str | None = None, reject_in_handshake: bool = False
    ) -> None:
        self.port = port
        self.api_key = api_key
        self.reject_in_handshake = reject_in_handshake
        self.answer_pings = True
        self.on_register: Callable[[Register], BaseModel | None] = lambda reg: Registered(
            agent_id=reg.agent_id
        )
        """Reply to a ``register``: ``Registered``, an ``ErrorMessage`` (then close), or None (silence)."""
        self.connections: dict[str, ServerConnection] = {}
        self.request_headers: list[Headers] = []
        self.registrations: asyncio.Queue[Register] = asyncio.Queue()
        self.frames: asyncio.Queue[tuple[str, Message]] = asyncio.Queue()
        self.pings = 0
        self._server: Server | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    async def start(self) -> None:
        self._server = await serve(
            self._handler, "127.0.0.1", self.port, process_request=self._check_handshake, ping_interval=None
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Shut down like a master restart: every connection is closed with 1001."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def next_registration(self) -> Register:
        async with asyncio.timeout(WAIT):
            return await self.registrations.get()

    async def next_frame(self) -> tuple[str, Message]:
        """The next frame an agent sent (other than ``register`` and ``ping``)."""
        async with asyncio.timeout(WAIT):
            return await self.frames.get()

    async def send(self, agent_id: str, message: BaseModel) -> None:
        await self.connections[agent_id].send(dump_message(message))

    async def send_raw(self, agent_id: str, text: str) -> None:
        await self.connections[agent_id].send(text)

    async def close_connection(self, agent_id: str, code: int = 1011, reason: str = "") -> None:
        async with asyncio.timeout(WAIT):
            await self.connections[agent_id].close(code, reason)

    def abort_connection(self, agent_id: str) -> None:
        """Drop the TCP connection without a close frame (a crash or a network cut)."""
        self.connections[agent_id].transport.abort()

    def _check_handshake(self, connection: ServerConnection, request: Request) -> Response | None:
        self.request_headers.append(request.headers)
        if self.reject_in_handshake and not self._authorized(request.headers):
            return connection.respond(403, "forbidden\n")
        return None

    def _authorized(self, headers: Headers) -> bool:
        return self.api_key is None or headers.get("Authorization") == f"Bearer {self.api_key}"

    async def _handler(self, ws: ServerConnection) -> None:
        if not self._authorized(ws.request.headers if ws.request else Headers()):
            await ws.close(CLOSE_POLICY_VIOLATION, "unauthorized")
            return
        try:
            register = parse_message(await ws.recv())
        except ConnectionClosed:
            return
        assert isinstance(register, Register), register
        reply = self.on_register(register)
        if reply is None:
            await ws.wait_closed()
            return
        if isinstance(reply, ErrorMessage):
            await ws.send(dump_message(reply))
            await ws.close()
            return
        agent_id = register.agent_id
        old = self.connections.get(agent_id)
        if old is not None:
            with contextlib.suppress(ConnectionClosed):
                error = ErrorMessage(
                    message=f"agent {agent_id!r} was replaced", code="agent_replaced", ref=agent_id
                )
                await old.send(dump_message(error))
                await old.close(CLOSE_AGENT_REPLACED, "agent replaced")
        self.connections[agent_id] = ws
        await ws.send(dump_message(reply))
        await self.registrations.put(register)
        try:
            async for raw in ws:
                message = parse_message(raw)
                if isinstance(message, Ping):
                    self.pings += 1
                    if self.answer_pings:
                        await ws.send(dump_message(Pong()))
                    continue
                await self.frames.put((agent_id, message))
        except ConnectionClosed:
            pass
        finally:
            if self.connections.get(agent_id) is ws:
                del self.connections[agent_id]


StartMaster = Callable[..., Awaitable[FakeMaster]]


@pytest.fixture
async def start_master() -> AsyncIterator[StartMaster]:
    """Factory: ``await start_master(port=..., api_key=...)`` starts a :class:`FakeMaster`;
    every master started is stopped after the test."""
    started: list[FakeMaster] = []

    async def start(**kwargs: Any) -> FakeMaster:
        fake = FakeMaster(**kwargs)
        await fake.start()
        started.append(fake)
        return fake

    yield start
    for fake in started:
        await fake.stop()


@pytest.fixture
async def fake_master(start_master: StartMaster) -> FakeMaster:
    """A running :class:`FakeMaster` on a free port (``master`` is the real one, in tests/conftest.py)."""
    return await start_master()


# -- the openagent command -------------------------------------------------------------------------


@pytest.fixture
def workdir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """An empty working directory (no .env) and no master variables; os.environ restored after
    (``load_dotenv`` writes to it behind monkeypatch's back)."""
    saved = dict(os.environ)
    for name in ("MASTER_BASE_URL", "MASTER_PORT", "MASTER_HOST", "OPENAGENT_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    os.environ.clear()
    os.environ.update(saved)


class PointCli(Protocol):
    def __call__(self, base_url: str, api_key: str | None = None) -> None: ...


@pytest.fixture
def point_cli(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> PointCli:
    """``point_cli(master.base_url, KEY)``: the command, run in ``workdir``, talks to that master
    (``MASTER_BASE_URL``) with that key (``OPENAGENT_API_KEY``, left unset without one)."""

    def point(base_url: str, api_key: str | None = None) -> None:
        monkeypatch.setenv("MASTER_BASE_URL", base_url)
        if api_key is not None:
            monkeypatch.setenv("OPENAGENT_API_KEY", api_key)

    return point


async def run_cli(*argv: str) -> int:
    """Run the ``openagent`` command in a thread (it blocks), so a master in this loop can answer;
    return its exit status."""
    try:
        return await asyncio.to_thread(cli.main, list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
