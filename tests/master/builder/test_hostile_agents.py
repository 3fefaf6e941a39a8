"""Hostile agent modules started through a YAML workspace hold no secret of the master (issue 38).

Seven agent processes run 35 attacks (:mod:`tests.master.builder.hostile`): aliased builtins,
attribute access through strings, ``typing.ForwardRef``, a UTF-7 coding cookie, ``pathlib``
writes into the product, sockets and a client to Redis, reads of the environment, ``.env``
and ``/proc``, ``POST /keys`` with their own credential, double forks with ``setsid``, a fork
bomb. For every module: it holds no administrator key, no LLM key, no Redis password; its
``POST /keys`` is 403; Redis refuses it; ``.env`` and ``/proc/<master>/environ`` are unreadable;
writes outside its working folder fail; its double-forked children are gone after stop; its key
is revoked; and the master answers ``/health`` within 1 s throughout.

Needs root (agents get a user of their own only from a root master) and ``redis-server`` (the
master's Redis requires a password here, as run.sh sets it up).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from openagent.pool_runner.supervisor import processes_of
from openagent.testing import ScriptedOpenAIServer
from tests.conftest import master_env
from tests.factories import ROOT, MasterProcess, free_port
from tests.master.builder.hostile import ATTACKS, module_sources

pytestmark = [
    pytest.mark.skipif(
        os.geteuid() != 0, reason="agents run as users of their own only when the master is root"
    ),
    pytest.mark.skipif(
        shutil.which("redis-server") is None, reason="needs redis-server for a Redis with a password"
    ),
]

ADMIN_KEY = "admin-bootstrap-secret-0123456789"
LLM_KEY = "sk-master-llm-secret-0123456789"
REDIS_PASSWORD = "redis-password-secret-0123456789"
SECRETS = (ADMIN_KEY, LLM_KEY, REDIS_PASSWORD)
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
ALLOWED_ENV = {
    "PATH", "PYTHONPATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR", "HOME", "TMPDIR",
    "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "MALLOC_ARENA_MAX", "MASTER_WS", "OPENAGENT_AGENT_ID",
    "OPENAGENT_API_KEY", "OPENAGENT_WORKSPACE_AGENT", "OPENAGENT_WORKSPACE_ROOT",
}  # fmt: skip


@pytest.fixture(scope="module")
def secret_redis() -> Iterator[int]:
    port = free_port()
    data = tempfile.mkdtemp(prefix="openagent-hostile-redis-")
    subprocess.run(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--requirepass", REDIS_PASSWORD,
         "--save", "", "--appendonly", "no", "--dir", data, "--daemonize", "yes"],
        check=True, timeout=30,
    )  # fmt: skip
    client = redis.Redis(port=port, password=REDIS_PASSWORD, socket_connect_timeout=2)
    try:
        for _ in range(200):
            with contextlib.suppress(redis.ConnectionError):
                if client.ping():
                    break
            client.connection_pool.disconnect()
            subprocess.run(
                ["redis-cli", "-p", str(port), "-a", REDIS_PASSWORD, "ping"], timeout=10, capture_output=True
            )
        yield port
    finally:
        with contextlib.suppress(redis.RedisError):
            client.shutdown(nosave=True)
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="module")
def places() -> Iterator[dict[str, Path]]:
    """The agents' root (as a checkout: 0755) and a run.sh-style ``.env`` (0600) with the secrets."""
    base = Path(tempfile.mkdtemp(prefix="openagent-hostile-"))
    base.chmod(0o755)
    (base / "root" / "agents").mkdir(parents=True)
    for folder in (base / "root", base / "root" / "agents"):
        folder.chmod(0o755)
    env_file = base / ".env"
    env_file.write_text(f"OPENAGENT_API_KEY={ADMIN_KEY}\nOPENAI_API_KEY={LLM_KEY}\n")
    env_file.chmod(0o600)
    try:
        yield {"root": base / "root", "env_file": env_file}
    finally:
        shutil.rmtree(base, ignore_errors=True)
        for leftover in ("owned_by_agent.py", "evil.py"):
            (ROOT / "agents" / leftover).unlink(missing_ok=True)


@pytest.fixture(scope="module")
def hostile_master(
    scripted_llm: ScriptedOpenAIServer, secret_redis: int, places: dict[str, Path]
) -> Iterator[MasterProcess]:
    env = master_env(
        scripted_llm,
        OPENAGENT_AGENTS_ROOT=str(places["root"]),
        OPENAGENT_API_KEY=ADMIN_KEY,
        OPENAI_API_KEY=LLM_KEY,
        REDIS_URL=f"redis://:{REDIS_PASSWORD}@127.0.0.1:{secret_redis}/0",
    )
    with MasterProcess(env) as process:
        yield process


