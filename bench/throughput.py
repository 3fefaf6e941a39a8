"""Round-trip cases: a load client process against a running system, window by window.

For each window the runner samples the CPU time of every process of the system at the
load client's ``start`` and ``end`` events, so "server CPU per operation" is the hub's
user + system CPU over exactly the measured window divided by the operations in it.
The machine's busy time is sampled too: ``outside_cpu_pct`` is CPU used by processes
that are not the benchmark's during the window (other work on the machine skews results).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import psutil

from bench.procs import Child
from bench.profiling import Profiler
from bench.setups import Running
from bench.stats import spread

MACHINE = "(machine)"
EVENT_SLACK = 60.0
"""Seconds allowed on top of a window's length before a silent load client is an error."""


@dataclass(frozen=True)
class Timing:
    warmup: float
    duration: float
    repeat: int


@dataclass(frozen=True)
class LoadCase:
    """One round-trip case: what to POST, where, and how many at once."""

    name: str
    title: str
    path: str
    concurrency: int
    body: dict[str, Any] = field(default_factory=lambda: {"query": "hello"})
    mode: str = "closed"
    """The load client's mode (:mod:`bench.load`): ``closed`` POSTs ``body``; ``mcp`` calls the
    tool ``body["tool"]`` with ``body["arguments"]`` through the official MCP client."""
    protocol: str = "query"
    """``query`` (``POST /query`` bodies) or ``a2a`` (A2A JSON-RPC ``SendMessage``, see :mod:`bench.load`)."""
    rate: float | None = None
    """Queries per second in all, paced (each worker one query every ``concurrency / rate`` s, no
    catching up after a stall), or ``None``: back to back (a closed loop)."""


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent busy so far (all cores)."""
    times = psutil.cpu_times()
    not_busy = ("idle", "iowait", "guest", "guest_nice")  # guest time is already in user time
    return float(sum(times) - sum(getattr(times, name, 0.0) for name in not_busy))


def _sample(children: list[Child]) -> dict[str, float]:
    return {**{child.name: child.cpu_seconds() for child in children}, MACHINE: machine_busy_seconds()}


def _window(
    end: dict[str, Any], cpu0: dict[str, float], cpu1: dict[str, float], wall: float, hubs: list[str]
) -> dict[str, Any]:
    """One window's figures; with several hubs (masters), server CPU is their sum."""
    ops = int(end["ops"])
    used = {name: cpu1[name] - cpu0[name] for name in cpu0}
    ours = sum(seconds for name, seconds in used.items() if name != MACHINE)
    server = sum(used[hub] for hub in hubs)
    return {
        "ops": ops,
        "errors": int(end["errors"]),
        "first_error": end.get("first_error"),
        "seconds": round(float(end["seconds"]), 3),
        "ops_per_s": float(end["ops_per_s"]),
        "p50_ms": float(end["p50_ms"]),
        "p99_ms": float(end["p99_ms"]),
        "max_ms": float(end["max_ms"]),
        "server_cpu_ms_per_op": (1000 * server / ops) if ops else float("nan"),
        "server_cpu_pct": round(100 * server / wall, 1),
        "cpu_pct": {
            name: round(100 * seconds / wall, 1)
            for name, seconds in used.items()
            if name not in (*hubs, MACHINE)
        },
        **({"hub_cpu_pct": {hub: round(100 * used[hub] / wall, 1) for hub in hubs}} if len(hubs) > 1 else {}),
        "outside_cpu_pct": round(100 * max(0.0, used[MACHINE] - ours) / wall, 1),
        "machine_cpu_pct": round(100 * used[MACHINE] / wall, 1),
        **({"first_query": end["first_query"]} if end.get("first_query") else {}),
    }


SATURATED = 0.9
"""The machine counts as the limit when its busy CPU (median over the windows) reaches this share
of all its cores."""


def limited_by_machine(masters: int, reps: list[dict[str, Any]]) -> str:
    """Why the machine, not the design, bounds a case's figure: ``"cores"`` (more masters than
    cores), ``"busy"`` (every core was busy: load client, agents, Redis and other work included),
    or ``""``."""
    cores = os.cpu_count() or 1
    if masters > cores:
        return "cores"
    busy = statistics.median(rep.get("machine_cpu_pct", 0.0) for rep in reps) if reps else 0.0
    return "busy" if busy >= SATURATED * 100 * cores else ""


