"""``python -m bench``: run the cases, print the table, write the JSON.

Every process (Redis-backed master, baselines, agents, load clients) is started here on
loopback and stopped at the end; the benchmark uses its own Redis database (default 14)
and empties only that one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from bench import cases as case_list
from bench.child import raise_fd_limit
from bench.connections import connections_case
from bench.procs import RESULTS_DIR, ChildFailed, results_dir, set_results_dir
from bench.redis_trips import redis_trips_case
from bench.report import machine, render, thread_round_trip, write_json
from bench.session_growth import session_growth_case
from bench.setups import (
    SCRIPTED_WS_AGENT,
    Running,
    a2a_direct_setup,
    cluster_setup,
    flush_bench_db,
    master_setup,
    mcp_direct_setup,
    relay_http_setup,
    relay_ws_setup,
    scripted_setup,
    workers_setup,
)
from bench.soak import soak_case
from bench.targets import evaluate
from bench.throughput import LoadCase, Timing, measure, merged

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/14"
QUIET_PCT = 15.0
"""Busier than this (percent of one core) before the start, and the run is flagged as disturbed."""

SMOKE = {
    "duration": 0.25,
    "warmup": 0.1,
    "repeat": 3,
    "connections": 200,
    "conn_processes": 2,
    "conn_repeat": 1,
    "session_turns": [1, 10, 100],
    "session_queries": 5,
    "redis_queries": 3,
    "jobs": 3,
    "soak_minutes": 0.05,
    "soak_interval": 0.5,
}


def turn_counts(text: str) -> list[int]:
    """``--session-turns``: comma-separated counts of earlier turns, each at least 1."""
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of whole numbers") from None
    if any(count < 1 for count in counts):
        raise argparse.ArgumentTypeError(f"{text!r}: each count of earlier turns must be at least 1")
    return counts


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Measure what the OpenAgent master adds to a tool call, against baselines run alike.",
    )
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per measured window (4)")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds of warm-up before the windows (1)")
    parser.add_argument(
        "--repeat", type=int, default=3, help="windows (repetitions) per case, at least 3 (3)"
    )
    parser.add_argument("--cases", default="all", help="comma-separated case or group names (see --list)")
    parser.add_argument("--list", action="store_true", help="list the cases and groups, then exit")
    parser.add_argument("--connections", type=int, default=10_000, help="idle agents to connect (10000)")
    parser.add_argument("--conn-processes", type=int, default=4, help="client processes holding them (4)")
    parser.add_argument("--conn-repeat", type=int, help="repetitions of the connection cases (--repeat)")
    parser.add_argument("--conn-tools", type=int, default=1, help="tools in each idle agent's register (1)")
    parser.add_argument(
        "--conn-deflate",
        action="store_true",
        help="idle agents offer permessage-deflate (the SDK's agents do not)",
    )
    parser.add_argument(
        "--session-turns",
        type=turn_counts,
        default=[1, 100, 1000],
        help="earlier turns per session, comma-separated (1,100,1000)",
    )
    parser.add_argument(
        "--session-queries", type=int, default=60, help="queries per window, session growth (60)"
    )
    parser.add_argument("--redis-queries", type=int, default=20, help="queries counted per kind, Redis (20)")
    parser.add_argument("--soak-minutes", type=float, default=30.0, help="length of the soak case (30)")
    parser.add_argument(
        "--soak-interval", type=float, default=10.0, help="seconds between the soak's samples (10)"
    )
    parser.add_argument("--soak-rate", type=float, default=40.0, help="queries per second in the soak (40)")
    parser.add_argument(
        "--redis-url", default=DEFAULT_REDIS_URL, help=f"the bench's own database ({DEFAULT_REDIS_URL})"
    )
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR, help="where JSON, logs, profiles go")
    parser.add_argument("--profile", default="", help="cases whose hub py-spy records (comma-separated)")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="systems run at once (1); more only to check that it all runs: they share the CPU",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny durations and counts, 3 jobs: checks that it all runs"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        for key, value in SMOKE.items():
            setattr(args, key, value)
    elif args.repeat < 3:
        parser.error("--repeat must be at least 3")
    if args.conn_repeat is None:
        args.conn_repeat = args.repeat
    if not urlsplit(args.redis_url).path.strip("/"):
        parser.error("--redis-url must name a database (e.g. redis://127.0.0.1:6379/14): it is emptied")
    return args


INTERLEAVED = ("relay_ws", "master", "relay_http", "mcp_direct", "a2a_direct", "scripted")
"""The systems whose round-trip cases run window by window in turn (targets compare them); the
others (the cluster and workers masters, on the same Redis with the same agents) run one after
another."""
SYSTEMS: dict[str, Callable[[], AbstractAsyncContextManager[Running]]] = {
    "relay_ws": relay_ws_setup,
    "relay_http": relay_http_setup,
    "mcp_direct": mcp_direct_setup,
    "a2a_direct": a2a_direct_setup,
}


async def _run(args: argparse.Namespace, selected: list[str]) -> dict[str, Any]:
    """Run the selected cases and return their results: the compared systems' round trips window
    by window in turn (:data:`INTERLEAVED`), then the other jobs one at a time (``--jobs 1``)."""
    timing = Timing(args.warmup, args.duration, args.repeat)
    profile = {p.strip() for p in args.profile.split(",") if p.strip()}
    results: dict[str, Any] = {}

    def chosen(setup: str) -> list[LoadCase]:
        return [
            case
            for name, (where, case) in case_list.ROUND_TRIPS.items()
            if where == setup and name in selected
        ]

    async def round_trips(setup: str, running: Running) -> None:
        for case in chosen(setup):
            _progress(f"{case.name}: {case.title}, concurrency {case.concurrency}")
            results[case.name] = await measure(running, case, timing, profile=case.name in profile)

    def system(setup: str) -> AbstractAsyncContextManager[Running]:
        if setup == "master":
            http = any(c.name.startswith("http_") for c in chosen("master"))
            return master_setup(args.redis_url, http_agents=http)
        if setup == "scripted":
            return scripted_setup(args.redis_url, agent_id=SCRIPTED_WS_AGENT)
        return SYSTEMS[setup]()

    async def interleaved() -> None:
        """The round-trip cases of the systems that targets compare, all systems up at once and
        one window of each case in turn, ``--repeat`` rounds: a case and its baseline share the
        machine's state (other work, CPU frequency) as closely as they can."""
        systems = [setup for setup in INTERLEAVED if chosen(setup)]
        async with AsyncExitStack() as stack:
            running = {setup: await stack.enter_async_context(system(setup)) for setup in systems}
            window = Timing(timing.warmup, timing.duration, 1)
            windows: dict[str, list[dict[str, Any]]] = {}
            for rep in range(timing.repeat):
                for setup in systems:
                    for case in chosen(setup):
                        _progress(
                            f"{case.name}: {case.title}, concurrency {case.concurrency}, "
                            f"window {rep + 1} of {timing.repeat}"
                        )
                        one = await measure(
                            running[setup], case, window, profile=rep == 0 and case.name in profile
                        )
                        windows.setdefault(case.name, []).append(one)
            results.update((name, merged(each)) for name, each in windows.items())

    async def session_growth() -> None:
        async with master_setup(args.redis_url, http_agents=False) as running:
            sizes = args.session_turns
            _progress(f"session growth: {sizes} earlier turns, {args.session_queries} queries per window")
            results[case_list.SESSION_GROWTH] = await session_growth_case(
                running,
                args.redis_url,
                sizes=sizes,
                queries=args.session_queries,
                repeat=args.repeat,
                profile=case_list.SESSION_GROWTH in profile,
            )

    async def cluster() -> None:
        async with cluster_setup(args.redis_url) as running:
            await round_trips("cluster", running)

    def workers(masters: int, replicas: bool = False) -> Callable[[], Awaitable[None]]:
        async def job() -> None:
            setup = f"workers{masters}{case_list.REPLICAS if replicas else ''}"
            http = any("_http_" in case.name for case in chosen(setup))
            async with workers_setup(args.redis_url, masters, http_agent=http, replicas=replicas) as running:
                await round_trips(setup, running)

        return job

    async def soak() -> None:
        _progress(
            f"soak: {args.soak_minutes:g} min at {args.soak_rate:g} queries/s, "
            f"sampled every {args.soak_interval:g} s"
        )
        results[case_list.SOAK] = await soak_case(
            args.redis_url, minutes=args.soak_minutes, interval=args.soak_interval, rate=args.soak_rate
        )

    async def scripted_sessions() -> None:
        name = case_list.SCRIPTED_SESSION_GROWTH
        context = case_list.SCRIPTED_CONTEXT_MAX_TOKENS
        async with scripted_setup(args.redis_url, context_max_tokens=context) as running:
            sizes = args.session_turns
            _progress(f"{name}: {sizes} earlier turns, all sent to the LLM through the real client")
            results[name] = await session_growth_case(
                running,
                args.redis_url,
                sizes=sizes,
                queries=args.session_queries,
                repeat=args.repeat,
                profile=name in profile,
            )

    async def redis_trips() -> None:
        _progress("Redis round trips per query")
        results[case_list.REDIS_TRIPS] = await redis_trips_case(args.redis_url, queries=args.redis_queries)

    def connections(name: str, kind: str) -> Callable[[], Awaitable[None]]:
        async def job() -> None:
            _progress(f"{name}: {args.connections:,} idle WebSocket connections, {args.conn_repeat} times")
            results[name] = await connections_case(
                kind,
                args.redis_url,
                count=args.connections,
                processes=args.conn_processes,
                tools=args.conn_tools,
                deflate=args.conn_deflate,
                repeat=args.conn_repeat,
            )

        return job

    jobs: list[Callable[[], Awaitable[None]]] = []
    if any(chosen(setup) for setup in INTERLEAVED):
        jobs.append(interleaved)
    if case_list.SESSION_GROWTH in selected:
        jobs.append(session_growth)
    if case_list.SCRIPTED_SESSION_GROWTH in selected:
        jobs.append(scripted_sessions)
    if chosen("cluster"):
        jobs.append(cluster)
    for masters in case_list.WORKERS:
        if chosen(f"workers{masters}"):
            jobs.append(workers(masters))
        if chosen(f"workers{masters}{case_list.REPLICAS}"):
            jobs.append(workers(masters, replicas=True))
    if case_list.SOAK in selected:
        jobs.append(soak)
    if case_list.REDIS_TRIPS in selected:
        jobs.append(redis_trips)
    for name, kind in ((case_list.CONNECTIONS_BASELINE, "idle"), (case_list.CONNECTIONS_MASTER, "master")):
        if name in selected:
            jobs.append(connections(name, kind))

    await flush_bench_db(args.redis_url)
    gate = asyncio.Semaphore(args.jobs)

    async def gated(job: Callable[[], Awaitable[None]]) -> None:
        async with gate:
            await job()

    try:
        async with asyncio.TaskGroup() as group:
            for job in jobs:
                group.create_task(gated(job))
    finally:
        await flush_bench_db(args.redis_url)
    return {name: results[name] for name in case_list.ALL_CASES if name in results}


