"""scripts/test.sh's step bookkeeping: every step runs, the summary lists each with its time, and
the script's status is the first failing step's (its functions run alone in bash, with stubs)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

TEST_SH = Path(__file__).resolve().parents[2] / "scripts" / "test.sh"


def _functions() -> str:
    """The definitions of ``run_step`` and ``summary`` with the variables they keep."""
    text = TEST_SH.read_text()
    start = text.index("steps=()")
    end = text.index("suite_started=$SECONDS")
    return text[start:end]


def _run(body: str) -> subprocess.CompletedProcess[str]:
    script = "\n".join(
        [
            'log() { printf "[test.sh] %s\\n" "$*" >&2; }',
            "_SCRIPT_NAME=test.sh",
            _functions(),
            "suite_started=$SECONDS",
            body,
        ]
    )
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30, check=False)


def test_every_step_runs_and_the_first_failure_sets_the_status() -> None:
    done = _run(
        "run_step one true\nrun_step two sh -c 'exit 3'\nrun_step three false\necho ran-all >&2\nsummary"
    )

    assert done.returncode == 3
    assert "ran-all" in done.stderr  # the steps after a failure still ran
    assert re.search(r"one +\d+ s  ok", done.stderr)
    assert re.search(r"two +\d+ s  FAILED \(status 3\)", done.stderr)
    assert "FAILED steps: two three" in done.stderr
    assert "all checks passed" not in done.stderr


def test_a_green_run_ends_once_with_all_checks_passed() -> None:
    done = _run("run_step one true\nrun_step two true\nsummary")

    assert done.returncode == 0, done.stderr
    assert done.stderr.count("steps (total") == 1
    assert done.stderr.rstrip().endswith("all checks passed")
