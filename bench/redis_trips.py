"""Redis round trips per one-tool query, counted on the wire, with the commands behind them.

A dedicated master talks to Redis through :class:`CountingProxy`, a TCP relay in the
runner. On one connection a client sends, waits for the reply, sends again: every time
the client speaks after Redis has answered is one round trip, however many commands a
pipeline carries. ``MONITOR`` on the side names the commands (those run inside a Lua
script are listed apart: they cost no round trip). Queries run one at a time after a
warm-up, so the pool's connection set-up is not counted.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import redis.asyncio as aioredis

from bench.procs import Child, Group, free_port
from bench.setups import WS_AGENT, start_master

WARMUP_QUERIES = 5
HTTP_AGENT = "redis-http-sdk"


class CountingProxy:
    """Relays TCP to Redis and counts request bursts (round trips) over all connections."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.round_trips = 0
        self.upstream_ports: set[int] = set()
        """Local ports of the proxy's connections to Redis: how MONITOR tells the master's commands apart."""
        self._server: asyncio.Server | None = None
        self._pumps: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._pumps):
            task.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        self.upstream_ports.add(int(up_writer.get_extra_info("sockname")[1]))
        state = {"answered": True}  # a fresh connection's first burst is a round trip

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, upward: bool) -> None:
            try:
                while data := await src.read(1 << 16):  # until the connection closes
                    if upward and state["answered"]:
                        self.round_trips += 1
                    state["answered"] = not upward
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                with contextlib.suppress(Exception):
                    dst.close()

        tasks = [
            asyncio.create_task(pump(reader, up_writer, True)),
            asyncio.create_task(pump(up_reader, writer, False)),
        ]
        self._pumps.update(tasks)
        try:
            await asyncio.gather(*tasks)
        finally:
            self._pumps.difference_update(tasks)


class CommandLog:
    """``MONITOR`` of the bench database: the commands of the proxied master.

    Commands a Lua script runs are logged without a client; they belong to the
    ``EVALSHA``/``EVAL`` logged just before them.
    """

    def __init__(self, redis_url: str, db: int, proxy: CountingProxy) -> None:
        self._client = aioredis.Redis.from_url(redis_url, decode_responses=True)
        self._db = db
        self._proxy = proxy
        self.commands: list[tuple[str, str]] = []  # (command, "lua" | "client")
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen())
        await asyncio.wait_for(self._ready.wait(), 10)

    async def _listen(self) -> None:
        ours = False  # whether the last client command came from the proxied master
        async with self._client.monitor() as monitor:
            self._ready.set()
            while True:  # until cancelled by stop()
                info = await monitor.next_command()
                if int(info.get("db", -1)) != self._db:
                    continue
                words = str(info.get("command", "")).split()
                name = words[0].upper() if words else "?"
                if info.get("client_type") == "lua":
                    if ours:
                        self.commands.append((name, "lua"))
                    continue
                ours = int(info.get("client_port") or 0) in self._proxy.upstream_ports
                if ours:
                    self.commands.append((name, "client"))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._client.aclose()


async def _ask(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(url, json=body) as response:
        reply: dict[str, Any] = await response.json()
        if response.status != 200 or not reply.get("success"):
            raise RuntimeError(f"query failed: HTTP {response.status} {reply}")
        return reply


def _count(commands: list[tuple[str, str]], queries: int) -> dict[str, Any]:
    """Commands per query, by name; those a Lua script ran are counted apart."""
    client = Counter(name for name, source in commands if source == "client")
    lua = Counter(name for name, source in commands if source == "lua")
    return {
        "commands_per_query": round(sum(client.values()) / queries, 2),
        "commands": {name: round(n / queries, 2) for name, n in sorted(client.items())},
        "inside_lua": {name: round(n / queries, 2) for name, n in sorted(lua.items())},
    }


async def redis_trips_case(redis_url: str, *, queries: int) -> dict[str, Any]:
    split = urlsplit(redis_url)
    db = int(split.path.strip("/") or 0)
    proxy = CountingProxy((split.hostname or "127.0.0.1", split.port or 6379))
    port = await proxy.start()
    proxied = urlunsplit((split.scheme, f"127.0.0.1:{port}", split.path, "", ""))
    log = CommandLog(redis_url, db, proxy)
    kinds: dict[str, Any] = {}
    try:
        async with Group() as group:
            _, url = await start_master(group, "master-redis", proxied)
            ws_url = url.replace("http://", "ws://") + "/ws"
            agents = [
                await group.start(Child("redis-agent-ws", "bench.agents", "ws", "--master-ws", ws_url)),
                await group.start(
                    Child(
                        "redis-agent-http",
                        "bench.agents",
                        "http-sdk",
                        "--master",
                        url,
                        "--port",
                        str(free_port()),
                        "--agent-id",
                        HTTP_AGENT,
                    )
                ),
            ]
            for agent in agents:
                await agent.expect("ready", 60)
            await log.start()
            async with aiohttp.ClientSession() as http:
                session_id = (
                    await _ask(http, f"{url}/query", {"query": "hi", "allowed_agent_ids": [WS_AGENT]})
                )["session_id"]
                plans = {
                    "ws_new_session": {"query": "hi", "allowed_agent_ids": [WS_AGENT]},
                    "ws_existing_session": {
                        "query": "hi",
                        "allowed_agent_ids": [WS_AGENT],
                        "session_id": session_id,
                    },
                    "http_new_session": {"query": "hi", "allowed_agent_ids": [HTTP_AGENT]},
                }
                for kind, body in plans.items():
                    for _ in range(WARMUP_QUERIES):
                        await _ask(http, f"{url}/query", body)
                    await asyncio.sleep(0.2)  # let MONITOR catch up with the warm-up
                    log.commands.clear()
                    trips_before = proxy.round_trips
                    for _ in range(queries):
                        await _ask(http, f"{url}/query", body)
                    trips = proxy.round_trips - trips_before
                    await asyncio.sleep(0.2)  # let MONITOR catch up
                    kinds[kind] = {
                        "round_trips_per_query": round(trips / queries, 2),
                        **_count(log.commands, queries),
                    }
    finally:
        await log.stop()
        await proxy.aclose()
    worst = max(kinds.values(), key=lambda k: k["round_trips_per_query"])
    return {
        "kind": "redis",
        "title": "Redis round trips per one-tool query",
        "queries_per_kind": queries,
        "by_query": kinds,
        "summary": {"max_round_trips_per_query": worst["round_trips_per_query"]},
    }
