"""start.sh, the Minikube quick path, run against fake minikube, kubectl and docker.

The script is copied with what it reads (scripts/_common.sh, deploy/, .env.example) into a
temporary tree, so a run never touches the repository's .env. The fakes record their
arguments; kubectl's fake also records what it reads on standard input and the content of
every ``--from-file`` source.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
START_SH = ROOT / "start.sh"
K8S_FILES = sorted(path.name for path in (ROOT / "deploy" / "k8s").glob("*.yaml"))

# Tools start.sh and the part of scripts/_common.sh it uses run, besides the fakes.
SYSTEM_TOOLS = ("bash", "dirname", "basename", "cat", "head", "od", "tr", "sed")

FAKE_MINIKUBE = """#!{bash}
echo "minikube $*" >>"$FAKE_LOG"
case "$*" in
  *"status --format"*) echo "$FAKE_MINIKUBE_HOST"; [[ $FAKE_MINIKUBE_HOST == Running ]] || exit 7 ;;
  *docker-env*) echo 'export DOCKER_HOST="tcp://192.0.2.1:2376"' ;;
esac
"""

FAKE_DOCKER = """#!{bash}
echo "docker DOCKER_HOST=$DOCKER_HOST $*" >>"$FAKE_LOG"
"""

FAKE_KUBECTL = """#!{bash}
echo "kubectl $*" >>"$FAKE_LOG"
case "$*" in
  *"get deployment"*) [[ -n ${{FAKE_EXISTING:-}} ]] || exit 1 ;;
  *"create secret"*)
    for arg in "$@"; do
      if [[ $arg == --from-file=* ]]; then
        spec=${{arg#--from-file=}}
        printf '%s=%s\\n' "${{spec%%=*}}" "$(<"${{spec#*=}}")"
      fi
    done ;;
  *"apply -f -"*) while IFS= read -r line; do echo "stdin: $line" >>"$FAKE_LOG"; done ;;
esac
"""


@dataclass
class Run:
    returncode: int
    output: str
    calls: list[str]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of what start.sh reads, with fake tools on a PATH of their own."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy2(START_SH, repo / "start.sh")
    shutil.copy2(ROOT / "scripts" / "_common.sh", repo / "scripts" / "_common.sh")
    shutil.copy2(ROOT / ".env.example", repo / ".env.example")
    shutil.copytree(ROOT / "deploy", repo / "deploy")

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in SYSTEM_TOOLS:
        found = shutil.which(tool)
        assert found, f"{tool} is needed by start.sh"
        (bin_dir / tool).symlink_to(found)
    bash = shutil.which("bash")
    for name, body in [("minikube", FAKE_MINIKUBE), ("kubectl", FAKE_KUBECTL), ("docker", FAKE_DOCKER)]:
        fake = bin_dir / name
        fake.write_text(body.format(bash=bash))
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return repo


def run_start(repo: Path, *, host: str = "Running", existing: bool = False, drop: str = "") -> Run:
    bin_dir = repo.parent / "bin"
    if drop:
        (bin_dir / drop).unlink()
    log = repo.parent / "calls.log"
    log.write_text("")
    env = {
        "PATH": str(bin_dir),
        "HOME": str(repo.parent),
        "FAKE_LOG": str(log),
        "FAKE_MINIKUBE_HOST": host,
        **({"FAKE_EXISTING": "1"} if existing else {}),
    }
    result = subprocess.run(
        [str(bin_dir / "bash"), str(repo / "start.sh")],
        cwd=repo.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    return Run(result.returncode, result.stdout + result.stderr, log.read_text().splitlines())


def _index(calls: list[str], pattern: str) -> int:
    matches = [n for n, call in enumerate(calls) if re.search(pattern, call)]
    assert matches, f"no call matches {pattern!r}:\n" + "\n".join(calls)
    return matches[0]


def test_start_sh_is_valid_bash_and_executable() -> None:
    subprocess.run(["bash", "-n", str(START_SH)], check=True, timeout=30)
    assert os.access(START_SH, os.X_OK)


def test_start_sh_is_shellcheck_clean() -> None:
    shellcheck = Path(sysconfig.get_path("scripts")) / "shellcheck"
    assert shellcheck.is_file(), "shellcheck is missing from the virtualenv; it comes with the dev extra"
    result = subprocess.run(
        [str(shellcheck), "-x", "start.sh"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_builds_in_minikube_then_deploys_in_order(tree: Path) -> None:
    (tree / ".env").write_text("OPENAI_API_KEY=sk-from-dotenv\nOPENAGENT_API_KEY=key-from-dotenv\n")
    run = run_start(tree)
    assert run.returncode == 0, run.output
    calls = run.calls

    # Images are built inside Minikube's Docker daemon, from the repository root.
    builds = [call for call in calls if call.startswith("docker ")]
    assert builds == [
        "docker DOCKER_HOST=tcp://192.0.2.1:2376 build -f deploy/docker/master.Dockerfile -t openagent/master:latest .",
        "docker DOCKER_HOST=tcp://192.0.2.1:2376 build -f deploy/docker/agent-runtime.Dockerfile"
        " -t openagent/agent-runtime:latest .",
        "docker DOCKER_HOST=tcp://192.0.2.1:2376 build -f deploy/docker/agent-pool-runner.Dockerfile"
        " -t openagent/agent-pool-runner:latest .",
    ]
    # Only the Minikube context is ever used.
    assert all("--context minikube " in call for call in calls if call.startswith("kubectl "))

    # The Secret comes from .env, through files, not the command line.
    secret = _index(calls, r"create secret generic openagent-secrets")
    assert "sk-from-dotenv" not in calls[secret] and "key-from-dotenv" not in calls[secret]
    assert "stdin: OPENAI_API_KEY=sk-from-dotenv" in calls
    assert "stdin: OPENAGENT_API_KEY=key-from-dotenv" in calls

    # Every manifest is applied; each Deployment is waited for, the agent after the master.
    applied = {
        name for call in calls if " apply " in call for name in re.findall(r"deploy/k8s/(\S+\.yaml)", call)
    }
    assert applied == set(K8S_FILES)
    order = [
        _index(calls, r"apply -f deploy/k8s/namespace\.yaml"),
        secret,
        _index(calls, r"apply .*deploy/k8s/network-policy\.yaml.*deploy/k8s/redis\.yaml"),
        _index(calls, r"rollout status deployment/redis --timeout 180s"),
        _index(calls, r"apply -f deploy/k8s/master\.yaml"),
        _index(calls, r"rollout status deployment/openagent-master"),
        _index(calls, r"apply -f deploy/k8s/weather-agent\.yaml"),
        _index(calls, r"rollout status deployment/weather-agent"),
        _index(calls, r"apply -f deploy/k8s/agent-pool\.yaml"),
        _index(calls, r"rollout status deployment/agent-pool"),
    ]
    assert order == sorted(order)
    assert max(n for n, call in enumerate(calls) if call.startswith("docker ")) < order[0]
    assert not any("rollout restart" in call for call in calls)  # first deploy: nothing to restart

    assert "kubectl --context minikube -n agents port-forward svc/openagent-master 8000:8000" in run.output
    assert "OPENAGENT_K8S_MASTER_WS" in run.output
    assert "ws://host.minikube.internal:8000/ws" in run.output


def test_rerun_restarts_the_rebuilt_deployments(tree: Path) -> None:
    (tree / ".env").write_text("OPENAI_API_KEY=\nOPENAGENT_API_KEY=k\n")
    run = run_start(tree, existing=True)
    assert run.returncode == 0, run.output
    restarts = [call for call in run.calls if "rollout restart" in call]
    assert [call.split()[-1] for call in restarts] == [
        "deployment/openagent-master",
        "deployment/weather-agent",
        "deployment/agent-pool",
    ]
    assert "OPENAI_API_KEY is empty" in run.output


def test_creates_env_with_a_fresh_api_key(tree: Path) -> None:
    run = run_start(tree)
    assert run.returncode == 0, run.output
    key = re.search(r"^OPENAGENT_API_KEY=(.*)$", (tree / ".env").read_text(), re.MULTILINE)
    assert key is not None and re.fullmatch(r"[0-9a-f]{64}", key.group(1))
    assert f"stdin: OPENAGENT_API_KEY={key.group(1)}" in run.calls
    assert stat.S_IMODE((tree / ".env").stat().st_mode) == 0o600


def test_refuses_when_minikube_is_not_running(tree: Path) -> None:
    run = run_start(tree, host="Stopped")
    assert run.returncode != 0
    assert "minikube profile 'minikube' is not running (host: Stopped)" in run.output
    assert "minikube start" in run.output
    assert not any(call.startswith(("docker ", "kubectl ")) for call in run.calls)


@pytest.mark.parametrize("tool", ["minikube", "kubectl", "docker"])
def test_refuses_when_a_tool_is_missing(tree: Path, tool: str) -> None:
    run = run_start(tree, drop=tool)
    assert run.returncode != 0
    assert f"'{tool}' not found on PATH" in run.output
    assert not any(call.startswith(("docker ", "kubectl ")) for call in run.calls)


def test_generates_the_cluster_redis_password_once_and_puts_it_into_the_secret(tree: Path) -> None:
    (tree / ".env").write_text("OPENAI_API_KEY=\nOPENAGENT_API_KEY=k")  # no final newline
    run = run_start(tree)
    assert run.returncode == 0, run.output
    text = (tree / ".env").read_text()
    password = re.search(r"^K8S_REDIS_PASSWORD=(.*)$", text, re.MULTILINE)
    assert password is not None and re.fullmatch(r"[0-9a-f]{64}", password.group(1))
    assert "OPENAGENT_API_KEY=k\n" in text  # the last line was not joined with the new one
    assert f"stdin: REDIS_PASSWORD={password.group(1)}" in run.calls
    assert password.group(1) not in "\n".join(c for c in run.calls if not c.startswith("stdin: "))
    # A rerun keeps it: the running Redis was started with it.
    again = run_start(tree, existing=True)
    assert again.returncode == 0, again.output
    assert (tree / ".env").read_text() == text
    assert f"stdin: REDIS_PASSWORD={password.group(1)}" in again.calls