def summarise_reps(reps: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("ops_per_s", "p50_ms", "p99_ms", "server_cpu_ms_per_op", "server_cpu_pct")
    summary: dict[str, Any] = {key: spread([rep[key] for rep in reps]) for key in keys}
    summary["outside_cpu_pct"] = spread([rep["outside_cpu_pct"] for rep in reps])
    summary["machine_cpu_pct"] = spread([rep.get("machine_cpu_pct", math.nan) for rep in reps])
    summary["errors"] = sum(rep["errors"] for rep in reps)
    summary["first_error"] = next((rep["first_error"] for rep in reps if rep.get("first_error")), None)
    return summary


def merged(windows: list[dict[str, Any]]) -> dict[str, Any]:
    """One case's result from its windows measured apart (:func:`measure` with one window each):
    the first one's fields, every window's reps, the summary over them all."""
    result = {**windows[0], "reps": [rep for window in windows for rep in window["reps"]]}
    result["summary"] = summarise_reps(result["reps"])
    result["limited_by_machine"] = limited_by_machine(result["masters"], result["reps"])
    return result


async def run_load(
    running: Running,
    config: dict[str, Any],
    windows: int,
    window_seconds: float,
    *,
    label: str,
    profile: bool,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Start a load client with ``config`` and collect its ``windows`` windows."""
    load = await Child(f"load-{label}", "bench.load", json.dumps(config)).start()
    watched = [*running.watched(), load]
    reps: list[dict[str, Any]] = []
    profile_result = None
    try:
        await load.expect("ready", EVENT_SLACK)
        for rep in range(windows):
            await load.expect("start", float(config.get("warmup", 0)) + window_seconds + EVENT_SLACK)
            cpu0, t0 = _sample(watched), time.monotonic()
            profiler = Profiler(label, running.hub.pid, window_seconds) if profile and rep == 0 else None
            if profiler is not None:
                await profiler.start()
            end = await load.expect("end", window_seconds + EVENT_SLACK)
            cpu1, t1 = _sample(watched), time.monotonic()
            if config.get("mode") == "sessions" and rep + 1 < windows:
                await load.send("next")  # the client primes the next window's sessions only now
            reps.append(_window(end, cpu0, cpu1, t1 - t0, [hub.name for hub in running.hubs()]))
            if profiler is not None:
                profile_result = await profiler.finish()
        await load.expect("done", EVENT_SLACK)
        await load.wait(EVENT_SLACK)
    finally:
        await load.stop()
    return reps, profile_result


async def measure(
    running: Running, case: LoadCase, timing: Timing, *, profile: bool = False
) -> dict[str, Any]:
    """Run ``case`` against ``running``: warm-up, then ``timing.repeat`` windows."""
    agents = case.body.get("allowed_agent_ids") or []
    spread = running.spread.get(agents[0], []) if len(agents) == 1 else []
    config = {
        "urls": [url + case.path for url in running.urls()],
        "bodies": [{**case.body, "allowed_agent_ids": [agent]} for agent in spread] or [case.body],
        "concurrency": case.concurrency,
        "mode": case.mode,
        "protocol": case.protocol,
        "rate": case.rate,
        "warmup": timing.warmup,
        "duration": timing.duration,
        "repeat": timing.repeat,
    }
    reps, profile_result = await run_load(
        running, config, timing.repeat, timing.duration, label=case.name, profile=profile
    )
    result: dict[str, Any] = {
        "kind": "round_trip",
        "title": case.title,
        "concurrency": case.concurrency,
        "rate": case.rate,
        "hub": running.hub.name,
        "masters": len(running.hubs()),
        "nproc": os.cpu_count(),
        "limited_by_machine": limited_by_machine(len(running.hubs()), reps),
        "reps": reps,
        "summary": summarise_reps(reps),
    }
    if case.name.startswith("workers"):  # the masters' sum: a figure that does not depend on the cores
        result["masters_cpu_ms_per_op"] = result["summary"]["server_cpu_ms_per_op"]
    if profile_result is not None:
        result["profile"] = profile_result
    return result
