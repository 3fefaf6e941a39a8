"""Session growth: latency of a one-tool query in a session with 1, 100 or 1,000 earlier turns.

Sessions are pre-filled in Redis with synthetic turns of the shape the master stores
(one ``call_tool`` turn with its result and answer per earlier query). Queries run one at
a time (concurrency 1) on the master of :func:`master_setup`, each session getting two:

- the **first query** (outside the measured window) finds N raw turns, as no session the
  master built itself would be: the master may compact them (summarise the older ones
  once the context is over ``ORCHESTRATOR_CONTEXT_MAX_TOKENS``). Its latency is reported
  apart, as the one-off cost of that compaction.
- the **measured query** then sees the session as the master keeps it after N turns:
  the steady state of a long conversation. The target is judged on it.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from typing import Any

import redis.asyncio as aioredis

from bench.setups import WS_AGENT, Running
from bench.stats import spread
from bench.throughput import run_load, summarise_reps
from master.storage.redis_keys import session_key

WARMUP_QUERIES = 20
SESSION_TTL = 3600
_BATCH = 100


def synthetic_turns(count: int) -> list[dict[str, Any]]:
    """``count`` stored turns, as the master writes them for one-tool queries."""
    now = time.time() - count
    return [
        {
            "query": f"earlier question number {i}: what does the echo tool say?",
            "query_id": f"http-synthetic-{i:06d}",
            "model": "gpt-4o-mini",
            "ts": now + i,
            "decision": "call_tool",
            "tool_agent_id": WS_AGENT,
            "tool_name": "echo",
            "tool_args": {"text": f"earlier question number {i}"},
            "result": {"echo": f"earlier question number {i}"},
            "answer": f'The tool said {{"result": {{"echo": "earlier question number {i}"}}}}',
        }
        for i in range(count)
    ]


async def _prefill(redis: aioredis.Redis, session_ids: list[str], turns: int) -> None:
    value = json.dumps(synthetic_turns(turns), separators=(",", ":"))
    for start in range(0, len(session_ids), _BATCH):
        async with redis.pipeline(transaction=False) as pipe:
            for session_id in session_ids[start : start + _BATCH]:
                pipe.set(session_key(session_id), value, ex=SESSION_TTL)
            await pipe.execute()


async def _drop(redis: aioredis.Redis, session_ids: list[str]) -> None:
    for start in range(0, len(session_ids), _BATCH):
        await redis.delete(*(session_key(s) for s in session_ids[start : start + _BATCH]))


async def session_growth_case(
    running: Running, redis_url: str, *, sizes: list[int], queries: int, repeat: int, profile: bool
) -> dict[str, Any]:
    redis = aioredis.Redis.from_url(redis_url)
    by_size: dict[str, Any] = {}
    try:
        for size in sizes:
            windows = [[str(uuid.uuid4()) for _ in range(queries)] for _ in range(repeat)]
            every = [s for window in windows for s in window]
            await _prefill(redis, every, size)
            config = {
                "mode": "sessions",
                "url": f"{running.url}/query",
                "body": {"query": "hello", "allowed_agent_ids": [WS_AGENT]},
                "warmup_queries": WARMUP_QUERIES,
                "sessions": windows,
                "prime": True,
            }
            reps, profile_result = await run_load(
                running, config, repeat, queries * 0.5, label=f"session_{size}", profile=profile
            )
            await _drop(redis, every)
            summary = summarise_reps(reps)
            summary["first_query_p50_ms"] = spread([rep["first_query"]["p50_ms"] for rep in reps])
            summary["first_query_errors"] = sum(rep["first_query"]["errors"] for rep in reps)
            by_size[str(size)] = {"turns": size, "reps": reps, "summary": summary}
            if profile_result is not None:
                by_size[str(size)]["profile"] = profile_result
    finally:
        await redis.aclose()
    first, last = by_size[str(sizes[0])], by_size[str(sizes[-1])]
    growth = last["summary"]["p50_ms"]["median"] / first["summary"]["p50_ms"]["median"]
    cpu_first = first["summary"]["server_cpu_ms_per_op"]["median"]
    cpu_growth = last["summary"]["server_cpu_ms_per_op"]["median"] / cpu_first if cpu_first else math.nan
    return {
        "kind": "session_growth",
        "title": "one-tool query in a session of N earlier turns (concurrency 1)",
        "queries_per_rep": queries,
        "by_turns": by_size,
        "summary": {
            "p50_growth": round(growth, 2),
            "cpu_growth": round(cpu_growth, 2),
            "from_turns": sizes[0],
            "to_turns": sizes[-1],
        },
    }
