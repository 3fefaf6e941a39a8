"""The shell and Python snippets of the guides run as written, against a real master.

Every ```bash``` / ```python``` block of ``docs/guides/`` and ``docs/getting-started/`` runs in
its own process, from a directory laid out like a clone after ``./scripts/run.sh`` (a ``.env``
with the master's key, ``.venv``, the sample agents), against one master for the module: the
demo LLM, an API key, and the calculator agent connected. ``127.0.0.1:8000`` and
``localhost:8000`` in a snippet become that master's address; ``KEY``, ``OPENAGENT_API_KEY``,
``MASTER``, ``M`` and ``MASTER_BASE_URL`` are set as the guides assume.

A snippet that needs what this test does not have (a real model, Kubernetes, the internet, a
server that runs until stopped, one of the steps before it) says so in the page, on the line
before its fence::

    <!-- snippet: skip (needs kubernetes) -->

and is skipped with that reason. ``curl`` fails on an HTTP error status here (a missing
``Authorization`` header is a 401), and a query answering ``"success": false`` fails the snippet.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from openagent.testing import ScriptedOpenAIServer, demo_handler
from tests.factories import ROOT, MasterProcess

PAGES = sorted([*(ROOT / "docs" / "guides").glob("*.md"), *(ROOT / "docs" / "getting-started").glob("*.md")])
FENCE = re.compile(r"^```(bash|sh|shell|python)\s*$")
SKIP = re.compile(r"^<!-- snippet: skip \((?P<reason>[^)]+)\) -->$")
KEY = "snippets-master-key-0123456789"
TIMEOUT = 120.0
"""Upper bound of one snippet's run (a busy machine starts Python slowly)."""


@dataclass(frozen=True)
class Snippet:
    page: Path
    line: int
    language: str
    code: str
    skip: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT / 'docs')}:{self.line}"


def snippets(page: Path) -> Iterator[Snippet]:
    """The page's shell and Python blocks, each with the reason it is skipped, if it is."""
    lines = page.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        before = next((lines[i].strip() for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        marker = SKIP.match(before)
        yield Snippet(
            page,
            index + 1,
            fence.group(1),
            "\n".join(lines[index + 1 : end]) + "\n",
            marker.group("reason") if marker else None,
        )
        index = end + 1


ALL = [snippet for page in PAGES for snippet in snippets(page)]


@dataclass(frozen=True)
class Stage:
    master: MasterProcess
    workdir: Path
    env: dict[str, str]


@pytest.fixture(scope="module")
def stage() -> Iterator[Stage]:
    """One master (demo LLM, a key, the calculator agent) and a clone-like working directory."""
    with ScriptedOpenAIServer() as llm:
        llm.set_handler(demo_handler)
        env = {"OPENAI_BASE_URL": llm.base_url, "OPENAGENT_API_KEY": KEY, "OPENAGENT_LLM_MAX_RETRIES": "0"}
        with MasterProcess(env) as master:
            workdir = Path(tempfile.mkdtemp(prefix="openagent-snippets-"))
            for name in (
                "sample_agents",
                "system_agents",
                "agents",
                "docs",
                "openagent",
                "protocol",
                "master",
            ):
                (workdir / name).symlink_to(ROOT / name)
            (workdir / ".venv").symlink_to(Path(sys.prefix))
            (workdir / ".env").write_text(f"OPENAGENT_API_KEY={KEY}\nMASTER_PORT={master.port}\n")
            snippet_env = {
                **{k: v for k, v in os.environ.items() if not k.startswith(("MASTER_", "OPENAGENT_"))},
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                "PYTHONPATH": str(ROOT),
                "KEY": KEY,
                "OPENAGENT_API_KEY": KEY,
                "MASTER": master.base_url,
                "M": master.base_url,
                "MASTER_BASE_URL": master.base_url,
                "MASTER_WS": master.ws_url,
                "OPENAGENT_MCP_URL": f"{master.base_url}/mcp",
            }
            calculator = subprocess.Popen(
                [sys.executable, "-m", "openagent", "run", "sample_agents/calculator.py"],
                cwd=workdir,
                env=snippet_env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                master.wait_until(
                    lambda: _has_agent(master, "calculator-agent"),
                    "calculator agent",
                    "its registration",
                    TIMEOUT,
                )
                yield Stage(master, workdir, snippet_env)
            finally:
                calculator.terminate()
                calculator.wait(timeout=30)


def _has_agent(master: MasterProcess, agent_id: str) -> bool:
    try:
        rows = httpx.get(f"{master.base_url}/agents", headers={"Authorization": f"Bearer {KEY}"}, timeout=10)
    except httpx.HTTPError:
        return False
    return rows.status_code == 200 and agent_id in {row["agent_id"] for row in rows.json()["agents"]}


def _localized(code: str, master: MasterProcess) -> str:
    return re.sub(r"(127\.0\.0\.1|localhost):8000\b", f"127.0.0.1:{master.port}", code)


_BASH_PRELUDE = """set -eo pipefail
curl() { command curl --fail-with-body --max-time 60 "$@"; }
"""


@pytest.mark.parametrize("snippet", ALL, ids=lambda snippet: snippet.name)
def test_the_snippet_runs_as_written(snippet: Snippet, stage: Stage) -> None:
    if snippet.skip is not None:
        pytest.skip(snippet.skip)
    code = _localized(snippet.code, stage.master)
    command = (
        ["bash", "-c", _BASH_PRELUDE + code] if snippet.language != "python" else [sys.executable, "-c", code]
    )
    done = subprocess.run(
        command, cwd=stage.workdir, env=stage.env, capture_output=True, text=True, timeout=TIMEOUT
    )
    output = f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    assert done.returncode == 0, f"{snippet.name} exited {done.returncode}\n{output}"
    assert '"success":false' not in done.stdout.replace(" ", ""), f"{snippet.name}: a query failed\n{output}"


def test_every_guide_has_snippets_that_run() -> None:
    """The marker is for what cannot run here, not a way out: most pages keep a running snippet."""
    running = {snippet.page for snippet in ALL if snippet.skip is None}
    assert len(running) >= 6, sorted(str(page) for page in running)


def test_the_readme_shows_the_fields_of_a_live_answer(stage: Stage) -> None:
    """README's "real output" of a first query has the fields a live ``POST /query`` answers."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = json.loads(next(line for line in readme.splitlines() if line.startswith('{"query_id"')))
    live = httpx.post(
        f"{stage.master.base_url}/query",
        json={"query": "What is 12 times 7?"},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=TIMEOUT,
    ).json()
    assert list(shown) == list(live), "update README.md's first query with a live answer"
    assert live["success"] and "84" in live["answer"], live
    assert (
        shown["agents_used"]
        == live["agents_used"]
        == [{"agent_id": "calculator-agent", "tool_name": "multiply"}]
    )
