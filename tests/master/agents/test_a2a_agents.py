"""A2A agents registered with ``POST /register``, used by the orchestrator end to end.

The A2A agent is written with the ``a2a-sdk`` server (:mod:`tests.a2a_agent`); the master is a
real one on loopback with the scripted LLM choosing the agent's skill.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from openagent.testing import ScriptedOpenAIServer
from tests.a2a_agent import TestA2AAgent, serve_a2a_agent
from tests.factories import InProcessMaster, agent_rows, free_port, in_process_master

TOKEN = "a2a-secret-5d41402abc4b2a76"
AGENT = "currency-agent"
FUNCTION = f"{AGENT}__convert_currency"


@pytest.fixture
async def remote() -> AsyncIterator[TestA2AAgent]:
    async with serve_a2a_agent(TestA2AAgent(token=TOKEN)) as agent:
        yield agent


@pytest.fixture
async def master(llm: ScriptedOpenAIServer) -> AsyncIterator[InProcessMaster]:
    async with in_process_master(openai_base_url=llm.base_url) as master:
        yield master
        async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
            await http.post("/unregister", json={"agent_id": AGENT})


async def register(
    master: InProcessMaster, url: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=60) as http:
        return await http.post(
            "/register", json={"a2a_url": url, "a2a_headers": headers or {"X-Api-Key": TOKEN}}
        )


async def query_events(master: InProcessMaster, query: str) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events of one streamed query."""
    events: list[tuple[str, dict[str, Any]]] = []
    async with (
        httpx.AsyncClient(base_url=master.base_url, timeout=120) as http,
        http.stream(
            "POST", "/query", json={"query": query, "stream": True, "allowed_agent_ids": [AGENT]}
        ) as response,
    ):
        event = None
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event:
                events.append((event, json.loads(line[6:])))
    return events


def hub_logs(caplog: pytest.LogCaptureFixture) -> str:
    """Everything the master and its A2A client logged (not the test agent's own server)."""
    return "\n".join(
        f"{record.getMessage()} {record.args!r}"
        for record in caplog.records
        if not record.name.startswith("a2a.server")
    )


def tool_message(llm: ScriptedOpenAIServer) -> Any:
    """What the orchestrator told the model the tool returned (its second request's last message)."""
    return json.loads(llm.requests[1]["messages"][-1]["content"])


