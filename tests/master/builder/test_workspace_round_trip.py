"""Export and restore keep every field of the workspace schema, ``requires_approval`` among them:
a restored agent keeps its guard."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from openagent.cli import main
from openagent.testing import ScriptedOpenAIServer
from openagent.workspace import AgentSpec, ToolSpec, export_workspace, load_workspace
from tests.factories import in_process_master, only_agents, serve_app
from tests.master.agents.mcp_servers import TestMcpServer, serve_mcp

WAIT = 60.0
OURS = ("bank", "calc")

GUARDED_TOOL: dict[str, Any] = {
    "name": "transfer",
    "description": "Move money between accounts",
    "parameters": {"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]},
    "endpoint": "/transfer",
    "requires_approval": True,
}


def _health_app() -> Starlette:
    async def health(request: Any) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[Route("/health", health)])


def test_the_round_trip_test_sets_every_field_of_the_schema() -> None:
    """A new field of the schema must be added to the round trip below."""
    tested_tool = set(GUARDED_TOOL)
    assert tested_tool == set(ToolSpec.model_fields)
    # builtin and role belong to the query client, which exports leave out; the MCP and A2A
    # fields are covered by tests/master/builder/test_mcp_workspaces.py and the A2A tests.
    tested_agent = {"agent_id", "transport", "invocation_base_url", "tools", "metadata", "mcp_url"}
    untested = {"role", "builtin", "handler", "mcp_headers", "a2a_url", "a2a_headers"}
    assert tested_agent | untested == set(AgentSpec.model_fields)


async def test_export_and_restore_keep_requires_approval_and_every_tool_field(
    llm: ScriptedOpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # no developer .env
    async with (
        serve_app(_health_app()) as agent_url,
        serve_mcp(TestMcpServer()) as mcp_url,
        in_process_master(openai_base_url=llm.base_url) as master,
        httpx.AsyncClient(base_url=master.base_url, timeout=WAIT) as http,
    ):
        registered = await http.post(
            "/register",
            json={
                "agent_id": "bank",
                "invocation_base_url": agent_url,
                "tools": [GUARDED_TOOL],
                "metadata": {"owner": "treasury"},
            },
        )
        assert registered.status_code == 200, registered.text
        assert (
            await http.post("/register", json={"agent_id": "calc", "mcp_url": mcp_url})
        ).status_code == 200

        exported = (await http.get("/internal/workspace/export")).text
        workspace = load_workspace(exported)
        bank = workspace.agent("bank")
        assert bank is not None
        assert bank.tools[0].model_dump(mode="json") == GUARDED_TOOL
        assert bank.metadata == {"owner": "treasury"}
        assert bank.invocation_base_url == agent_url

        # The MCP server cannot say which tool needs approval; the workspace can.
        calc = workspace.agent("calc")
        assert calc is not None and "add" in [tool.name for tool in calc.tools]
        tools = [
            tool.model_copy(update={"requires_approval": tool.name == "add" or None}) for tool in calc.tools
        ]
        calc = calc.model_copy(update={"tools": tools})
        # Only this test's agents: the tests' Redis may hold other tests' invocation agents.
        ours = only_agents(workspace, OURS)
        agents = [calc if agent.agent_id == "calc" else agent for agent in ours.agents]
        guarded = export_workspace(ours.model_copy(update={"agents": agents}))
        assert guarded.count("requires_approval: true") == 2, guarded  # bank's transfer, calc's add
        path = tmp_path / "ws.yaml"
        path.write_text(guarded)
        for agent_id in ("bank", "calc"):
            assert (await http.post("/unregister", json={"agent_id": agent_id})).status_code == 200

        command = ["workspace", "restore", str(path), "--master", master.base_url]
        assert await asyncio.to_thread(main, command) == 0, capsys.readouterr()
        assert "bank: registered" in capsys.readouterr().out

        exported_again = load_workspace((await http.get("/internal/workspace/export")).text)
        again = export_workspace(only_agents(exported_again, OURS))
        assert again == guarded
        assert load_workspace(again).agent("bank") == bank

        # The guard works after the restore: a query that allows no approval may not run the tool.
        llm.add_tool_call("calc__add", {"a": 2, "b": 2})
        llm.add_text("I may not add without approval.")
        body = (
            await http.post(
                "/query", json={"query": "2+2", "allowed_agent_ids": ["calc"], "approval": "never"}
            )
        ).json()
        assert body["success"], body
        told = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
        assert "requires a person's approval" in told[0]["content"], told
        for agent_id in ("bank", "calc"):
            await http.post("/unregister", json={"agent_id": agent_id})
