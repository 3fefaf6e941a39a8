"""The soak case: a master under moderate load for a long time, its resources sampled.

``--cases soak`` (not in the default run), ``--soak-minutes`` long (30). One master with its
WebSocket agent and its SDK invocation agent (:func:`bench.setups.master_setup`) takes paced
queries (``--soak-rate`` per second over 4 workers, see ``bench.load``'s soak mode): WebSocket
and HTTP invocation in turn, one in four in a new session, the others in a few existing
sessions per worker that are replaced after 20 queries each.

Every ``--soak-interval`` seconds the runner samples the master's RSS and open file
descriptors (the agents' too, for information), Redis's ``used_memory`` (the whole server)
and the bench database's own data: its keys, by prefix, and the sum of their
``MEMORY USAGE``. The master runs with ``REDIS_SESSION_TTL_SECONDS`` = :data:`SESSION_TTL`, so
the sessions the load stores reach a steady state (rate × TTL) within the first minutes:
with the default day they would grow all day, legitimately. Flat then means no leak.

Each series is summarised by its first, last and largest value and by the growth over the
second half of the run: the slope of a least-squares line through the second half's
samples, times the second half's length (robust to one noisy sample).
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

import psutil
import redis.asyncio as aioredis

from bench.procs import Child
from bench.setups import HTTP_SDK_AGENT, WS_AGENT, Running, master_setup
from bench.throughput import EVENT_SLACK

SESSION_TTL = 120
"""Seconds a session lives after its last query, in the soak (the default is a day)."""
CONCURRENCY = 4
ROTATE = 20
"""Queries per existing session before the load client replaces it with a new one."""
MIB = 1024 * 1024
SERIES = ("master_rss_mib", "master_fds", "redis_db_mib", "redis_db_keys", "redis_used_memory_mib")


def _process(child: Child) -> dict[str, float]:
    process = psutil.Process(child.pid)
    return {"rss_mib": round(process.memory_info().rss / MIB, 2), "fds": process.num_fds()}


async def _redis_sample(redis: aioredis.Redis) -> dict[str, Any]:
    """Server-wide ``used_memory``; the bench database's keys by prefix and their ``MEMORY USAGE``."""
    info = await redis.info("memory")
    prefixes: dict[str, int] = {}
    data = 0
    async for batch in _batches(redis):
        pipe = redis.pipeline(transaction=False)
        for key in batch:
            pipe.memory_usage(key)
        for key, used in zip(batch, await pipe.execute(), strict=True):
            data += int(used or 0)  # None: it expired between SCAN and MEMORY USAGE
            prefix = key.decode(errors="replace").split(":", 1)[0]
            prefixes[prefix] = prefixes.get(prefix, 0) + 1
    return {
        "redis_used_memory_mib": round(int(info["used_memory"]) / MIB, 3),
        "redis_db_mib": round(data / MIB, 3),
        "redis_db_keys": sum(prefixes.values()),
        "redis_keys_by_prefix": dict(sorted(prefixes.items())),
    }


async def _batches(redis: aioredis.Redis) -> Any:
    cursor = 0
    while True:
        cursor, keys = await redis.scan(cursor, count=1000)
        if keys:
            yield keys
        if cursor == 0:
            return


def second_half_growth(times: list[float], values: list[float]) -> tuple[float, float]:
    """(slope per minute, growth over the second half) of a least-squares line through the second half."""
    half = [(t, v) for t, v in zip(times, values, strict=True) if t >= times[-1] / 2]
    if len(half) < 2:
        return math.nan, math.nan
    mean_t = sum(t for t, _ in half) / len(half)
    mean_v = sum(v for _, v in half) / len(half)
    spread_t = sum((t - mean_t) ** 2 for t, _ in half)
    if spread_t == 0:
        return math.nan, math.nan
    slope = sum((t - mean_t) * (v - mean_v) for t, v in half) / spread_t
    return slope * 60, slope * (half[-1][0] - half[0][0])


