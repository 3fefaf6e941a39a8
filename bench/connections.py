"""Connected agents: memory per idle registered WebSocket agent, and time to register them all.

Each repetition starts a fresh server (the master, or baseline (c)), opens ``count``
connections from a few :mod:`bench.swarm` processes, and reads the server's resident set
size (VmRSS) before and after: ``(after - before) / count`` is the memory per agent.
Registration time runs from telling the swarms to go to the last ``registered`` reply.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp

from bench.procs import Child, Group, free_port
from bench.setups import READY_WITHIN, start_master
from bench.stats import spread
from bench.throughput import machine_busy_seconds

WARMUP_CONNECTIONS = 50
SETTLE_SECONDS = 1.0
REGISTER_WITHIN = 300.0


async def _start_idle(group: Group) -> tuple[Child, str]:
    port = free_port()
    server = await group.start(Child("baseline-c", "bench.relays", "idle", "--port", str(port)))
    url = f"http://127.0.0.1:{port}"
    await server.wait_http(f"{url}/health", READY_WITHIN)
    return server, url


async def _one(
    kind: str, redis_url: str, count: int, processes: int, tools: int, deflate: bool, rep: int
) -> dict[str, Any]:
    async with Group() as group:
        if kind == "master":
            # The default OPENAGENT_MAX_CATALOG_TOOLS (1024) would refuse the agent that brings
            # the 1,025th tool; a hub meant for this many agents raises it, as here, with room for
            # the HTTP invocation agents that earlier cases of the run left in the bench's Redis
            # database (a full run's 9 "failed" registrations were those: limit_exceeded).
            server, url = await start_master(
                group, "master-connections", redis_url, max_catalog_tools=count * tools + 1024
            )
        else:
            server, url = await _start_idle(group)
        ws_url = url.replace("http://", "ws://") + "/ws"
        shares = [count // processes + (1 if i < count % processes else 0) for i in range(processes)]
        swarms = []
        for i, share in enumerate(shares):
            cfg = {
                "url": ws_url,
                "count": share,
                "prefix": f"idle-{rep}-{i}",
                "parallel": 64,
                "tools": tools,
                "deflate": deflate,
            }
            swarms.append(await group.start(Child(f"swarm-{kind}-{i}", "bench.swarm", json.dumps(cfg))))
        for swarm in swarms:
            await swarm.expect("ready", READY_WITHIN)
        await swarms[0].send(f"warmup {WARMUP_CONNECTIONS}")
        await swarms[0].expect("warmed", READY_WITHIN)
        if kind == "master":  # the warm-up agents' tools leave the catalog before the count starts
            await _gone(url, "warmup-", READY_WITHIN)
        await asyncio.sleep(SETTLE_SECONDS)
        rss_before, cpu_before = server.rss_bytes(), server.cpu_seconds()
        ours_before = sum(child.cpu_seconds() for child in group.children)
        machine_before = machine_busy_seconds()
        started = time.perf_counter()
        for swarm in swarms:
            await swarm.send("go")
        replies = [await swarm.expect("registered", REGISTER_WITHIN) for swarm in swarms]
        seconds = time.perf_counter() - started
        cpu_used = server.cpu_seconds() - cpu_before
        ours = sum(child.cpu_seconds() for child in group.children) - ours_before
        outside = max(0.0, machine_busy_seconds() - machine_before - ours)
        await asyncio.sleep(SETTLE_SECONDS)
        rss_after = server.rss_bytes()
        ok = sum(int(r["ok"]) for r in replies)
        for swarm in swarms:
            await swarm.send("close")
        for swarm in swarms:
            await swarm.expect("closed", REGISTER_WITHIN)
    return {
        "connections": ok,
        "failed": sum(int(r["failed"]) for r in replies),
        "first_error": next((r["first_error"] for r in replies if r.get("first_error")), None),
        "errors": _merged([r.get("errors") or {} for r in replies]),
        "register_seconds": round(seconds, 2),
        "rss_before_mb": round(rss_before / 2**20, 1),
        "rss_after_mb": round(rss_after / 2**20, 1),
        "rss_per_agent_kb": round((rss_after - rss_before) / max(ok, 1) / 1024, 2),
        "server_cpu_ms_per_registration": round(1000 * cpu_used / max(ok, 1), 3),
        "outside_cpu_pct": round(100 * outside / seconds, 1),
    }


async def _gone(url: str, prefix: str, within: float) -> None:
    """Wait until ``GET /agents`` of the master at ``url`` lists no agent whose id starts with ``prefix``."""
    async with aiohttp.ClientSession() as http, asyncio.timeout(within):
        while True:
            async with http.get(f"{url}/agents") as response:
                rows = (await response.json())["agents"]
            if not any(str(row["agent_id"]).startswith(prefix) for row in rows):
                return
            await asyncio.sleep(0.1)


def _merged(kinds: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """The swarms' failures by kind, added up (the first message of each kind kept)."""
    merged: dict[str, dict[str, Any]] = {}
    for each in kinds:
        for kind, entry in each.items():
            into = merged.setdefault(kind, {"count": 0, "first": entry["first"]})
            into["count"] += entry["count"]
    return merged


async def connections_case(
    kind: str, redis_url: str, *, count: int, processes: int, tools: int, deflate: bool, repeat: int
) -> dict[str, Any]:
    """``kind`` is ``"master"`` or ``"idle"`` (baseline (c))."""
    reps = [await _one(kind, redis_url, count, processes, tools, deflate, rep) for rep in range(repeat)]
    keys = ("rss_per_agent_kb", "register_seconds", "server_cpu_ms_per_registration")
    return {
        "kind": "connections",
        "title": "master: idle registered WebSocket agents"
        if kind == "master"
        else "baseline (c): idle FastAPI WebSocket server",
        "count": count,
        "tools_per_agent": tools,
        "permessage_deflate": deflate,
        "reps": reps,
        "summary": {
            **{key: spread([rep[key] for rep in reps]) for key in keys},
            "failed": sum(rep["failed"] for rep in reps),
            "first_error": next((rep["first_error"] for rep in reps if rep.get("first_error")), None),
            "errors": _merged([rep.get("errors") or {} for rep in reps]),
        },
    }
