"""openagent/pool_runner/app.py and supervisor.py in process: the HTTP contract and the supervision.

The agents are real subprocesses; the HTTP layer runs in this event loop (httpx ASGI transport).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from openagent.pool_runner import PoolRunnerConfig, Supervisor, create_app
from tests.factories import CRASHING_AGENT_SOURCE

TOKEN = "runner-token"
SLEEPER = "import os, time\nprint('env', sorted(os.environ), flush=True)\ntime.sleep(600)\n"
KEY_PRINTER = (
    "import os, time\nprint('key', os.environ.get('OPENAGENT_API_KEY'), flush=True)\ntime.sleep(600)\n"
)


@pytest.fixture
async def runner(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Supervisor]]:
    config = PoolRunnerConfig(
        token=TOKEN,
        workdir=tmp_path / "pool",
        max_agents=2,
        agent_uid=-1,
        backoff_initial=0.05,
        backoff_max=0.2,
    )
    supervisor = Supervisor(config)
    transport = httpx.ASGITransport(app=create_app(config, supervisor))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://runner", headers=headers) as http:
        try:
            yield http, supervisor
        finally:
            await supervisor.aclose()


async def wait_for(http: httpx.AsyncClient, agent_id: str, check: Any, timeout: float = 30) -> dict[str, Any]:
    async with asyncio.timeout(timeout):
        while True:
            row: dict[str, Any] = (
                await http.get(f"/agents/{agent_id}/logs", params={"tail_lines": 50})
            ).json()
            if check(row):
                return row
            await asyncio.sleep(0.05)


async def test_every_route_but_health_needs_the_token(runner: tuple[httpx.AsyncClient, Supervisor]) -> None:
    http, _ = runner
    anonymous = {"Authorization": "Bearer wrong"}
    assert (await http.get("/health", headers=anonymous)).status_code == 200
    for method, path in [
        ("GET", "/agents"),
        ("POST", "/agents"),
        ("GET", "/agents/a/logs"),
        ("DELETE", "/agents/a"),
    ]:
        response = await http.request(method, path, headers=anonymous)
        assert response.status_code == 401, (method, path)
        assert "POOL_RUNNER_TOKEN" in response.json()["detail"]


async def test_agent_gets_a_minimal_environment_without_the_token(
    runner: tuple[httpx.AsyncClient, Supervisor],
) -> None:
    http, _ = runner
    os.environ["POOL_RUNNER_SECRET_PROBE"] = "x"  # a runner variable that must not leak
    try:
        started = await http.post(
            "/agents",
            json={
                "agent_id": "env-agent",
                "source": SLEEPER,
                "env": {"EXTRA": "1"},
                "master_ws": "ws://m/ws",
                "api_key": "its-own-key",
            },
        )
        assert started.status_code == 201, started.text
        row = await wait_for(http, "env-agent", lambda r: any(line.startswith("env ") for line in r["lines"]))
    finally:
        del os.environ["POOL_RUNNER_SECRET_PROBE"]
    names = next(line for line in row["lines"] if line.startswith("env "))
    for expected in ("MASTER_WS", "OPENAGENT_API_KEY", "OPENAGENT_AGENT_ID", "EXTRA", "HOME"):
        assert f"'{expected}'" in names
    assert "POOL_RUNNER" not in names
    assert row["status"] == "running" and row["healthy"] and row["pid"]


async def test_crashing_agent_is_restarted_with_backoff_and_reported_as_a_crash_loop(
    runner: tuple[httpx.AsyncClient, Supervisor],
) -> None:
    http, _ = runner
    assert (
        await http.post("/agents", json={"agent_id": "crasher", "source": CRASHING_AGENT_SOURCE})
    ).status_code == 201
    row = await wait_for(http, "crasher", lambda r: r["crash_loop"] and r["restarts"] >= 3)
    assert not row["healthy"]
    assert row["last_exit_code"] == 3
    assert "boom: DATABASE_URL is not set" in row["lines"]
    assert any("exited with code 3" in line and "crash loop" in line for line in row["lines"])
    listed = (await http.get("/agents")).json()["agents"]
    assert [(a["agent_id"], a["crash_loop"]) for a in listed] == [("crasher", True)]


async def test_start_replaces_stop_removes_and_errors_name_the_value(
    runner: tuple[httpx.AsyncClient, Supervisor],
) -> None:
    http, supervisor = runner
    first = (await http.post("/agents", json={"agent_id": "a", "source": SLEEPER})).json()
    await wait_for(http, "a", lambda r: r["pid"] is not None)
    old_pid = supervisor.get("a").pid
    assert old_pid is not None
    second = await http.post("/agents", json={"agent_id": "a", "source": SLEEPER})
    assert second.status_code == 201 and second.json()["replaced"] and not first["replaced"]
    with pytest.raises(ProcessLookupError):  # the old process (group) is gone
        os.kill(old_pid, 0)

    await http.post("/agents", json={"agent_id": "b", "module": "json.tool"})
    full = await http.post("/agents", json={"agent_id": "c", "source": SLEEPER})
    assert full.status_code == 409 and "POOL_RUNNER_MAX_AGENTS" in full.json()["detail"]

    bad = await http.post("/agents", json={"agent_id": "d", "module": "not a module"})
    assert bad.status_code == 400 and "'not a module' is not a dotted module name" in bad.json()["detail"]
    both = await http.post("/agents", json={"agent_id": "d", "module": "m", "source": "x"})
    assert both.status_code == 400 and "exactly one of 'module' and 'source'" in both.json()["detail"]

    directory = supervisor.get("a").directory
    stopped = await http.delete("/agents/a")
    assert stopped.status_code == 200 and stopped.json()["status"] == "stopped"
    assert not directory.exists()
    missing = await http.get("/agents/a/logs")
    assert missing.status_code == 404 and "'a' is not running in this pool runner" in missing.json()["detail"]


async def test_each_agent_gets_the_key_of_its_start_request_and_no_other(
    runner: tuple[httpx.AsyncClient, Supervisor],
) -> None:
    """The master makes each pool agent a key of its own and sends it with the start: that agent
    alone gets it, never the runner's token, and no answer shows it back."""
    http, _ = runner
    for agent_id, key in (("key-a", "own-key-a"), ("key-b", "own-key-b")):
        started = await http.post(
            "/agents", json={"agent_id": agent_id, "source": KEY_PRINTER, "api_key": key}
        )
        assert started.status_code == 201, started.text
        assert key not in started.text
    for agent_id, key in (("key-a", "own-key-a"), ("key-b", "own-key-b")):
        row = await wait_for(http, agent_id, lambda r: any(line.startswith("key ") for line in r["lines"]))
        assert f"key {key}" in row["lines"], row["lines"]
        assert TOKEN not in "\n".join(row["lines"])
    listed = await http.get("/agents")
    assert "own-key" not in listed.text
    refused = await http.post("/agents", json={"agent_id": "bad", "source": "x", "api_key": 7})
    assert refused.status_code == 400 and "'api_key' must be a string" in refused.text
