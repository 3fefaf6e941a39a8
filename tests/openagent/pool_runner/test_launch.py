"""openagent/pool_runner/launch.py: an agent process confines itself before running agent code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.factories import ROOT

LAUNCH = ROOT / "openagent" / "pool_runner" / "launch.py"
REPORT = """
import json, os, resource
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
    "as": resource.getrlimit(resource.RLIMIT_AS)[0],
    "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
    "core": resource.getrlimit(resource.RLIMIT_CORE)[0],
    "no_new_privs": [l.split()[1] for l in open("/proc/self/status") if l.startswith("NoNewPrivs")][0],
}))
"""


def _run(python: str, script: Path, *flags: str) -> dict[str, object]:
    result = subprocess.run(
        [python, str(LAUNCH), "--memory-mb=512", "--nofile=64", *flags, f"--path={script}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd="/",
    )
    report: dict[str, object] = json.loads(result.stdout)
    return report


def test_limits_and_no_new_privileges(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(REPORT)
    report = _run(sys.executable, script, "--uid=-1")
    assert report["as"] == 512 * 1024 * 1024
    assert report["nofile"] == 64
    assert report["core"] == 0
    assert report["no_new_privs"] == "1"
    assert report["uid"] == os.getuid()  # --uid=-1 keeps the identity


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping root needs root")
@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs a Python every user can read")
def test_root_is_dropped_to_the_agent_identity() -> None:
    # pytest's tmp_path sits under a directory only root may enter.
    directory = Path(tempfile.mkdtemp(prefix="openagent-launch-"))
    try:
        directory.chmod(0o755)
        script = directory / "agent.py"
        script.write_text(REPORT)
        script.chmod(0o644)
        report = _run("/usr/bin/python3", script, "--uid=65534", "--gid=65534")
    finally:
        shutil.rmtree(directory)
    assert (report["uid"], report["gid"], report["groups"]) == (65534, 65534, [])
    assert report["no_new_privs"] == "1"