async def _check_redis(url: str) -> None:
    client = aioredis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        await client.ping()
    finally:
        await client.aclose()


def _measure(args: argparse.Namespace, selected: list[str]) -> dict[str, Any] | None:
    """The cases' results, or ``None`` (reported) when a process of the benchmark failed."""
    try:
        return asyncio.run(_run(args, selected))
    except* ChildFailed as failures:
        for failure in failures.exceptions:
            print(f"python -m bench: a process of the benchmark failed: {failure}", file=sys.stderr)
    return None


def _machine_busy_pct() -> float:
    """How busy the machine is, over one second, in percent of one core."""
    return float(psutil.cpu_percent(interval=1.0)) * (os.cpu_count() or 1)


def _progress(text: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        for name, members in case_list.GROUPS.items():
            print(f"{name}: {', '.join(members)}")
        print(f"all: {', '.join(case_list.DEFAULT_CASES)}")
        print(f"only when named: {', '.join(sorted(case_list.OPT_IN))}")
        return 0
    try:
        selected = case_list.select(args.cases)
    except ValueError as exc:
        print(f"python -m bench: {exc}", file=sys.stderr)
        return 2
    raise_fd_limit()
    set_results_dir(args.results_dir.resolve())
    busy_before = _machine_busy_pct()
    handoff = thread_round_trip()
    if busy_before > QUIET_PCT:
        _progress(
            f"warning: the machine is already {busy_before:.0f}% busy (of one core) before the benchmark "
            "starts; other work skews the figures (see 'other work CPU %')"
        )
    started = time.monotonic()
    try:
        asyncio.run(_check_redis(args.redis_url))
    except (OSError, RedisError) as exc:
        print(f"python -m bench: Redis at {args.redis_url} is not answering ({exc})", file=sys.stderr)
        return 2
    cases = _measure(args, selected)
    if cases is None:
        return 1
    results: dict[str, Any] = {
        "meta": {
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine(),
            "timing": {"warmup": args.warmup, "duration": args.duration, "repeat": args.repeat},
            "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "seconds": round(time.monotonic() - started, 1),
            "busy_before_pct_of_one_core": round(busy_before, 1),
            "thread_round_trip_us": handoff,
        },
        "cases": cases,
        "targets": evaluate(cases, connections_wanted=args.connections),
    }
    latest, stamped = write_json(results, results_dir())
    print(render(results))
    print(f"\nwrote {latest} and {stamped} in {results['meta']['seconds']:.0f} s")
    return 0
