"""The results: a table on stdout, and JSON (``latest.json`` plus a timestamped copy)."""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import statistics
import subprocess
import threading
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.procs import ROOT

PACKAGES = (
    "fastapi",
    "starlette",
    "uvicorn",
    "uvloop",
    "httptools",
    "websockets",
    "httpx",
    "aiohttp",
    "redis",
    "hiredis",
    "orjson",
    "pyreqwest",
    "pydantic",
    "openai",
)
HANDOFFS = 5000


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "nproc": os.cpu_count(),
        "cpu_model": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": versions,
        "git": _git(),
    }


def thread_round_trip() -> dict[str, float]:
    """What a round trip between two threads of one process costs here, in microseconds of CPU
    (both threads) and of wall time: a byte through a pipe each way, :data:`HANDOFFS` times.

    Each way wakes a sleeping thread, as the master's LLM client does (its I/O runs in a thread
    of its own, two hand-offs per request). On a virtual machine a wake-up on another core can
    cost several times what it costs on the same core, and that moves every CPU-per-query figure
    at concurrency 1."""
    ping_r, ping_w = os.pipe()
    pong_r, pong_w = os.pipe()

    def echo() -> None:
        for _ in range(HANDOFFS):
            os.read(ping_r, 1)
            os.write(pong_w, b"x")

    thread = threading.Thread(target=echo, daemon=True)
    thread.start()
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(HANDOFFS):
        os.write(ping_w, b"x")
        os.read(pong_r, 1)
    thread.join()
    after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - started
    for fd in (ping_r, ping_w, pong_r, pong_w):
        os.close(fd)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu_us": round(1e6 * cpu / HANDOFFS, 1), "wall_us": round(1e6 * wall / HANDOFFS, 1)}


def _git() -> str | None:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{commit}{' (modified)' if dirty else ''}"


def write_json(results: dict[str, Any], results_dir: Path) -> tuple[Path, Path]:
    results_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    text = json.dumps(_clean(results), indent=2, sort_keys=False) + "\n"
    latest = results_dir / "latest.json"
    stamped = results_dir / "runs" / f"{stamp}.json"
    stamped.parent.mkdir(exist_ok=True)
    latest.write_text(text)
    stamped.write_text(text)
    return latest, stamped


