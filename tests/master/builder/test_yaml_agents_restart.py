"""Agents the master started from YAML ("in master") come back when the master restarts, as
every other agent reconnects; agents stopped by hand do not."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import httpx

from tests.factories import agent_rows, agents_root, free_port, in_process_master

WAIT = 120.0
MODULE = """
from openagent import ToolSchema

TOOLS = [ToolSchema(name="ping", description="Answer pong", parameters={"type": "object", "properties": {}})]

async def handle_tool(tool_name, arguments):
    return {"pong": True}
"""
WORKSPACE = "version: 2\nagents:\n  - agent_id: yaml-pinger\n    handler: agents.pinger\n"


async def _connected(base_url: str, agent_id: str) -> None:
    async with asyncio.timeout(WAIT):
        while agent_id not in {row["agent_id"] for row in await agent_rows(base_url)}:
            await asyncio.sleep(0.05)


async def test_yaml_agents_come_back_after_a_master_restart_and_stay_stopped_when_stopped(
    tmp_path: Path,
) -> None:
    root = agents_root(tmp_path)
    (root / "agents" / "pinger.py").write_text(textwrap.dedent(MODULE))
    settings = {
        "openagent_agents_root": str(root),
        "openagent_allow_unisolated_agents": True,
        "openagent_yaml_agents_restart": True,  # off for the other tests (tests/conftest.py)
    }
    port = free_port()

    async with in_process_master(port=port, **settings) as first:
        async with httpx.AsyncClient(base_url=first.base_url, timeout=WAIT) as http:
            started = await http.post("/internal/yaml-agents/start", json={"yaml": WORKSPACE})
            assert started.json()["agents"][0]["status"] == "started", started.text
        await _connected(first.base_url, "yaml-pinger")

    async with in_process_master(port=port, **settings) as second:  # the restart
        await _connected(second.base_url, "yaml-pinger")
        async with httpx.AsyncClient(base_url=second.base_url, timeout=WAIT) as http:
            running = (await http.get("/internal/yaml-agents")).json()
            assert running == {"agents": [{"agent_id": "yaml-pinger", "handler": "agents.pinger"}]}
            stopped = await http.post("/internal/yaml-agents/stop", json={"agent_ids": ["yaml-pinger"]})
            assert stopped.json()["agents"][0]["status"] == "stopped", stopped.text
        records = second.services.builder.workspaces.records
        assert records is not None and await records.load() == []  # not started by the next start


def test_a_master_keeps_its_own_list_and_a_cluster_master_without_an_id_none() -> None:
    from types import SimpleNamespace

    from master.builder.service import _records
    from tests.factories import master_settings

    agents: Any = SimpleNamespace(invocation=SimpleNamespace(redis=object()))
    on = {"openagent_yaml_agents_restart": True}
    alone = _records(master_settings(**on), agents)
    named = _records(master_settings(openagent_cluster=True, openagent_master_id="m-1", **on), agents)
    assert alone is not None and alone.key == "yaml_agents:local"
    assert named is not None and named.key == "yaml_agents:m-1"
    assert _records(master_settings(openagent_cluster=True, **on), agents) is None
    assert _records(master_settings(openagent_yaml_agents_restart=False), agents) is None
