"""Two real masters on one Redis, an SDK agent given both URLs: SIGTERM and kill -9 of its master.

Each master serves the agents connected to it (there is no cross-master routing yet, see
docs/scale-out.md); what these drills show is that an agent leaves a stopping master at once
(on SIGTERM it drains, then closes its WebSockets with 1012: tests/test_drain.py) or a dead one after the drop, registers on
the other master, and answers queries there.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import httpx
import pytest

from openagent import OrchestratorActionAgent
from openagent.config import ClientConfig
from openagent.testing import ScriptedOpenAIServer
from tests.conftest import master_env
from tests.factories import MasterProcess, agent_rows

ECHO = {"name": "echo", "description": "Echo", "parameters": {"type": "object"}}


async def echo(tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"echo": arguments}


async def wait_listed(base_url: str, agent_id: str) -> None:
    async with asyncio.timeout(30):
        while not any(row["agent_id"] == agent_id for row in await agent_rows(base_url)):
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("stop", ["sigterm", "kill"])
async def test_agent_moves_to_the_other_master(llm: ScriptedOpenAIServer, stop: str) -> None:
    agent_id = f"failover-{stop}"
    with MasterProcess(master_env(llm)) as first, MasterProcess(master_env(llm)) as second:
        config = ClientConfig(
            master_ws=f"{first.ws_url},{second.ws_url}",
            api_key="",
            reconnect_initial_delay=0.05,
            reconnect_max_delay=0.5,
            keepalive_interval=0,
        )
        async with OrchestratorActionAgent(agent_id, [ECHO], echo, config=config):
            await wait_listed(first.base_url, agent_id)
            assert first.process is not None
            if stop == "sigterm":
                first.stop()
            else:
                os.kill(first.process.pid, signal.SIGKILL)
                first.process.wait(timeout=10)
            await wait_listed(second.base_url, agent_id)

            llm.add_tool_call(f"{agent_id}__echo", {"n": 1})
            llm.add_text("moved")
            async with httpx.AsyncClient(base_url=second.base_url, timeout=30) as http:
                body = (
                    await http.post("/query", json={"query": "go", "allowed_agent_ids": [agent_id]})
                ).json()
            assert body["success"] is True and body["agents_used"] == [
                {"agent_id": agent_id, "tool_name": "echo"}
            ]
