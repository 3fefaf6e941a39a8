"""``openagent.workspace.runner``: the YAML runner starts a workspace's agents from their handlers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from openagent import ClientConfig
from openagent.testing import ScriptedOpenAIServer
from openagent.workspace import YamlAgentRunner, load_workspace
from tests.factories import ROOT, MasterProcess, agent_rows
from tests.openagent.workspace.samples import EXAMPLE

GOOD = """
from openagent import ToolError, ToolSchema

TOOLS = [ToolSchema(name="convert", description="Convert km to miles",
                    parameters={"type": "object", "properties": {"km": {"type": "number"}}})]

async def handle_tool(tool_name, arguments):
    if arguments.get("km") is None:
        raise RuntimeError("handler blew up")
    return {"miles": round(arguments["km"] * 0.621371, 3)}
"""

RUNNER_YAML = """\
version: 1
agents:
  - agent_id: yaml-converter
    handler: agents.converter
  - agent_id: yaml-broken
    handler: agents.broken
  - agent_id: yaml-missing
    handler: agents.nowhere
  - agent_id: yaml-escape
    handler: agents.escape
  - agent_id: yaml-http
    transport: invocation
    invocation_base_url: http://127.0.0.1:9
    tools: [{name: ping}]
"""


@pytest.fixture
def agents_root(tmp_path: Path) -> Path:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "converter.py").write_text(GOOD)
    (folder / "broken.py").write_text("import definitely_not_a_module_xyz\n")
    outside = tmp_path / "outside.py"
    outside.write_text(GOOD)
    (folder / "escape.py").symlink_to(outside)
    return tmp_path


async def test_the_runner_starts_each_agent_on_its_own_and_is_idempotent(
    master: MasterProcess, llm: ScriptedOpenAIServer, agents_root: Path
) -> None:
    runner = YamlAgentRunner(ClientConfig(master_ws=master.ws_url, keepalive_interval=0), root=agents_root)
    workspace = load_workspace(RUNNER_YAML)
    try:
        outcomes = {o.agent_id: o for o in await runner.start(workspace)}
        assert outcomes["yaml-converter"].status == "started"
        assert outcomes["yaml-broken"].status == "failed"
        assert "ModuleNotFoundError" in outcomes["yaml-broken"].reason
        assert outcomes["yaml-missing"].status == "failed"
        assert "no module 'agents.nowhere'" in outcomes["yaml-missing"].reason
        assert outcomes["yaml-escape"].status == "failed"
        assert "symlink out of agents/" in outcomes["yaml-escape"].reason
        assert outcomes["yaml-http"].status == "skipped"

        again = {o.agent_id: o.status for o in await runner.start(workspace)}
        assert again["yaml-converter"] == "already_running"
        rows = [row for row in await agent_rows(master.base_url) if row["agent_id"] == "yaml-converter"]
        assert len(rows) == 1
        assert [tool["name"] for tool in rows[0]["tools"]] == ["convert"]

        # a handler that raises fails its tool call; the agent and the master keep going
        llm.add_tool_call("yaml-converter__convert", {})
        llm.add_text("The converter failed.")
        llm.add_tool_call("yaml-converter__convert", {"km": 10})
        llm.add_text("10 km is 6.214 miles.")
        async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
            failed = (await http.post("/query", json={"query": "convert nothing"})).json()
            assert failed["answer"] == "The converter failed."
            answered = (await http.post("/query", json={"query": "10 km in miles?"})).json()
        assert answered["answer"] == "10 km is 6.214 miles."
        tool_messages = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
        assert "6.214" in tool_messages[-1]["content"]
        first_tool = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
        assert "handler blew up" in first_tool[-1]["content"]
    finally:
        stopped = await runner.stop()
    assert [(o.agent_id, o.status) for o in stopped] == [("yaml-converter", "stopped")]
    async with asyncio.timeout(90):
        while "yaml-converter" in {row["agent_id"] for row in await agent_rows(master.base_url)}:
            await asyncio.sleep(0.05)


async def test_the_example_workspace_runs_the_sample_agents(master: MasterProcess) -> None:
    runner = YamlAgentRunner(ClientConfig(master_ws=master.ws_url, keepalive_interval=0), root=ROOT)
    try:
        outcomes = {
            o.agent_id: (o.status, o.reason) for o in await runner.start(load_workspace(EXAMPLE.read_text()))
        }
        # weather-agent comes from build_agent(), seller-agent from handle_tool + handle_collaboration
        assert outcomes["weather-agent"][0] == "started", outcomes
        assert outcomes["seller-agent"][0] == "started", outcomes
        assert outcomes["demo-invocation-agent"][0] == "skipped"
        rows = {row["agent_id"]: row for row in await agent_rows(master.base_url)}
        assert rows["seller-agent"]["metadata"]["supports_collaboration"] is True
    finally:
        await runner.stop()
