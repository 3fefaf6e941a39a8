"""The MCP conformance suite (npm ``@modelcontextprotocol/conformance``) against the master's ``/mcp``.

``conformance server --url ...`` runs its server scenarios (on the 2025 revisions the suite
speaks) against a real in-process master, with the committed baseline of expected failures
(``tests/mcp_conformance/expected-failures.yaml``, each explained there): it fails on a scenario
that fails and is not in the baseline, and on one in the baseline that passes.

``scripts/test.sh`` installs the suite (``npm ci`` in ``tests/mcp_conformance``, pinned by its
lock file); the test is skipped only where Node.js is not installed at all.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from tests.factories import ROOT, in_process_master

SUITE_DIR = ROOT / "tests" / "mcp_conformance"
CLI = SUITE_DIR / "node_modules" / ".bin" / "conformance"
BASELINE = SUITE_DIR / "expected-failures.yaml"
SUITE_TIMEOUT = 480.0


@pytest.mark.timeout(SUITE_TIMEOUT + 60)
async def test_the_conformance_suite_meets_the_baseline(tmp_path: Path) -> None:
    if shutil.which("node") is None:
        pytest.skip(
            "Node.js is not installed: the MCP conformance suite runs on it (apt-get install nodejs npm)"
        )
    assert CLI.exists(), (
        f"the MCP conformance suite is not installed: run scripts/test.sh, or npm ci --prefix {SUITE_DIR}"
    )
    async with in_process_master() as master:
        process = await asyncio.create_subprocess_exec(
            str(CLI),
            "server",
            "--url",
            f"{master.base_url}/mcp",
            "--expected-failures",
            str(BASELINE),
            "--output-dir",
            str(tmp_path),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=SUITE_DIR,
        )
        try:
            async with asyncio.timeout(SUITE_TIMEOUT):
                output, _ = await process.communicate()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    report = output.decode(errors="replace")
    summary = report[report.find("=== SUMMARY ===") :] if "=== SUMMARY ===" in report else report[-4000:]
    assert process.returncode == 0, summary
    assert "Baseline check passed" in report, summary
