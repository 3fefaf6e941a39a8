"""Run the A2A TCK (a2aproject/a2a-tck) MUST-level requirements against a master on loopback.

    make a2a-tck                       # or: .venv/bin/python -m scripts.a2a_tck [options]

Gets the TCK (``git clone`` of ``--tck-repo`` at ``--tck-ref`` into ``.run/a2a-tck``, or the
checkout ``--tck-dir`` / ``A2A_TCK_DIR`` names), gives it its own virtualenv there, starts the
scripted LLM (it echoes) and a master without an API key (``REDIS_URL`` from
``OPENAGENT_TCK_REDIS_URL``, default db 14 of the local Redis), runs the TCK's ``--level must``
on the JSON-RPC and HTTP+JSON bindings, and compares its failures with
``scripts/a2a_tck_expected_failures.txt`` (one test a line, with its reason). Exits 1 on a failure
that is not listed; a listed one that passes is reported (remove it from the list). The TCK's own
reports land in the TCK's ``reports/``. Not part of ``scripts/test.sh``: it takes minutes.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import httpx

from openagent.testing import ScriptedOpenAIServer, echo_handler

ROOT = Path(__file__).resolve().parent.parent
TCK_REPO = "https://github.com/a2aproject/a2a-tck.git"
TCK_REF = "357c4a87afa2818731590647cccbea31c31733a2"
"""The 1.0-dev branch of the TCK this list of expected failures was made with."""
EXPECTED = Path(__file__).with_name("a2a_tck_expected_failures.txt")
START_TIMEOUT_SECONDS = 60
TCK_TIMEOUT_SECONDS = 1800


def log(message: str) -> None:
    print(f"[a2a-tck] {message}", file=sys.stderr, flush=True)


def tck_source(args: argparse.Namespace) -> Path:
    """The TCK's checkout: ``--tck-dir``, else a clone at ``--tck-ref`` in .run/a2a-tck/src."""
    if args.tck_dir:
        return Path(args.tck_dir).resolve()
    source = ROOT / ".run" / "a2a-tck" / "src"
    head = source / ".git"
    if head.exists():
        current = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        if current == args.tck_ref:
            return source
        subprocess.run(["rm", "-rf", str(source)], check=True)
    log(f"cloning the TCK: {args.tck_repo} at {args.tck_ref}")
    source.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "--quiet", args.tck_repo, str(source)], check=True)
    subprocess.run(["git", "-C", str(source), "checkout", "--quiet", args.tck_ref], check=True)
    return source


def tck_python(source: Path) -> Path:
    """The TCK's own virtualenv (its dependencies differ from the project's), made once."""
    venv = source / ".venv"
    python = venv / "bin" / "python"
    stamp = venv / ".openagent.stamp"
    want = (source / "pyproject.toml").read_text()
    if python.exists() and stamp.exists() and stamp.read_text() == want:
        return python
    log("installing the TCK into its own virtualenv (pip install -e, first run takes a minute)")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-e", str(source)],
        check=True,
    )
    stamp.write_text(want)
    return python


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_master(port: int, llm_url: str, redis_url: str, workdir: Path) -> subprocess.Popen[bytes]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OPENAGENT_", "OPENAI_")) and key != "REDIS_URL"
    }
    env |= {"REDIS_URL": redis_url, "OPENAI_BASE_URL": llm_url, "OPENAI_API_KEY": "scripted-llm"}
    log_file = (workdir / "master.log").open("wb")
    command = [sys.executable, "-m", "master", "--host", "127.0.0.1", "--port", str(port)]
    return subprocess.Popen(command, env=env, cwd=workdir, stdout=log_file, stderr=subprocess.STDOUT)


def wait_healthy(master: subprocess.Popen[bytes], url: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if master.poll() is not None:
            raise SystemExit(f"the master exited during startup (status {master.returncode})")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"the master did not answer GET {url}/health within {START_TIMEOUT_SECONDS} s")


def expected_failures() -> dict[str, str]:
    """``test id -> reason`` from the list: ``test id  # reason`` a line, ``#`` lines are comments."""
    listed: dict[str, str] = {}
    for line in EXPECTED.read_text().splitlines():
        test, _, reason = line.partition("#")
        if test.strip():
            listed[test.strip()] = reason.strip()
    return listed


def results(junit: Path) -> dict[str, str]:
    """``test id -> outcome`` (passed, failed, skipped) from the TCK's JUnit report."""
    outcomes: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        test = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            outcomes[test] = "failed"
        elif case.find("skipped") is not None:
            outcomes[test] = "skipped"
        else:
            outcomes[test] = "passed"
    return outcomes


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tck-dir", default=os.environ.get("A2A_TCK_DIR"), help="an a2a-tck checkout to use")
    parser.add_argument("--tck-repo", default=os.environ.get("A2A_TCK_REPO", TCK_REPO))
    parser.add_argument("--tck-ref", default=TCK_REF)
    parser.add_argument("--port", type=int, default=0, help="the master's port (0: a free one)")
    parser.add_argument(
        "--redis-url", default=os.environ.get("OPENAGENT_TCK_REDIS_URL", "redis://127.0.0.1:6379/14")
    )
    parser.add_argument("pytest_args", nargs="*", help="passed on to the TCK's pytest (after --)")
    args = parser.parse_args()

    source = tck_source(args)
    python = tck_python(source)
    port = args.port or free_port()
    url = f"http://127.0.0.1:{port}"
    with ScriptedOpenAIServer() as llm, tempfile.TemporaryDirectory(prefix="a2a-tck-") as tmp:
        llm.set_handler(echo_handler)
        master = start_master(port, llm.base_url, args.redis_url, Path(tmp))
        try:
            wait_healthy(master, url)
            log(f"master at {url}; running the TCK's MUST level (JSON-RPC, HTTP+JSON)")
            command = [str(python), "run_tck.py", "--sut-host", url, "--level", "must"]
            command += ["--transport", "jsonrpc,http_json", "--", "-p", "no:cacheprovider", *args.pytest_args]
            subprocess.run(command, cwd=source, timeout=TCK_TIMEOUT_SECONDS, check=False)
        finally:
            master.terminate()
            try:
                master.wait(timeout=30)
            except subprocess.TimeoutExpired:
                master.kill()
                master.wait()

    outcomes = results(source / "reports" / "junitreport.xml")
    listed = expected_failures()
    failed = sorted(test for test, outcome in outcomes.items() if outcome == "failed")
    counts = {
        outcome: sum(1 for o in outcomes.values() if o == outcome)
        for outcome in ("passed", "failed", "skipped")
    }
    unexpected = [test for test in failed if test not in listed]
    fixed = sorted(test for test in listed if outcomes.get(test) == "passed")
    log(
        f"{len(outcomes)} tests: {counts['passed']} passed, {counts['failed']} failed "
        f"({len(failed) - len(unexpected)} expected), {counts['skipped']} skipped"
    )
    for test in fixed:
        log(f"listed as expected to fail but passed (remove it from {EXPECTED.name}): {test}")
    for test in unexpected:
        log(f"UNEXPECTED failure: {test}")
    log(f"reports: {source / 'reports'}")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