def summarise(samples: list[dict[str, Any]]) -> dict[str, Any]:
    times = [float(sample["t_s"]) for sample in samples]
    summary: dict[str, Any] = {}
    for name in SERIES:
        values = [float(sample[name]) for sample in samples]
        per_minute, growth = second_half_growth(times, values)
        middle = next(v for t, v in zip(times, values, strict=True) if t >= times[-1] / 2)
        summary[name] = {
            "first": values[0],
            "last": values[-1],
            "max": max(values),
            "middle": middle,
            "slope_per_min": per_minute,
            "second_half_growth": growth,
        }
    ticks = [sample["load"] for sample in samples if sample.get("load")]
    summary["queries"] = sum(int(tick["ops"]) for tick in ticks)
    summary["errors"] = sum(int(tick["errors"]) for tick in ticks)
    summary["first_error"] = next((tick["first_error"] for tick in ticks if tick.get("first_error")), None)
    summary["new_sessions"] = sum(int(tick["new_sessions"]) for tick in ticks)
    summary["existing_sessions"] = sum(int(tick["existing_sessions"]) for tick in ticks)
    second = [sample["load"] for sample in samples if sample.get("load") and sample["t_s"] >= times[-1] / 2]
    summary["second_half_queries"] = sum(int(tick["ops"]) for tick in second)
    p50s = [float(tick["p50_ms"]) for tick in ticks if not math.isnan(float(tick["p50_ms"]))]
    summary["p50_ms_first_last"] = [p50s[0], p50s[-1]] if p50s else [math.nan, math.nan]
    return summary


async def soak_case(
    redis_url: str, *, minutes: float, interval: float, rate: float, session_ttl: int = SESSION_TTL
) -> dict[str, Any]:
    ticks = max(4, round(minutes * 60 / interval))
    redis = aioredis.Redis.from_url(redis_url)
    try:
        async with master_setup(redis_url, http_agents=True, session_ttl=session_ttl) as running:
            samples = await _soak(running, redis, ticks=ticks, interval=interval, rate=rate)
    finally:
        await redis.aclose()
    return {
        "kind": "soak",
        "title": "soak: one master at moderate load, WS and HTTP invocation, new and existing sessions",
        "minutes": round(samples[-1]["t_s"] / 60, 2),
        "interval_s": interval,
        "rate_per_s": rate,
        "concurrency": CONCURRENCY,
        "session_ttl_s": session_ttl,
        "rotate": ROTATE,
        "nproc": psutil.cpu_count(),
        "samples": samples,
        "summary": summarise(samples),
    }


async def _soak(
    running: Running, redis: aioredis.Redis, *, ticks: int, interval: float, rate: float
) -> list[dict[str, Any]]:
    config = {
        "mode": "soak",
        "url": running.url + "/query",
        "agents": [WS_AGENT, HTTP_SDK_AGENT],
        "concurrency": CONCURRENCY,
        "rate": rate,
        "rotate": ROTATE,
        "warmup": min(5.0, interval),
        "interval": interval,
        "ticks": ticks,
    }
    load = await Child("load-soak", "bench.load", json.dumps(config)).start()
    samples: list[dict[str, Any]] = []
    try:
        await load.expect("ready", EVENT_SLACK)
        started = time.monotonic()
        cpu = running.hub.cpu_seconds()
        samples.append(await _sample(running, redis, 0.0, None, None))
        for _ in range(ticks):
            tick = await load.expect("tick", interval + EVENT_SLACK)
            now, cpu_now = time.monotonic(), running.hub.cpu_seconds()
            busy = 100 * (cpu_now - cpu) / max(1e-9, float(tick["seconds"]))
            samples.append(await _sample(running, redis, now - started, tick, busy))
            cpu = cpu_now
        await load.expect("done", EVENT_SLACK)
        await load.wait(EVENT_SLACK)
    finally:
        await load.stop()
    return samples


async def _sample(
    running: Running, redis: aioredis.Redis, t: float, tick: dict[str, Any] | None, busy: float | None
) -> dict[str, Any]:
    master = _process(running.hub)
    return {
        "t_s": round(t, 2),
        "master_rss_mib": master["rss_mib"],
        "master_fds": master["fds"],
        "master_cpu_pct": None if busy is None else round(busy, 1),
        "agents": {name: _process(child) for name, child in running.agents.items()},
        **(await _redis_sample(redis)),
        "load": None if tick is None else {k: v for k, v in tick.items() if k not in ("event", "rep")},
    }
