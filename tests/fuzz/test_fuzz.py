"""A short, seeded run of ``python -m fuzz`` (the long one is ``make fuzz``; README, "Fuzzing").

Both fuzzers run against a fresh master on loopback: schemathesis over the OpenAPI document with
the key, and the WebSocket fuzzer beside the well-behaved query loop. The run fails on any 5xx
(but a documented 501), a crash or traceback, a dropped well-behaved connection, a failed loop
query or an accepted spoof.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories import ROOT, TEST_REDIS_URL


@pytest.mark.timeout(600)
def test_a_short_seeded_fuzz_run_finds_nothing(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "fuzz",
            "--duration",
            "20",
            "--seed",
            "7",
            "--max-examples",
            "5",
            "--redis-url",
            TEST_REDIS_URL,
            "--work-dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=500,
    )
    report = json.loads(run.stdout[: run.stdout.rindex("}") + 1])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert report["http"]["requests"] > 0 and report["http"]["server_errors"] == {}
    assert report["ws"]["loop_ok"] > 0 and report["ws"]["frames_sent"] > 0
    assert report["ws"]["dropped"] == [] and report["ws"]["loop_failed_count"] == 0
    assert report["master_alive"] and report["master_log_problems"] == []