async def test_the_orchestrator_uses_an_a2a_agent_and_sees_its_progress(
    master: InProcessMaster, remote: TestA2AAgent, llm: ScriptedOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    response = await register(master, remote.base_url)
    assert response.status_code == 200, response.text
    assert response.json()["agent_id"] == AGENT and response.json()["status"] == "UP"
    async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
        listing = (await http.get("/agents")).text
    assert TOKEN not in listing
    row = next(r for r in await agent_rows(master.base_url) if r["agent_id"] == AGENT)
    assert row["connection_type"] == "a2a" and row["status"] == "UP"
    assert [tool["name"] for tool in row["tools"]] == ["convert_currency"]
    assert row["metadata"]["name"] == "Currency Agent" and row["metadata"]["streaming"] is True

    llm.add_tool_call(FUNCTION, {"message": "3 EUR in USD", "data": {"amount": 3}})
    llm.add_text("3 EUR is about 3.2 USD.")
    events = await query_events(master, "How much is 3 EUR in USD?")

    names = [name for name, _ in events]
    assert names.index("tool_call") < names.index("tool_progress") < names.index("tool_result")
    assert dict(events)["tool_progress"]["message"] == "looking it up"
    result = {
        "text": "echo: 3 EUR in USD",
        "data": [{"n": 5, "skill": "convert.currency", "data": [{"amount": 3}]}],
    }
    assert dict(events)["tool_result"]["result"] == result
    assert events[-1][1]["answer"] == "3 EUR is about 3.2 USD."
    assert tool_message(llm) == {"result": result}
    assert remote.requests[0]["headers"]["x-api-key"] == TOKEN
    assert TOKEN not in hub_logs(caplog)


async def test_a_refused_registration_never_shows_the_header_value(
    master: InProcessMaster, remote: TestA2AAgent, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-a2a-secret-0c8d3f"
    response = await register(master, remote.base_url, {"X-Api-Key": wrong})
    assert response.status_code >= 400
    assert "401" in response.text and "agent-card.json" in response.text
    assert wrong not in response.text and wrong not in hub_logs(caplog)
    assert all(row["agent_id"] != AGENT for row in await agent_rows(master.base_url))


async def test_a_failed_remote_task_is_a_tool_error(
    master: InProcessMaster, remote: TestA2AAgent, llm: ScriptedOpenAIServer
) -> None:
    assert (await register(master, remote.base_url)).status_code == 200
    llm.add_tool_call(FUNCTION, {"message": "fail"})
    llm.add_text("The exchange is closed.")
    events = await query_events(master, "convert")
    assert events[-1][1]["success"]
    assert tool_message(llm) == {
        "error": "A2A agent 'currency-agent' failed the task: the exchange is closed"
    }


async def test_a_hanging_agent_times_out_and_its_task_is_cancelled(
    llm: ScriptedOpenAIServer, remote: TestA2AAgent
) -> None:
    async with in_process_master(openai_base_url=llm.base_url, tool_call_timeout=3) as master:
        assert (await register(master, remote.base_url)).status_code == 200
        llm.add_tool_call(FUNCTION, {"message": "hang"})
        llm.add_text("The agent did not answer in time.")
        await query_events(master, "convert")
        assert (
            tool_message(llm)["error"]
            == f"tool 'convert_currency' on agent '{AGENT}' gave no result within 3 s"
        )
        async with asyncio.timeout(60):
            await remote.cancelled.wait()
        assert remote.cancelled_ids and remote.started.is_set()
        async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
            await http.post("/unregister", json={"agent_id": AGENT})


async def test_an_a2a_agent_survives_a_master_restart_and_is_checked_through_its_card(
    llm: ScriptedOpenAIServer,
) -> None:
    port = free_port()
    agent = TestA2AAgent(token=TOKEN, streaming=False, bindings=("HTTP+JSON",))
    async with serve_a2a_agent(agent, port=port):
        async with in_process_master(openai_base_url=llm.base_url) as first:
            assert (await register(first, agent.base_url)).status_code == 200
            master_port = first.port
        async with in_process_master(openai_base_url=llm.base_url, port=master_port) as second:
            row = next(r for r in await agent_rows(second.base_url) if r["agent_id"] == AGENT)
            assert row["connection_type"] == "a2a" and TOKEN not in json.dumps(row)
            llm.add_tool_call(FUNCTION, {"message": "still here"})
            llm.add_text("Still here.")
            events = await query_events(second, "still there?")
            assert dict(events)["tool_result"]["result"] == {
                "text": "echo: still here",
                "data": [{"n": 5, "skill": "convert.currency", "data": []}],
            }
    # The agent is gone: /refresh reads its card and finds it DOWN; back on its port, UP again.
    async with in_process_master(openai_base_url=llm.base_url, port=master_port) as third:
        async with httpx.AsyncClient(base_url=third.base_url, timeout=60) as http:
            report = (await http.get("/refresh")).json()["agents"]
            down = next(r for r in report if r["agent_id"] == AGENT)
            assert down["status"] == "DOWN"
            async with serve_a2a_agent(TestA2AAgent(token=TOKEN), port=port):
                report = (await http.get("/refresh")).json()["agents"]
                assert next(r for r in report if r["agent_id"] == AGENT)["status"] == "UP"
            await http.post("/unregister", json={"agent_id": AGENT})


async def test_a_workspace_exports_and_restores_an_a2a_agent_without_its_secret(
    master: InProcessMaster, remote: TestA2AAgent
) -> None:
    assert (await register(master, remote.base_url)).status_code == 200
    async with httpx.AsyncClient(base_url=master.base_url, timeout=60) as http:
        exported = (await http.get("/internal/workspace/export")).text
        assert TOKEN not in exported
        assert "transport: a2a" in exported and f"a2a_url: {remote.base_url}" in exported
        assert "X-Api-Key: ${A2A_CURRENCY_AGENT_X_API_KEY}" in exported
        assert (await http.post("/unregister", json={"agent_id": AGENT})).status_code == 200

        # Without the variable's value the agent is not registered, and why is said.
        restored = (await http.post("/internal/workspace/restore", json={"yaml": exported})).json()
        [outcome] = [row for row in restored["agents"] if row["agent_id"] == AGENT]
        assert outcome["status"] == "invalid"
        assert "a2a_headers.X-Api-Key refers to ${A2A_CURRENCY_AGENT_X_API_KEY}" in outcome["reason"]

        # openagent workspace restore sends the values its environment holds.
        secrets = {"A2A_CURRENCY_AGENT_X_API_KEY": TOKEN}
        response = await http.post("/internal/workspace/restore", json={"yaml": exported, "secrets": secrets})
        assert TOKEN not in response.text
        [outcome] = [row for row in response.json()["agents"] if row["agent_id"] == AGENT]
        assert outcome["status"] == "registered", outcome
    row = next(r for r in await agent_rows(master.base_url) if r["agent_id"] == AGENT)
    assert row["connection_type"] == "a2a" and row["status"] == "UP"
