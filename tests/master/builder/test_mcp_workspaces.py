"""MCP agents in workspaces: exported with their URL and header *references*, never the values;
restored by ``openagent workspace restore`` with the values taken from its environment."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from master.builder.workspaces import secret_references
from openagent.cli import main
from openagent.testing import ScriptedOpenAIServer
from openagent.workspace import export_workspace, load_workspace
from tests.factories import agent_rows, in_process_master, only_agents
from tests.master.agents.mcp_servers import TestMcpServer, serve_mcp

SECRET = "ws-secret-token-9876543210"
WAIT = 60.0


def test_header_values_become_references() -> None:
    headers = {"Authorization": f"Bearer {SECRET}", "X-Api-Key": SECRET}
    assert secret_references("github.tools", headers) == {
        "Authorization": "Bearer ${MCP_GITHUB_TOOLS_AUTHORIZATION}",
        "X-Api-Key": "${MCP_GITHUB_TOOLS_X_API_KEY}",
    }


async def test_an_mcp_agent_is_exported_by_reference_and_restored_from_the_environment(
    llm: ScriptedOpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # no developer .env
    async with (
        serve_mcp(TestMcpServer(token=SECRET)) as url,
        in_process_master(openai_base_url=llm.base_url) as master,
        httpx.AsyncClient(base_url=master.base_url, timeout=WAIT) as http,
    ):
        registered = await http.post(
            "/register",
            json={"agent_id": "ws-mcp", "mcp_url": url, "mcp_headers": {"Authorization": f"Bearer {SECRET}"}},
        )
        assert registered.status_code == 200, registered.text
        exported = (await http.get("/internal/workspace/export")).text
        assert SECRET not in exported
        spec = load_workspace(exported).agent("ws-mcp")
        assert spec is not None and spec.transport == "mcp" and spec.mcp_url == url
        assert spec.mcp_headers == {"Authorization": "Bearer ${MCP_WS_MCP_AUTHORIZATION}"}
        assert (await http.post("/unregister", json={"agent_id": "ws-mcp"})).status_code == 200

        path = tmp_path / "ws.yaml"
        path.write_text(export_workspace(only_agents(load_workspace(exported), ["ws-mcp"])))
        command = ["workspace", "restore", str(path), "--master", master.base_url]

        # Without the variable: refused, naming it.
        monkeypatch.delenv("MCP_WS_MCP_AUTHORIZATION", raising=False)
        assert await asyncio.to_thread(main, command) == 1
        out, err = capsys.readouterr()
        assert "ws-mcp: invalid (mcp_headers.Authorization refers to ${MCP_WS_MCP_AUTHORIZATION}" in out, err

        # A wrong value: the server refuses, and the answer does not show the value.
        monkeypatch.setenv("MCP_WS_MCP_AUTHORIZATION", "wrong-but-secret-value")
        assert await asyncio.to_thread(main, command) == 1
        out = capsys.readouterr().out
        assert "ws-mcp: invalid" in out and "HTTP 401" in out and "wrong-but-secret-value" not in out

        # The right one: registered, and the agent works.
        monkeypatch.setenv("MCP_WS_MCP_AUTHORIZATION", SECRET)
        assert await asyncio.to_thread(main, command) == 0
        assert "ws-mcp: registered" in capsys.readouterr().out
        row = next(row for row in await agent_rows(master.base_url) if row["agent_id"] == "ws-mcp")
        assert row["connection_type"] == "mcp" and row["status"] == "UP"
        llm.add_tool_call("ws-mcp__add", {"a": 2, "b": 2})
        llm.add_text("4.")
        body = (await http.post("/query", json={"query": "2+2", "allowed_agent_ids": ["ws-mcp"]})).json()
        assert body["agents_used"] == [{"agent_id": "ws-mcp", "tool_name": "add"}], body
        # Exported again: still references.
        assert SECRET not in (await http.get("/internal/workspace/export")).text
        await http.post("/unregister", json={"agent_id": "ws-mcp"})
