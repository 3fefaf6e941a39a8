"""The benchmark keeps working: ``python -m bench --smoke --cases all,soak,workers_spread`` runs
every case (the opt-in ones too, the soak for a few seconds) and writes the JSON.

The figures of a smoke run mean nothing (tiny windows, systems run side by side on whatever
else the machine is doing), so nothing here judges speed: a 0.25 s window on a busy machine
may complete no request at all. The benchmark itself is never part of the suite. It empties
its own Redis database: ``OPENAGENT_BENCH_REDIS_URL``, by default 13 on the tests' Redis
server (neither the tests' one, 15, nor the one ``python -m bench`` uses, 14).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from bench.cases import ALL_CASES, ROUND_TRIPS
from tests.factories import ROOT, TEST_REDIS_URL

BENCH_REDIS_URL = os.environ.get(
    "OPENAGENT_BENCH_REDIS_URL", urlunsplit(urlsplit(TEST_REDIS_URL)._replace(path="/13"))
)


@pytest.mark.timeout(600)
def test_smoke_run_writes_every_case_and_target(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--smoke",
            "--cases",
            "all,soak,workers_spread",
            "--results-dir",
            str(tmp_path),
            "--redis-url",
            BENCH_REDIS_URL,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, f"{run.stdout[-2000:]}\n{run.stderr[-4000:]}"

    results = json.loads((tmp_path / "latest.json").read_text())
    assert list(results["cases"]) == ALL_CASES
    assert len(list((tmp_path / "runs").glob("*.json"))) == 1
    for name in ROUND_TRIPS:
        case = results["cases"][name]
        assert len(case["reps"]) == 3, name
        for rep in case["reps"]:
            assert isinstance(rep["ops"], int) and rep["ops"] >= 0, (name, rep)
            assert math.isfinite(rep["seconds"]) and rep["seconds"] > 0, (name, rep)
        # Correctness, not speed: every request that completed succeeded.
        assert case["summary"]["errors"] == 0, (name, case["summary"]["first_error"])
    assert results["cases"]["connections_master"]["summary"]["failed"] == 0
    trips = results["cases"]["redis_trips"]["by_query"]
    assert all(kind["round_trips_per_query"] >= 1 for kind in trips.values()), trips
    soak = results["cases"]["soak"]
    assert len(soak["samples"]) >= 4, soak["samples"]
    assert soak["summary"]["queries"] > 0 and soak["summary"]["errors"] == 0, soak["summary"]
    assert all(sample["master_fds"] > 0 and sample["master_rss_mib"] > 0 for sample in soak["samples"])
    assert soak["samples"][-1]["redis_keys_by_prefix"].get("session", 0) > 0, soak["samples"][-1]
    verdicts = {target["target"]: target["verdict"] for target in results["targets"]}
    # 15 + the OpenAI door, the Responses door and the A2A door, each at two concurrencies + the
    # MCP case's 3 + the replicas' scaling + the masters' CPU per op at 4 masters (WS, HTTP, replicas)
    assert len(verdicts) == 28
    # "n/a" is what a target says when a tiny window measured nothing: allowed here.
    assert set(verdicts.values()) <= {"PASS", "FAIL", "info", "n/a"}, verdicts
    # A case and the baseline it is judged against run window by window in turn, not one
    # after the other: the same moment of the machine for both.
    windows = [
        (match["case"], int(match["window"]))
        for match in re.finditer(r"\] (?P<case>\w+): .*, window (?P<window>\d+) of 3$", run.stderr, re.M)
    ]
    for case, baseline in (
        ("ws_c1", "baseline_a_c1"),
        ("scripted_c1", "ws_c1"),
        ("mcp_hub_c16", "mcp_direct_c16"),
    ):
        both_first = max(windows.index((case, 1)), windows.index((baseline, 1)))
        either_second = min(windows.index((case, 2)), windows.index((baseline, 2)))
        assert both_first < either_second, (case, baseline, windows)
    assert "| target" in run.stdout and "ws_c32" in run.stdout
    assert "workers4_c128" in run.stdout and "| soak series" in run.stdout
