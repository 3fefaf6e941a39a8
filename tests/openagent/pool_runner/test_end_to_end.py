"""The pool runner as a real local process, running real agents against a real master.

Agents get their code as source text, register over WebSocket with the master's API key, and
answer a query through the scripted LLM. A killed agent is restarted and registers again; an
agent that keeps crashing is reported as a crash loop with its log tail.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from openagent.testing import ScriptedOpenAIServer
from tests.conftest import master_env
from tests.factories import (
    CRASHING_AGENT_SOURCE,
    ECHO_AGENT_SOURCE,
    MasterProcess,
    PoolRunnerProcess,
    agent_rows,
)

API_KEY = "master-key"
HEADERS = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture
async def master_with_key(llm: ScriptedOpenAIServer) -> AsyncIterator[MasterProcess]:
    async with MasterProcess(master_env(llm, OPENAGENT_API_KEY=API_KEY)) as master:
        yield master


@pytest.fixture
async def runner(master_with_key: MasterProcess, tmp_path: Path) -> AsyncIterator[PoolRunnerProcess]:
    # No OPENAGENT_API_KEY for the runner: each agent brings a key of its own.
    env = {"MASTER_WS": master_with_key.ws_url}
    async with PoolRunnerProcess(tmp_path / "pool", env) as process:
        yield process


async def registered(master: MasterProcess, agent_id: str, timeout: float = 30) -> None:
    async with asyncio.timeout(timeout):
        while agent_id not in {row["agent_id"] for row in await agent_rows(master.base_url, HEADERS)}:
            await asyncio.sleep(0.05)


async def agent_status(http: httpx.AsyncClient, agent_id: str) -> dict[str, Any]:
    response = await http.get(f"/agents/{agent_id}/logs", params={"tail_lines": 40})
    response.raise_for_status()
    row: dict[str, Any] = response.json()
    return row


async def agent_key(master: MasterProcess, agent_id: str) -> str:
    """A key of role ``agent`` for ``agent_id`` alone, as the master's sandbox makes one."""
    async with httpx.AsyncClient(base_url=master.base_url, headers=HEADERS, timeout=10) as http:
        made = await http.post("/keys", json={"name": agent_id, "role": "agent", "agent_ids": [agent_id]})
    assert made.status_code == 201, made.text
    secret: str = made.json()["secret"]
    return secret


async def test_pool_agents_register_answer_a_query_and_come_back_after_a_kill(
    master_with_key: MasterProcess, runner: PoolRunnerProcess, llm: ScriptedOpenAIServer
) -> None:
    async with httpx.AsyncClient(base_url=runner.base_url, headers=runner.headers, timeout=10) as pool:
        for agent_id in ("pool-echo-1", "pool-echo-2"):
            key = await agent_key(master_with_key, agent_id)
            started = await pool.post(
                "/agents", json={"agent_id": agent_id, "source": ECHO_AGENT_SOURCE, "api_key": key}
            )
            assert started.status_code == 201, started.text
            assert key not in started.text  # never shown back
        await registered(master_with_key, "pool-echo-1")
        await registered(master_with_key, "pool-echo-2")

        llm.add_tool_call("pool-echo-2__echo", {"text": "hello from the pool"})
        llm.add_text("The pool agent said hello.")
        async with httpx.AsyncClient(
            base_url=master_with_key.base_url, headers=HEADERS, timeout=30
        ) as master:
            answer = (await master.post("/query", json={"query": "Say hello through the pool"})).json()
        assert answer["success"], answer
        assert answer["agents_used"] == [{"agent_id": "pool-echo-2", "tool_name": "echo"}]
        result = json.loads(llm.requests[1]["messages"][-1]["content"])["result"]
        before = await agent_status(pool, "pool-echo-2")
        assert result == {"echo": "hello from the pool", "pid": before["pid"]}  # its own process

        os.kill(before["pid"], signal.SIGKILL)
        async with asyncio.timeout(30):
            while (row := await agent_status(pool, "pool-echo-2"))["restarts"] < 1 or row["pid"] is None:
                await asyncio.sleep(0.05)
        assert row["pid"] != before["pid"] and row["last_exit_code"] == -signal.SIGKILL
        assert not row["crash_loop"]
        await registered(master_with_key, "pool-echo-2")
        assert (await agent_status(pool, "pool-echo-1"))["restarts"] == 0  # the others are untouched


async def test_crash_loop_is_reported_with_the_log_tail(runner: PoolRunnerProcess) -> None:
    async with httpx.AsyncClient(base_url=runner.base_url, headers=runner.headers, timeout=10) as pool:
        assert (
            await pool.post("/agents", json={"agent_id": "crasher", "source": CRASHING_AGENT_SOURCE})
        ).status_code == 201
        async with asyncio.timeout(30):
            while not (row := await agent_status(pool, "crasher"))["crash_loop"]:
                await asyncio.sleep(0.05)
        assert row["restarts"] >= 2 and row["last_exit_code"] == 3 and not row["healthy"]
        assert "boom: DATABASE_URL is not set" in row["lines"]
        assert (await pool.delete("/agents/crasher")).json()["status"] == "stopped"
    assert "[crasher] boom: DATABASE_URL is not set" in runner.log()  # kubectl logs shows agent output
