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


NEIGHBOUR = """
import json, subprocess
launch, victim = LAUNCH, VICTIM
env = {"PATH": "/usr/bin:/bin", "SECRET_PROBE": "s3cret-of-the-neighbour"}
found = {}
for how, command in (
    ("launched", ["/usr/bin/python3", launch, "--uid=-1", f"--path={victim}"]),
    ("plain", ["/usr/bin/python3", victim]),
):
    other = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    assert other.stdout.readline().strip() == "ready"
    try:
        with open(f"/proc/{other.pid}/environ", "rb") as environ:
            found[how] = "s3cret-of-the-neighbour" in environ.read().decode(errors="replace")
    except PermissionError:
        found[how] = "denied"
    other.kill()
    other.wait(timeout=30)
print(json.dumps(found))
"""
VICTIM = "import time\nprint('ready', flush=True)\ntime.sleep(600)\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping root needs root")
@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs a Python every user can read")
def test_an_agent_cannot_read_the_environment_of_another_process_of_its_user() -> None:
    """Agents that share a user (a runner that cannot switch users, as in a non-root Pod) cannot
    read each other's keys from /proc/<pid>/environ: launch makes each non-dumpable. The plain
    process of the same user is readable, so the check is not vacuous."""
    directory = Path(tempfile.mkdtemp(prefix="openagent-launch-"))
    try:
        directory.chmod(0o755)
        neighbour = NEIGHBOUR.replace("LAUNCH", repr(str(LAUNCH))).replace(
            "VICTIM", repr(str(directory / "victim.py"))
        )
        for name, text in (("neighbour.py", neighbour), ("victim.py", VICTIM)):
            (directory / name).write_text(text)
            (directory / name).chmod(0o644)
        result = subprocess.run(
            [
                "/usr/bin/python3",
                str(LAUNCH),
                "--uid=65534",
                "--gid=65534",
                f"--path={directory / 'neighbour.py'}",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd="/",
        )
    finally:
        shutil.rmtree(directory)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"launched": "denied", "plain": True}