def _clean(value: Any) -> Any:
    """NaN is not JSON: write null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------- table


def _table(headers: list[str], rows: list[list[str]], right: set[int]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return (
            "| "
            + " | ".join(
                c.rjust(w) if i in right else c.ljust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
            + " |"
        )

    sep = (
        "| "
        + " | ".join(("-" * (w - 1) + ":") if i in right else "-" * w for i, w in enumerate(widths))
        + " |"
    )
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


def _num(value: float, digits: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.{digits}f}"


def _three(spread: dict[str, float], digits: int) -> str:
    return " / ".join(_num(spread[k], digits) for k in ("min", "median", "max"))


def round_trip_table(cases: dict[str, Any]) -> str:
    rows = []
    for name, case in cases.items():
        if case.get("kind") != "round_trip":
            continue
        s = case["summary"]
        rows.append(
            [
                name,
                case["title"],
                str(case["concurrency"]),
                _three(s["ops_per_s"], 0),
                _three(s["p50_ms"], 2),
                _three(s["p99_ms"], 2),
                _num(s["server_cpu_ms_per_op"]["median"], 3),
                _num(s["server_cpu_pct"]["median"], 0),
                _num(s["outside_cpu_pct"]["median"], 0),
                str(s["errors"]),
            ]
        )
    headers = [
        "case",
        "what",
        "conc.",
        "ops/s min/med/max",
        "p50 ms min/med/max",
        "p99 ms min/med/max",
        "server CPU ms/op",
        "server CPU %",
        "other work CPU %",
        "errors",
    ]
    return _table(headers, rows, {2, 3, 4, 5, 6, 7, 8, 9})


def other_tables(cases: dict[str, Any]) -> list[str]:
    out = []
    conn = [(n, c) for n, c in cases.items() if c.get("kind") == "connections"]
    if conn:
        rows = [
            [
                name,
                f"{case['count']:,}",
                _three(case["summary"]["rss_per_agent_kb"], 1),
                _three(case["summary"]["register_seconds"], 1),
                _num(case["summary"]["server_cpu_ms_per_registration"]["median"], 3),
                f"{case['reps'][-1]['rss_before_mb']:.0f} → {case['reps'][-1]['rss_after_mb']:.0f}",
                _num(statistics.median(rep["outside_cpu_pct"] for rep in case["reps"]), 0),
                str(case["summary"]["failed"]),
            ]
            for name, case in conn
        ]
        headers = [
            "case",
            "agents",
            "RSS KiB/agent min/med/max",
            "register s min/med/max",
            "server CPU ms/reg.",
            "RSS MiB (last)",
            "other work CPU %",
            "failed",
        ]
        out.append(_table(headers, rows, {1, 2, 3, 4, 5, 6, 7}))
        for name, case in conn:  # why registrations failed: each kind of error, its count and first message
            for kind, entry in (case["summary"].get("errors") or {}).items():
                out.append(f"{name}: {entry['count']} failed with {kind}, first: {entry['first']}")
    redis = cases.get("redis_trips")
    if redis:
        rows = [
            [
                kind,
                _num(entry["round_trips_per_query"], 2),
                _num(entry["commands_per_query"], 2),
                ", ".join(f"{k} {v:g}" for k, v in entry["commands"].items()),
                ", ".join(f"{k} {v:g}" for k, v in entry["inside_lua"].items()) or "-",
            ]
            for kind, entry in redis["by_query"].items()
        ]
        out.append(
            _table(["Redis, per query", "round trips", "commands", "commands", "inside Lua"], rows, {1, 2})
        )
    for table in (workers_table(cases), soak_table(cases.get("soak"))):
        if table:
            out.append(table)
    for name in ("session_growth", "scripted_session_growth"):
        sessions = cases.get(name)
        if not sessions:
            continue
        rows = [
            [
                f"{int(size):,}",
                _three(entry["summary"]["p50_ms"], 2),
                _three(entry["summary"]["p99_ms"], 2),
                _num(entry["summary"]["server_cpu_ms_per_op"]["median"], 3),
                _three(entry["summary"]["first_query_p50_ms"], 2),
                str(entry["summary"]["errors"] + entry["summary"]["first_query_errors"]),
            ]
            for size, entry in sessions["by_turns"].items()
        ]
        headers = [
            "earlier turns" if name == "session_growth" else "earlier turns, via the real client",
            "p50 ms min/med/max",
            "p99 ms min/med/max",
            "server CPU ms/op",
            "first query p50 ms (compaction)",
            "errors",
        ]
        out.append(_table(headers, rows, {0, 1, 2, 3, 4, 5}))
    return out


def workers_table(cases: dict[str, Any]) -> str | None:
    """The workers cases: throughput against one master, the masters' CPU, and the machine's limit."""
    rows = []
    for name, case in cases.items():
        if case.get("kind") != "round_trip" or not name.startswith("workers"):
            continue
        s = case["summary"]
        head, load = name.rsplit("_", 1)  # c<in flight> or r<queries/s>, in all
        masters = case["masters"]
        kind = head.removeprefix(f"workers{masters}")
        one = cases.get(f"workers1{kind}_{load[0]}{int(load[1:]) // masters}")  # the same load per master
        base = one["summary"]["ops_per_s"]["median"] if one else math.nan
        shares = [rep.get("hub_cpu_pct", {}) for rep in case["reps"]]
        per_master = [
            _num(statistics.median(share[hub] for share in shares), 0)
            for hub in (shares[0] if shares else {})
        ]
        rows.append(
            [
                name,
                str(case["masters"]),
                str(case.get("nproc")),
                _three(s["ops_per_s"], 0),
                _num(s["ops_per_s"]["median"] / base, 2) if base else "-",
                _num(s["p50_ms"]["median"], 1),
                _num(s["p99_ms"]["median"], 1),
                _num(s["server_cpu_ms_per_op"]["median"], 3),
                _num(s["server_cpu_pct"]["median"], 0)
                + (f" ({' + '.join(per_master)})" if per_master else ""),
                _num(s.get("machine_cpu_pct", {}).get("median", math.nan), 0),
                _num(s["outside_cpu_pct"]["median"], 0),
                {"cores": "yes: masters > cores", "busy": "yes: all cores busy"}.get(
                    case.get("limited_by_machine") or "", "no"
                ),
                str(s["errors"]),
            ]
        )
    if not rows:
        return None
    headers = [
        "case",
        "masters",
        "nproc",
        "ops/s min/med/max",
        "x 1 master",
        "p50 ms",
        "p99 ms",
        "masters CPU ms/op",
        "masters CPU % (each)",
        "machine CPU %",
        "other work CPU %",
        "limited by the machine",
        "errors",
    ]
    return _table(headers, rows, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12})


def soak_table(case: dict[str, Any] | None) -> str | None:
    if not case:
        return None
    summary = case["summary"]
    labels = {
        "master_rss_mib": "master RSS MiB",
        "master_fds": "master open fds",
        "redis_db_mib": "bench db's data MiB (MEMORY USAGE)",
        "redis_db_keys": "bench db's keys",
        "redis_used_memory_mib": "Redis used_memory MiB (server)",
    }
    rows = [
        [
            label,
            _num(summary[key]["first"], 2),
            _num(summary[key]["middle"], 2),
            _num(summary[key]["max"], 2),
            _num(summary[key]["last"], 2),
            _num(summary[key]["slope_per_min"], 3),
            _num(summary[key]["second_half_growth"], 2),
        ]
        for key, label in labels.items()
    ]
    title = (
        f"soak: {case['minutes']:g} min, {summary['queries']:,} queries ({summary['new_sessions']:,} in new "
        f"sessions), {summary['errors']} errors, session TTL {case['session_ttl_s']} s, nproc {case['nproc']}"
    )
    headers = ["soak series", "first", "middle", "max", "last", "2nd half slope /min", "2nd half growth"]
    return title + "\n" + _table(headers, rows, {1, 2, 3, 4, 5, 6})


def target_table(verdicts: list[dict[str, Any]]) -> str:
    rows = [
        [
            v["target"],
            v["rule"],
            v["measured"],
            "-" if v["ratio"] is None else f"{v['ratio']:.2f}",
            v["verdict"],
            v["note"],
        ]
        for v in verdicts
    ]
    return _table(["target", "rule", "measured (median)", "ratio", "verdict", "note"], rows, {3})


def render(results: dict[str, Any]) -> str:
    meta = results["meta"]
    host = meta["machine"]
    timing = meta["timing"]
    parts = [
        f"OpenAgent hub benchmark, {meta['date']} on {host['nproc']} x {host['cpu_model']}, "
        f"Python {host['python']}, git {host['git']}",
        f"{timing['repeat']} windows of {timing['duration']:g} s after {timing['warmup']:g} s warm-up; "
        "latencies and throughput as seen by the load client; server CPU = hub process only "
        "(100% = one core); other work = CPU of processes outside the benchmark during the windows "
        f"(machine {meta['busy_before_pct_of_one_core']:.0f}% busy before the start)"
        + _handoff(meta.get("thread_round_trip_us")),
        "",
        round_trip_table(results["cases"]),
    ]
    for table in other_tables(results["cases"]):
        parts += ["", table]
    parts += ["", target_table(results["targets"])]
    for name, case in results["cases"].items():
        for profile in _profiles(name, case):
            parts += ["", profile]
    return "\n".join(parts)


def _handoff(measured: dict[str, float] | None) -> str:
    if not measured:
        return ""
    return (
        f"; a round trip between two threads costs {measured['cpu_us']:g} us of CPU here "
        f"({measured['wall_us']:g} us wall)"
    )


def _profiles(name: str, case: dict[str, Any]) -> list[str]:
    found = []
    if "profile" in case:
        found.append((name, case["profile"]))
    for size, entry in case.get("by_turns", {}).items():
        if "profile" in entry:
            found.append((f"{name} {size} turns", entry["profile"]))
    out = []
    for label, profile in found:
        if "top_self" not in profile:
            out.append(f"profile of {label}: {profile.get('note')}")
            continue
        lines = [
            f"profile of {label}: {profile['samples']} samples, hub busy {profile['busy_fraction']:.0%}, {profile['file']}"
        ]
        lines.append(
            "  self time by package: " + ", ".join(f"{n} {p}%" for n, p in profile["self_by_package"][:10])
        )
        lines.append("  inclusive share of:")
        lines += [f"    {p:5.1f}%  {n}" for n, p in profile["categories"]]
        lines.append("  top inclusive:")
        lines += [f"    {p:5.1f}%  {n}" for n, p in profile["top_inclusive"][:25]]
        lines.append("  top self:")
        lines += [f"    {p:5.1f}%  {n}" for n, p in profile["top_self"][:15]]
        out.append("\n".join(lines))
    return out
