"""Limits on what agents send, through a real master (WebSocket agents, ``POST /register``,
``POST /query``, ``GET /agents``, ``GET /metrics``): an oversized tool result fails its call with
an error the model sees and is never stored; oversized metadata is refused at registration and
nothing is stored; a flood of progress frames is coalesced, counted and logged at DEBUG only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from openagent.testing import ScriptedOpenAIServer
from tests.factories import WEATHER_TOOL, InProcessMaster, RawPeer, in_process_master

DEADLINE = 60
RESULT_LIMIT = 4096
METADATA_LIMIT = 512


@pytest.fixture
async def master(llm: ScriptedOpenAIServer) -> AsyncIterator[InProcessMaster]:
    async with in_process_master(
        openai_base_url=llm.base_url,
        openai_api_key="scripted",
        openagent_max_tool_result_bytes=RESULT_LIMIT,
        openagent_max_agent_metadata_bytes=METADATA_LIMIT,
        openagent_max_progress_per_second=1,
    ) as running:
        yield running


def client(master: InProcessMaster) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=master.base_url, timeout=DEADLINE)


async def test_an_oversized_tool_result_fails_the_call_the_model_is_told_and_nothing_is_stored(
    master: InProcessMaster, llm: ScriptedOpenAIServer
) -> None:
    marker = "HUGE-RESULT-"
    peer = await RawPeer.connect(master.ws_url)
    try:
        await peer.register("big-result", tools=[WEATHER_TOOL])
        llm.add_tool_call("big-result__get_weather", {"city": "Oslo"})
        llm.add_text("the tool failed")
        async with client(master) as http:
            query = asyncio.create_task(
                http.post("/query", json={"query": "weather", "allowed_agent_ids": ["big-result"]})
            )
            call = await peer.recv(timeout=DEADLINE)
            huge = marker + "x" * (RESULT_LIMIT * 4)
            await peer.send(
                {"type": "tool_result", "call_id": call["call_id"], "success": True, "result": huge}
            )
            answered = await query
            assert answered.status_code == 200, answered.text
            session = (await http.get(f"/sessions/{answered.json()['session_id']}")).text
        second = llm.requests[1]["messages"]
        told = next(message for message in second if message["role"] == "tool")
        assert "OPENAGENT_MAX_TOOL_RESULT_BYTES" in told["content"], told
        assert marker not in told["content"]
        assert marker not in session and "OPENAGENT_MAX_TOOL_RESULT_BYTES" in session
    finally:
        await peer.close()


async def test_oversized_metadata_is_refused_on_every_registration_and_nothing_is_stored(
    master: InProcessMaster,
) -> None:
    metadata = {"blob": "m" * (METADATA_LIMIT * 2)}
    peer = await RawPeer.connect(master.ws_url)
    try:
        for extra in ({}, {"invocation_url": "http://127.0.0.1:9"}):
            await peer.send(
                {
                    "type": "register",
                    "agent_id": "fat-ws",
                    "role": "action",
                    "tools": [WEATHER_TOOL],
                    "metadata": metadata,
                    **extra,
                }
            )
            refused = await peer.recv(timeout=DEADLINE)
            assert (refused["type"], refused["code"]) == ("error", "limit_exceeded"), refused
            assert "OPENAGENT_MAX_AGENT_METADATA_BYTES=512" in refused["message"]
    finally:
        await peer.close()
    async with client(master) as http:
        response = await http.post(
            "/register",
            json={
                "agent_id": "fat-http",
                "invocation_base_url": "http://127.0.0.1:9",
                "tools": [WEATHER_TOOL],
                "metadata": metadata,
            },
        )
        assert response.status_code == 422, response.text
        assert response.json()["error_code"] == "limit_exceeded"
        detail = response.json()["detail"][0]
        assert detail["loc"] == ["body", "metadata"] and "OPENAGENT_MAX_AGENT_METADATA_BYTES" in detail["msg"]
        agents = (await http.get("/agents")).text
    assert "fat-ws" not in agents and "fat-http" not in agents
    assert master.services.invocation.get("fat-ws") is None
    assert master.services.invocation.get("fat-http") is None


def coalesced(metrics: str) -> float:
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == "openagent_tool_progress_coalesced_total":
                return sample.value
    raise AssertionError("no openagent_tool_progress_coalesced_total in /metrics")


async def test_a_progress_flood_is_coalesced_counted_and_logged_at_debug_only(
    master: InProcessMaster, llm: ScriptedOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="master.agents.dispatch")
    sent = 300
    peer = await RawPeer.connect(master.ws_url)
    try:
        await peer.register("chatty", tools=[WEATHER_TOOL])
        llm.add_tool_call("chatty__get_weather", {"city": "Oslo"})
        llm.add_text("done")
        async with client(master) as http:
            before = coalesced((await http.get("/metrics")).text)
            async with http.stream(
                "POST",
                "/query",
                json={"query": "weather", "allowed_agent_ids": ["chatty"], "stream": True},
            ) as stream:
                call = await peer.recv(timeout=DEADLINE)
                for n in range(sent):
                    await peer.send(
                        {"type": "tool_progress", "call_id": call["call_id"], "message": f"step {n}"}
                    )
                last = f"step {sent - 1}"

                async def latest() -> str:
                    found = (await http.get(f"/tool_progress/{call['call_id']}")).json()
                    return str(found["message"])

                async with asyncio.timeout(DEADLINE):  # the master handles a connection's frames in order
                    while await latest() != last:
                        await asyncio.sleep(0.01)
                await peer.send(
                    {"type": "tool_result", "call_id": call["call_id"], "success": True, "result": 1}
                )
                body = "".join([chunk async for chunk in stream.aiter_text()])
            counted = coalesced((await http.get("/metrics")).text) - before
    finally:
        await peer.close()
    relayed = body.count("event: tool_progress")
    assert counted > 0
    assert relayed < sent
    assert relayed + counted >= sent  # every frame was relayed at once or counted as held back
    records = [
        r for r in caplog.records if r.name == "master.agents.dispatch" and "progress (" in r.getMessage()
    ]
    assert records and all(record.levelno == logging.DEBUG for record in records)
    assert len(records) == relayed
