"""The load client: a process that POSTs queries and reports latencies per window.

``python -m bench.load '<json config>'``. Two modes:

- ``"mode": "closed"`` (default): ``concurrency`` workers each POST ``body`` to ``url`` in
  a loop, back to back, for ``warmup`` seconds and then ``repeat`` windows of ``duration``
  seconds. Each window is reported between a ``start`` and an ``end`` event, so the
  runner can sample the server's CPU over exactly that window. With ``rate`` (queries per
  second in all), the workers are paced instead: each sends one query every ``concurrency /
  rate`` seconds, starting staggered, with no catching up after a stall.
- ``"mode": "sessions"``: one query at a time; ``warmup_queries`` queries in new sessions,
  then for each window in ``sessions`` one query in each of its session ids. With
  ``"prime": true`` each session first gets one query outside the window, reported
  apart as ``first_query``. After each window but the last the client waits for a line on
  stdin (the runner sends one once it has read the server's CPU), so that the next window's
  first queries do not land in this window's CPU.
- ``"mode": "mcp"``: like ``closed``, but each worker holds its own official MCP client
  (``mcp.Client``, revision 2026-07-28, its own HTTP connection) and calls the tool
  ``body["tool"]`` with ``body["arguments"]`` at ``url`` (an MCP endpoint); a call counts when
  its result is not ``isError``.
- ``"mode": "soak"``: paced queries (``rate`` per second over ``concurrency`` workers), a mix of
  agents and of new and existing sessions, with a ``tick`` event every ``interval`` seconds
  (see :func:`_soak`).

In the closed mode, ``urls`` (instead of ``url``) spreads the workers' connections over several
masters, and ``bodies`` (instead of ``body``) makes each worker take them in turn. With
``"protocol": "a2a"`` the body is an A2A JSON-RPC ``SendMessage`` (``A2A-Version: 1.0``), each
request with a new ``messageId``, and a reply counts when its task is ``TASK_STATE_COMPLETED``.

Events on stdout: ``ready``, then per window ``start`` and ``end`` (``ops``, ``errors``,
``seconds``, ``ops_per_s``, ``p50_ms``, ``p99_ms``, ``max_ms``, ``first_error``), then ``done``.
A reply counts as an operation when it is HTTP 200 with ``"success": true``.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
import uuid
from typing import Any

import aiohttp

from bench.child import emit, read_line, run
from bench.stats import latency_summary

REQUEST_TIMEOUT = 30.0


class _Window:
    """Completions recorded between two instants."""

    def __init__(self) -> None:
        self.open = False
        self.latencies: list[float] = []
        self.errors = 0
        self.first_error: str | None = None

    def reopen(self) -> None:
        """Forget what was recorded and start recording."""
        self.latencies, self.errors, self.first_error = [], 0, None
        self.open = True

    def record(self, latency: float, error: str | None) -> None:
        if not self.open:
            return
        if error is None:
            self.latencies.append(latency)
            return
        self.errors += 1
        self.first_error = self.first_error or error

    def report(self, seconds: float) -> dict[str, Any]:
        ops = len(self.latencies)
        return {
            "ops": ops,
            "errors": self.errors,
            "first_error": self.first_error,
            "seconds": seconds,
            "ops_per_s": ops / seconds if seconds > 0 else 0.0,
            **latency_summary(self.latencies),
        }


async def _ask(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[float, str | None]:
    latency, error, _ = await _ask_reply(session, url, body)
    return latency, error


A2A_HEADERS = {"A2A-Version": "1.0"}


async def _ask_a2a(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any]
) -> tuple[float, str | None]:
    """One A2A ``SendMessage`` (JSON-RPC): a success when the task it returns is completed."""
    params = body["params"]
    body = {**body, "params": {**params, "message": {**params["message"], "messageId": uuid.uuid4().hex}}}
    started = time.perf_counter()
    try:
        async with session.post(url, json=body, headers=A2A_HEADERS) as response:
            raw = await response.read()
            latency = time.perf_counter() - started
            if response.status != 200:
                return latency, f"HTTP {response.status}: {raw[:200]!r}"
            reply = json.loads(raw)
            state = reply.get("result", {}).get("task", {}).get("status", {}).get("state")
            if state != "TASK_STATE_COMPLETED":
                return latency, f"not completed: {str(reply)[:200]}"
            return latency, None
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return time.perf_counter() - started, f"{type(exc).__name__}: {exc}"


async def _ask_reply(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any]
) -> tuple[float, str | None, dict[str, Any]]:
    """The latency, an error (``None`` when the query succeeded) and the reply."""
    started = time.perf_counter()
    try:
        async with session.post(url, json=body) as response:
            raw = await response.read()
            latency = time.perf_counter() - started
            if response.status != 200:
                return latency, f"HTTP {response.status}: {raw[:200]!r}", {}
            reply = json.loads(raw)
            answered = reply.get("object") == "chat.completion" or (
                reply.get("object") == "response" and reply.get("status") == "completed"
            )
            if not reply.get("success") and not answered:
                return latency, f"unsuccessful: {str(reply)[:200]}", reply
            return latency, None, reply
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return time.perf_counter() - started, f"{type(exc).__name__}: {exc}", {}


async def _closed(session: aiohttp.ClientSession, cfg: dict[str, Any]) -> None:
    urls: list[str] = cfg.get("urls") or [cfg["url"]]
    bodies: list[dict[str, Any]] = cfg.get("bodies") or [cfg["body"]]
    window = _Window()
    stop_at = time.monotonic() + cfg["warmup"] + cfg["repeat"] * cfg["duration"] + 0.5
    ask = _ask_a2a if cfg.get("protocol") == "a2a" else _ask

    rate = cfg.get("rate")
    gap = cfg["concurrency"] / float(rate) if rate else 0.0

    async def worker(number: int) -> None:
        url = urls[number % len(urls)]  # connections spread evenly over the masters
        turn = number
        due = time.monotonic() + number * gap / cfg["concurrency"]
        while time.monotonic() < stop_at:  # bounded by the run's length
            if gap:
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                due = max(due + gap, time.monotonic())
            latency, error = await ask(session, url, bodies[turn % len(bodies)])
            window.record(latency, error)
            turn += 1

    workers = [asyncio.create_task(worker(number)) for number in range(cfg["concurrency"])]
    try:
        await asyncio.sleep(cfg["warmup"])
        for rep in range(cfg["repeat"]):
            window.reopen()
            started = time.perf_counter()
            emit("start", rep=rep)
            await asyncio.sleep(cfg["duration"])
            window.open = False
            emit("end", rep=rep, **window.report(time.perf_counter() - started))
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


async def _mcp_call(client: Any, tool: str, arguments: dict[str, Any]) -> tuple[float, str | None]:
    started = time.perf_counter()
    try:
        async with asyncio.timeout(REQUEST_TIMEOUT):
            result = await client.call_tool(tool, arguments)
    except Exception as exc:  # any failure of the call is one error of the window
        return time.perf_counter() - started, f"{type(exc).__name__}: {exc}"[:300]
    latency = time.perf_counter() - started
    if result.is_error:
        return latency, f"isError: {str(result.content)[:200]}"
    return latency, None


async def _mcp(cfg: dict[str, Any]) -> None:
    """The ``mcp`` mode: the closed loop of :func:`_closed` through ``mcp.Client`` (one per worker)."""
    from mcp import Client

    url = (cfg.get("urls") or [cfg["url"]])[0]
    body = (cfg.get("bodies") or [cfg["body"]])[0]
    tool, arguments = body["tool"], body["arguments"]
    window = _Window()
    # The run's length counts from the moment every client is connected (set below): on a busy
    # machine connecting may take seconds, which must not eat the measured windows.
    stop_at = math.inf
    connected = asyncio.Barrier(cfg["concurrency"] + 1)

    async def worker() -> None:
        async with Client(url, mode="2026-07-28") as client:
            await client.list_tools()  # what a client does first (the tool's schema for its checks)
            await connected.wait()
            while time.monotonic() < stop_at:  # bounded by the run's length (and REQUEST_TIMEOUT below)
                latency, error = await _mcp_call(client, tool, arguments)
                window.record(latency, error)

    workers = [asyncio.create_task(worker()) for _ in range(cfg["concurrency"])]
    try:
        async with asyncio.timeout(REQUEST_TIMEOUT):
            await connected.wait()
        stop_at = time.monotonic() + cfg["warmup"] + cfg["repeat"] * cfg["duration"] + 0.5
        emit("ready")
        await asyncio.sleep(cfg["warmup"])
        for rep in range(cfg["repeat"]):
            window.reopen()
            started = time.perf_counter()
            emit("start", rep=rep)
            await asyncio.sleep(cfg["duration"])
            window.open = False
            emit("end", rep=rep, **window.report(time.perf_counter() - started))
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


async def _sessions(session: aiohttp.ClientSession, cfg: dict[str, Any]) -> None:
    url, body = cfg["url"], cfg["body"]
    for _ in range(cfg.get("warmup_queries", 0)):
        await _ask(session, url, body)
    for rep, session_ids in enumerate(cfg["sessions"]):
        first = _Window()
        first.reopen()
        started = time.perf_counter()
        if cfg.get("prime"):  # one unmeasured query first: the master compacts what it compacts
            for session_id in session_ids:
                latency, error = await _ask(session, url, {**body, "session_id": session_id})
                first.record(latency, error)
        primed = first.report(time.perf_counter() - started) if cfg.get("prime") else None
        window = _Window()
        window.reopen()
        started = time.perf_counter()
        emit("start", rep=rep)
        for session_id in session_ids:
            latency, error = await _ask(session, url, {**body, "session_id": session_id})
            window.record(latency, error)
        emit("end", rep=rep, first_query=primed, **window.report(time.perf_counter() - started))
        if rep + 1 < len(cfg["sessions"]):  # the next window's first queries wait for the runner's
            await read_line()  # CPU sample of this one: a long session's first query is costly


SOAK_SLOTS = 3
"""Existing sessions each soak worker keeps (the bound on what the load stores, with the TTL)."""


async def _soak(session: aiohttp.ClientSession, cfg: dict[str, Any]) -> None:
    """Paced queries for ``ticks`` intervals of ``interval`` seconds, a ``tick`` event after each.

    Each of ``concurrency`` workers sends one query every ``concurrency / rate`` seconds (no
    catching up after a stall), alternating the agents of ``agents`` (WebSocket, HTTP
    invocation). One query in four starts a new session that is never used again; the others
    go to one of the worker's :data:`SOAK_SLOTS` sessions, each replaced by a new one after
    ``rotate`` queries. So what the load stores is bounded by the session TTL, not the run's length.
    """
    url, agents, concurrency = cfg["url"], cfg["agents"], int(cfg["concurrency"])
    gap = concurrency / float(cfg["rate"])
    rotate = int(cfg.get("rotate", 20))
    window = _Window()
    counts = {"new_sessions": 0, "existing_sessions": 0}

    async def worker(number: int) -> None:
        slots: list[str | None] = [None] * SOAK_SLOTS
        uses = [0] * SOAK_SLOTS
        due = time.monotonic() + number * gap / concurrency
        turn = 0
        while True:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            due = max(due + gap, time.monotonic())
            body: dict[str, Any] = {"query": "hello", "allowed_agent_ids": [agents[turn % len(agents)]]}
            slot = turn % (SOAK_SLOTS + 1) - 1  # -1: a one-off new session
            if slot >= 0 and slots[slot] is not None:
                body["session_id"] = slots[slot]
            latency, error, reply = await _ask_reply(session, url, body)
            window.record(latency, error)
            if window.open:
                counts["existing_sessions" if "session_id" in body else "new_sessions"] += 1
            if slot >= 0 and error is None:
                uses[slot] += 1
                slots[slot] = reply.get("session_id") if uses[slot] < rotate else None
                uses[slot] %= rotate
            turn += 1

    workers = [asyncio.create_task(worker(number)) for number in range(concurrency)]
    try:
        await asyncio.sleep(cfg["warmup"])
        for tick in range(int(cfg["ticks"])):
            window.reopen()
            counts.update(new_sessions=0, existing_sessions=0)
            started = time.perf_counter()
            await asyncio.sleep(cfg["interval"])
            emit("tick", rep=tick, **counts, **window.report(time.perf_counter() - started))
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


async def main(cfg: dict[str, Any]) -> None:
    if cfg.get("mode") == "mcp":
        await _mcp(cfg)
        emit("done")
        return
    concurrency = int(cfg.get("concurrency", 1))
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        emit("ready")
        mode = cfg.get("mode", "closed")
        if mode == "sessions":
            await _sessions(session, cfg)
        elif mode == "soak":
            await _soak(session, cfg)
        else:
            await _closed(session, cfg)
    emit("done")


if __name__ == "__main__":
    run(main(json.loads(sys.argv[1])))
