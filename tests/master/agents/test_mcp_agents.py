"""MCP servers registered with ``POST /register`` (``mcp_url``, ``mcp_headers``): called by the
orchestrator end to end, progress relayed, tool errors, tool-list changes followed, a master
restart survived, ``/refresh`` health, and header values never shown anywhere."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

import httpx
import pytest

from openagent.testing import ScriptedOpenAIServer
from tests.factories import ROOT, InProcessMaster, agent_rows, in_process_master
from tests.master.agents.mcp_servers import TestMcpServer, mcp_port, serve_mcp

SECRET = "mcp-secret-value-0123456789"
HEADERS = {"Authorization": f"Bearer {SECRET}"}
WAIT = 60.0


async def register(master: InProcessMaster, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=WAIT) as http:
        return await http.post("/register", json=body)


async def streamed_query(master: InProcessMaster, query: str, agent_id: str) -> list[tuple[str, Any]]:
    """``POST /query`` with ``stream``: its server-sent events, in order."""
    events: list[tuple[str, Any]] = []
    body = {"query": query, "allowed_agent_ids": [agent_id], "stream": True}
    async with httpx.AsyncClient(base_url=master.base_url, timeout=WAIT) as http:
        async with http.stream("POST", "/query", json=body) as response:
            event = None
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event:
                    events.append((event, json.loads(line[6:])))
    return events


def row_of(rows: list[dict[str, Any]], agent_id: str) -> dict[str, Any]:
    return next(row for row in rows if row["agent_id"] == agent_id)


async def test_a_registered_mcp_server_is_called_by_the_orchestrator(llm: ScriptedOpenAIServer) -> None:
    server = TestMcpServer(token=SECRET)
    async with serve_mcp(server) as url, in_process_master(openai_base_url=llm.base_url) as master:
        response = await register(master, {"agent_id": "mcp-adder", "mcp_url": url, "mcp_headers": HEADERS})
        assert response.status_code == 200, response.text
        assert response.json() == {"registered": True, "agent_id": "mcp-adder", "status": "UP"}

        async with httpx.AsyncClient(base_url=master.base_url, timeout=WAIT) as http:
            listing = await http.get("/agents")
        assert SECRET not in listing.text and "Authorization" not in listing.text
        row = row_of(listing.json()["agents"], "mcp-adder")
        assert row["connection_type"] == "mcp" and row["status"] == "UP" and row["mcp_url"] == url
        tools = {tool["name"]: tool for tool in row["tools"]}
        assert set(tools) == {"add", "fail", "slow", "grow"}
        assert tools["add"]["annotations"] == {"readOnlyHint": True, "idempotentHint": True}
        assert row["metadata"]["mcp"]["server"] == "test-mcp"

        # The orchestrator calls the tool; its progress is relayed as tool_progress.
        llm.add_tool_call("mcp-adder__add", {"a": 20, "b": 22})
        llm.add_text("42.")
        events = await streamed_query(master, "add 20 and 22", "mcp-adder")
        names = [name for name, _ in events]
        assert names.index("tool_call") < names.index("tool_progress") < names.index("tool_result")
        progress = next(data for name, data in events if name == "tool_progress")
        assert (progress["agent_id"], progress["message"], progress["progress"]) == (
            "mcp-adder",
            "adding",
            0.5,
        )
        result = events[-1][1]
        assert result["success"] and result["answer"] == "42."
        assert result["agents_used"] == [{"agent_id": "mcp-adder", "tool_name": "add"}]
        assert json.loads(llm.requests[-1]["messages"][-1]["content"]) == {"result": {"result": 42}}

        # A tool error reaches the model as the call's error, with the server's text.
        llm.add_tool_call("mcp-adder__fail", {"reason": "out of paper"})
        llm.add_text("It failed.")
        async with httpx.AsyncClient(base_url=master.base_url, timeout=WAIT) as http:
            body = (
                await http.post("/query", json={"query": "fail", "allowed_agent_ids": ["mcp-adder"]})
            ).json()
        assert body["success"], body
        error = json.loads(llm.requests[-1]["messages"][-1]["content"])["error"]
        assert (
            error
            == "tool 'fail' on agent 'mcp-adder' failed: Error executing tool fail: refused: out of paper"
        )

        # The server adds a tool and says so: the agent's tools follow.
        llm.add_tool_call("mcp-adder__grow", {})
        llm.add_text("Grown.")
        async with httpx.AsyncClient(base_url=master.base_url, timeout=WAIT) as http:
            await http.post("/query", json={"query": "grow", "allowed_agent_ids": ["mcp-adder"]})
            async with asyncio.timeout(WAIT):
                while "shrink" not in {
                    t["name"] for t in row_of(await agent_rows(master.base_url), "mcp-adder")["tools"]
                }:
                    await asyncio.sleep(0.05)
            llm.add_tool_call("mcp-adder__shrink", {})
            llm.add_text("Shrunk.")
            body = (
                await http.post("/query", json={"query": "shrink", "allowed_agent_ids": ["mcp-adder"]})
            ).json()
        assert body["agents_used"] == [{"agent_id": "mcp-adder", "tool_name": "shrink"}]
        assert json.loads(llm.requests[-1]["messages"][-1]["content"]) == {"result": {"result": "shrunk"}}
        await register_cleanup(master, "mcp-adder")


async def register_cleanup(master: InProcessMaster, agent_id: str) -> None:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=WAIT) as http:
        assert (await http.post("/unregister", json={"agent_id": agent_id})).status_code == 200


async def test_an_mcp_agent_survives_a_master_restart_and_refresh_reports_its_health(
    llm: ScriptedOpenAIServer,
) -> None:
    port = mcp_port()
    async with serve_mcp(TestMcpServer(token=SECRET), port) as url:
        async with in_process_master(openai_base_url=llm.base_url) as first:
            assert (
                await register(first, {"agent_id": "mcp-durable", "mcp_url": url, "mcp_headers": HEADERS})
            ).status_code == 200
            master_port = first.port
        async with in_process_master(openai_base_url=llm.base_url, port=master_port) as second:
            row = row_of(await agent_rows(second.base_url), "mcp-durable")
            assert row["connection_type"] == "mcp" and row["status"] == "UP"
            llm.add_tool_call("mcp-durable__add", {"a": 1, "b": 2})
            llm.add_text("3.")
            async with httpx.AsyncClient(base_url=second.base_url, timeout=WAIT) as http:
                body = (
                    await http.post("/query", json={"query": "1+2", "allowed_agent_ids": ["mcp-durable"]})
                ).json()
            assert body["agents_used"] == [{"agent_id": "mcp-durable", "tool_name": "add"}], body
            assert json.loads(llm.requests[-1]["messages"][-1]["content"]) == {"result": {"result": 3}}
            restarted = second
    # The server is gone: /refresh says DOWN, without the secret in the reason.
    async with in_process_master(openai_base_url=llm.base_url, port=restarted.port) as third:
        async with httpx.AsyncClient(base_url=third.base_url, timeout=WAIT) as http:
            refreshed = await http.get("/refresh")
            report = row_of(refreshed.json()["agents"], "mcp-durable")
            assert report["status"] == "DOWN" and report["last_error"], report
            assert SECRET not in refreshed.text
            async with serve_mcp(TestMcpServer(token=SECRET), port):
                report = row_of((await http.get("/refresh")).json()["agents"], "mcp-durable")
                assert report["status"] == "UP", report
            await http.post("/unregister", json={"agent_id": "mcp-durable"})


@pytest.mark.parametrize(
    ("headers", "expected"),
    [({"Authorization": f"Bearer {SECRET}-wrong"}, "401"), ({"Authorization": "Bearer"}, "401")],
)
async def test_a_refused_registration_never_shows_a_header_value(
    llm: ScriptedOpenAIServer, headers: dict[str, str], expected: str
) -> None:
    async with (
        serve_mcp(TestMcpServer(token=SECRET)) as url,
        in_process_master(openai_base_url=llm.base_url) as master,
    ):
        response = await register(master, {"agent_id": "mcp-refused", "mcp_url": url, "mcp_headers": headers})
        assert response.status_code == 400, response.text
        assert SECRET not in response.text
        assert url in response.text and expected in response.text, response.text
        # A malformed registration is refused without echoing the headers either.
        bad = await register(
            master, {"agent_id": "mcp-refused", "mcp_url": url, "mcp_headers": {"X-Key": f"{SECRET}\n"}}
        )
        assert bad.status_code == 422 and SECRET not in bad.text, bad.text
        assert "mcp-refused" not in {row["agent_id"] for row in await agent_rows(master.base_url)}


async def test_the_guides_example_server_attaches(llm: ScriptedOpenAIServer) -> None:
    """``docs/examples/mcp_server.py``, run as the guide runs it, registered with its token."""
    port = mcp_port()
    env = {**os.environ, "MCP_SERVER_PORT": str(port), "MCP_SERVER_TOKEN": "s3cret"}
    process = subprocess.Popen(  # noqa: ASYNC220 - returns at once
        [sys.executable, str(ROOT / "docs" / "examples" / "mcp_server.py")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        async with in_process_master(openai_base_url=llm.base_url) as master:
            body = {"agent_id": "words", "mcp_url": url, "mcp_headers": {"Authorization": "Bearer s3cret"}}
            async with asyncio.timeout(WAIT):
                while (response := await register(master, body)).status_code != 200:
                    assert process.poll() is None, "the example server exited"
                    assert "HTTP 401" not in response.text, response.text
                    await asyncio.sleep(0.2)
            row = row_of(await agent_rows(master.base_url), "words")
            assert {tool["name"] for tool in row["tools"]} == {"count_words", "reverse_words"}
            llm.add_tool_call("words__count_words", {"text": "the quick brown fox"})
            llm.add_text("4 words.")
            async with httpx.AsyncClient(base_url=master.base_url, timeout=WAIT) as http:
                answer = (
                    await http.post("/query", json={"query": "count", "allowed_agent_ids": ["words"]})
                ).json()
            assert answer["agents_used"] == [{"agent_id": "words", "tool_name": "count_words"}], answer
            assert json.loads(llm.requests[-1]["messages"][-1]["content"]) == {"result": {"result": 4}}
            await register_cleanup(master, "words")
    finally:
        process.terminate()
        await asyncio.to_thread(process.wait, WAIT)