async def _watch_health(base_url: str, failures: list[str], done: asyncio.Event) -> None:
    """``GET /health`` over and over, each with a 1 s timeout, until ``done``."""
    async with httpx.AsyncClient(base_url=base_url, timeout=1.0) as http:
        while not done.is_set():
            try:
                answer = await http.get("/health")
                if answer.status_code != 200:
                    failures.append(f"/health answered {answer.status_code}")
            except httpx.HTTPError as exc:
                failures.append(f"/health did not answer within 1 s: {exc!r}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), 0.1)


@pytest.fixture(scope="module")
def run(
    hostile_master: MasterProcess, scripted_llm: ScriptedOpenAIServer, places: dict[str, Path]
) -> dict[str, Any]:
    """Start every hostile module, probe each, stop them all; what was seen, for the tests below."""
    try:
        return asyncio.run(_run(hostile_master, scripted_llm, places))
    finally:
        scripted_llm.reset()


async def _run(
    hostile_master: MasterProcess, scripted_llm: ScriptedOpenAIServer, places: dict[str, Path]
) -> dict[str, Any]:
    assert hostile_master.process is not None
    sources = module_sources(
        master=hostile_master.base_url,
        master_pid=hostile_master.process.pid,
        env_file=str(places["env_file"]),
        product=str(ROOT),
        agents_root=str(places["root"]),
        redis_port=int(urlport(hostile_master.env["REDIS_URL"])),
    )
    for name, source in sources.items():
        (places["root"] / "agents" / f"hostile_{name}.py").write_bytes(source)
    agent_ids = {name: f"hostile-{name}" for name in sources}
    yaml = "version: 1\nagents:\n" + "".join(
        f"  - agent_id: {agent_id}\n    handler: agents.hostile_{name}\n"
        for name, agent_id in agent_ids.items()
    )
    failures: list[str] = []
    done = asyncio.Event()
    watcher = asyncio.create_task(_watch_health(hostile_master.base_url, failures, done))
    seen: dict[str, Any] = {"health": failures, "reports": {}, "after": {}}
    scripted_llm.reset()
    try:
        async with httpx.AsyncClient(base_url=hostile_master.base_url, headers=ADMIN, timeout=300) as http:
            started = await http.post("/internal/yaml-agents/start", json={"yaml": yaml})
            assert started.status_code == 200, started.text
            seen["started"] = {row["agent_id"]: row for row in started.json()["agents"]}
            for name, agent_id in agent_ids.items():
                if seen["started"][agent_id]["status"] != "started":
                    continue
                before = len(scripted_llm.requests)
                scripted_llm.add_tool_call(f"{agent_id}__probe", {})
                scripted_llm.add_text("Probed.")
                asked = await http.post("/query", json={"query": "Probe", "allowed_agent_ids": [agent_id]})
                assert asked.status_code == 200, asked.text
                tools = [m for m in scripted_llm.requests[before + 1]["messages"] if m["role"] == "tool"]
                seen["reports"][name] = json.loads(tools[-1]["content"])
            stopped = await http.post(
                "/internal/yaml-agents/stop", json={"agent_ids": list(agent_ids.values())}
            )
            seen["stopped"] = {row["agent_id"]: row["status"] for row in stopped.json()["agents"]}
            for name, report in seen["reports"].items():
                result = report.get("result", {})
                common = result.get("common", {})
                key = common.get("key", "")
                whoami = await http.get("/whoami", headers={"Authorization": f"Bearer {key}"})
                seen["after"][name] = {
                    "whoami": whoami.status_code,
                    "left": processes_of(common["uid"]) if "uid" in common else None,
                }
        return seen
    finally:
        done.set()
        await watcher


def urlport(url: str) -> int:
    from urllib.parse import urlsplit

    port = urlsplit(url).port
    assert port is not None
    return port


NAMES = ["aliases", "strings", "files", "process", "network", "limits", "cookie"]


@pytest.mark.parametrize("name", NAMES)
def test_a_hostile_module_holds_and_reaches_no_secret(run: dict[str, Any], name: str) -> None:
    agent_id = f"hostile-{name}"
    assert run["started"][agent_id]["status"] == "started", run["started"][agent_id]
    report = run["reports"][name]
    text = json.dumps(report)
    for secret in SECRETS:
        assert secret not in text, f"{name} got a secret of the master: {text[:2000]}"
    result = report["result"]
    common = result["common"]
    assert common["uid"] >= 200000  # a user of its own: not root, not the master's
    assert set(common["env"]) <= ALLOWED_ENV, set(common["env"]) - ALLOWED_ENV
    assert common["key"].startswith("oak_")  # its own stored key, never the bootstrap key
    assert common["keys_admin"] == 403
    assert not common["redis"]["ok"] or "NOAUTH" in common["redis"]["value"], common["redis"]
    assert not common["dotenv"]["ok"] and "PermissionError" in common["dotenv"]["error"]
    assert not common["master_environ"]["ok"] and "PermissionError" in common["master_environ"]["error"]
    assert not common["write_product"]["ok"], common["write_product"]
    assert not common["write_agents_root"]["ok"], common["write_agents_root"]
    assert common["write_home"]["ok"], common["write_home"]  # its own working folder is writable
    assert run["stopped"][agent_id] == "stopped"
    assert run["after"][name]["left"] == [], "a process of the agent outlived its stop"
    assert not _alive(common["orphan"]), f"the double-forked pid {common['orphan']} outlived the stop"
    assert run["after"][name]["whoami"] == 401  # its key is revoked at stop


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_each_attack_is_denied_or_contained(run: dict[str, Any], attack: str) -> None:
    found = [
        report["result"]["attacks"][attack]
        for report in run["reports"].values()
        if attack in report["result"]["attacks"]
    ]
    assert len(found) == 1, f"attack {attack} did not run"
    outcome = found[0]
    if ATTACKS[attack] == "denied":
        assert not outcome["ok"], f"{attack} was not denied: {outcome}"
    if attack == "triple_fork_escape" and outcome["ok"]:
        assert not _alive(int(outcome["value"]))
    for secret in SECRETS:
        assert secret not in json.dumps(outcome)


def test_the_master_answered_health_within_1_s_throughout(run: dict[str, Any]) -> None:
    assert run["health"] == []
    assert len(ATTACKS) >= 30


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            state = next(line for line in status if line.startswith("State:"))
    except (OSError, StopIteration):
        return False
    return not state.split()[1].startswith(("Z", "X"))
