"""The workers' and the soak's rules, on made-up results (the benchmark itself is never run here)."""

from __future__ import annotations

import math
import os
from typing import Any

import pytest

from bench.cases import DEFAULT_CASES, SOAK, select
from bench.cli import parse_args
from bench.soak import second_half_growth, summarise
from bench.targets import evaluate
from bench.throughput import limited_by_machine


def test_the_soak_is_opt_in() -> None:
    assert SOAK not in DEFAULT_CASES
    assert SOAK not in select("all")
    assert select("all,soak")[-1] == SOAK
    assert set(select("workers")) >= {"workers1_c32", "workers2_c64", "workers4_c128"}
    assert "workers4_c32" not in select("all") and "workers4_c32" in select("workers_spread")


def test_second_half_growth_ignores_the_first_half_and_fits_a_line() -> None:
    times = [float(t) for t in range(11)]
    warm_then_flat = [0, 50, 90, 100, 100, 100, 100, 100, 100, 100, 100]
    assert second_half_growth(times, [float(v) for v in warm_then_flat]) == (0.0, 0.0)
    per_minute, growth = second_half_growth(times, [float(2 * t) for t in range(11)])
    assert per_minute == pytest.approx(120.0)
    assert growth == pytest.approx(10.0)  # 2 per second over the 5 s of the second half
    assert all(math.isnan(x) for x in second_half_growth([0.0], [1.0]))


def _sample(t: float, rss: float, fds: int, data: float) -> dict[str, Any]:
    tick = {"ops": 100, "errors": 0, "first_error": None, "new_sessions": 25, "existing_sessions": 75}
    return {
        "t_s": t,
        "master_rss_mib": rss,
        "master_fds": fds,
        "redis_db_mib": data,
        "redis_db_keys": 100,
        "redis_used_memory_mib": 2.0,
        "load": {**tick, "p50_ms": 5.0},
    }


def _soak_case(rss_per_sample: float, minutes: float = 30.0) -> dict[str, Any]:
    samples = [_sample(60.0 * t, 150 + rss_per_sample * t, 30, 1.5) for t in range(int(minutes) + 1)]
    return {"minutes": minutes, "session_ttl_s": 120, "summary": summarise(samples)}


def _soak_verdict(case: dict[str, Any]) -> dict[str, Any]:
    verdicts = evaluate({SOAK: case}, connections_wanted=10_000)
    return next(v for v in verdicts if v["target"].startswith("soak"))


def test_a_flat_soak_passes_and_a_leaking_one_fails() -> None:
    assert _soak_verdict(_soak_case(0.0))["verdict"] == "PASS"
    leaking = _soak_verdict(_soak_case(1.0))  # 1 MiB a minute: 15 MiB over the second half
    assert leaking["verdict"] == "FAIL"
    assert "RSS +15.00 MiB" in leaking["measured"]
    assert _soak_verdict(_soak_case(1.0, minutes=5))["verdict"] == "info"  # shorter than 4 TTLs


def test_the_machine_is_the_limit_with_more_masters_than_cores_or_every_core_busy() -> None:
    cores = os.cpu_count() or 1
    assert limited_by_machine(cores + 1, []) == "cores"
    assert limited_by_machine(1, [{"machine_cpu_pct": 100.0 * cores}]) == "busy"
    assert limited_by_machine(1, [{"machine_cpu_pct": 10.0}]) == ""


def test_session_turns_are_checked_when_parsed(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args(["--session-turns", "1,100,1000"]).session_turns == [1, 100, 1000]
    for bad, says in (("abc", "not a comma-separated list"), ("1,0", "at least 1")):
        with pytest.raises(SystemExit):
            parse_args(["--session-turns", bad])
        assert f"--session-turns: '{bad}'" in (err := capsys.readouterr().err) and says in err, err


def test_the_report_prints_the_session_growth_tables() -> None:
    from bench.report import other_tables

    spread = {"min": 1.0, "median": 1.5, "max": 2.0}
    summary = {
        "p50_ms": spread,
        "p99_ms": spread,
        "server_cpu_ms_per_op": {"median": 0.5},
        "first_query_p50_ms": spread,
        "errors": 0,
        "first_query_errors": 1,
    }
    cases = {
        name: {"by_turns": {"100": {"summary": summary}}}
        for name in ("session_growth", "scripted_session_growth")
    }
    tables = other_tables(cases)
    growth = [table for table in tables if "earlier turns" in table]
    assert len(growth) == 2 and "via the real client" in growth[1]
    assert all(" 100 | 1.00 / 1.50 / 2.00 |" in table for table in growth)


def _paced(rate: float, served: float, cpu_ms: float) -> dict[str, Any]:
    summary = {"ops_per_s": {"median": served}, "server_cpu_ms_per_op": {"median": cpu_ms}, "errors": 0}
    return {"kind": "round_trip", "rate": rate, "summary": summary}


def test_the_masters_cpu_is_judged_at_the_same_rate_per_master() -> None:
    cases = {
        "workers1_r100": _paced(100, 100, 1.0),
        "workers4_r400": _paced(400, 399, 1.4),
        "workers1_http_r100": _paced(100, 100, 1.0),
        "workers4_http_r400": _paced(400, 400, 1.6),
        "workers1_replicas_r100": _paced(100, 100, 1.0),
        "workers4_replicas_r400": _paced(400, 300, 1.3),  # the rate not held
    }
    verdicts = {v["target"]: v for v in evaluate(cases, connections_wanted=0)}
    ws = verdicts["masters on one Redis, WS: CPU per op, 4 masters vs 1, 100 queries/s per master"]
    assert (ws["ratio"], ws["verdict"]) == (1.4, "PASS")
    assert "did not hold the rate" not in ws["note"]
    replicas = verdicts[
        "masters on one Redis, WS with a replica on every master: CPU per op, 4 masters vs 1, 100 queries/s per master"
    ]
    assert (replicas["ratio"], replicas["verdict"]) == (1.3, "info")
    assert "not judged: workers4_replicas_r400 did not hold the rate" in replicas["note"]
    http = verdicts[
        "masters on one Redis, HTTP invocation: CPU per op, 4 masters vs 1, 100 queries/s per master"
    ]
    assert (http["ratio"], http["verdict"]) == (1.6, "FAIL")


def test_the_paced_workers_cases_run_by_default() -> None:
    workers = select("workers")
    assert {"workers1_r100", "workers4_r400", "workers4_http_r400", "workers4_replicas_r400"} <= set(workers)
    assert "workers4_r400" in DEFAULT_CASES
