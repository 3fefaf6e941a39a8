"""Schemathesis over the master's OpenAPI document, with a valid key, on loopback only."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from fuzz.harness import ROOT, Master

EXCLUDED_PATHS = (
    "/save-agent",
    "/generate-agent",
    "/internal/workspace/restore",
    "/internal/yaml-agents/start",
)
"""Operations not fuzzed: they write agent modules into the repository, run generated code or
register agents from YAML text (whose URLs the hook cannot rewrite)."""

ALLOWED_5XX = {"501"}
"""A documented 501 (a feature not implemented yet, e.g. query attachments) is not a failure."""

COVERAGE_AFTER_SECONDS = 180

_FAILURE_LINE = re.compile(r"(ST\d+) ([^:\n]+): (\d+)")


@dataclass
class HttpOutcome:
    """What schemathesis saw."""

    exit_code: int
    statuses: Counter[str] = field(default_factory=Counter)
    """``"METHOD PATH STATUS"`` -> count."""
    failures: dict[str, int] = field(default_factory=dict)
    """Schemathesis findings by code and name, e.g. ``"ST103 Undocumented status code": 2``."""
    output_tail: str = ""

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    def server_errors(self) -> dict[str, int]:
        """5xx responses but the allowed ones, by operation and status."""
        return {
            k: n
            for k, n in self.statuses.items()
            if k.rsplit(" ", 1)[1].startswith("5") and k.rsplit(" ", 1)[1] not in ALLOWED_5XX
        }


def run_schemathesis(
    master: Master,
    *,
    seed: int,
    max_time: float,
    max_examples: int,
    work_dir: Path,
    phases: str | None = None,
) -> HttpOutcome:
    """``st run`` against ``master`` for at most ``max_time`` seconds (one worker).

    The coverage phase (boundary values of every schema) takes minutes on a busy machine, so a
    run shorter than :data:`COVERAGE_AFTER_SECONDS` fuzzes only, unless ``phases`` says otherwise.
    """
    if phases is None:
        phases = "examples,coverage,fuzzing,stateful" if max_time >= COVERAGE_AFTER_SECONDS else "fuzzing"
    status_log = work_dir / "http-statuses.log"
    status_log.write_text("")
    exclude = "^(" + "|".join(re.escape(path) for path in EXCLUDED_PATHS) + ")$"
    command = [
        str(Path(sys.executable).with_name("st")),
        "run",
        f"{master.base_url}/openapi.json",
        "--header",
        f"Authorization: Bearer {master.api_key}",
        "--checks",
        "all",
        "--seed",
        str(seed),
        "--max-examples",
        str(max_examples),
        "--max-time",
        str(max(1, int(max_time))),
        "--workers",
        "1",
        "--request-timeout",
        "30",
        "--generation-database",
        "none",
        "--exclude-path-regex",
        exclude,
        "--no-color",
        "--phases",
        phases,
        "--report-dir",
        str(work_dir / "schemathesis-report"),
    ]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SCHEMATHESIS_HOOKS": "fuzz.hooks",
        "FUZZ_STATUS_LOG": str(status_log),
    }
    try:
        done = subprocess.run(
            command, cwd=work_dir, env=env, capture_output=True, text=True, timeout=max_time + 300
        )
        exit_code, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        exit_code, output = -1, f"schemathesis did not finish: {exc}"
    (work_dir / "schemathesis.out").write_text(output)
    statuses = Counter(line.strip() for line in status_log.read_text().splitlines() if line.strip())
    summary = output[output.rfind("SUMMARY") :] if "SUMMARY" in output else output[-3000:]
    failures = {f"{code} {name.strip()}": int(count) for code, name, count in _FAILURE_LINE.findall(summary)}
    return HttpOutcome(exit_code, statuses, failures, output[-4000:])
