"""Several connections serving one agent id (replicas): calls balanced over them, a replica's
death fails only its own calls (never sent twice), one listing with every replica."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from openagent.testing import ScriptedOpenAIServer
from tests.factories import WEATHER_TOOL, MasterProcess, RawPeer, agent_rows

AGENT = "replica-weather"
TOOL = f"{AGENT}__get_weather"


async def _answer(peer: RawPeer, call: dict[str, Any], result: Any) -> None:
    await peer.send({"type": "tool_result", "call_id": call["call_id"], "success": True, "result": result})


async def test_calls_are_balanced_and_a_dying_replica_fails_only_its_own_calls(
    master: MasterProcess, llm: ScriptedOpenAIServer
) -> None:
    one, two = await RawPeer.connect(master.ws_url), await RawPeer.connect(master.ws_url)
    try:
        await one.register(AGENT, tools=[WEATHER_TOOL], instance="r1")
        await two.register(AGENT, tools=[WEATHER_TOOL], instance="r2")
        rows = [row for row in await agent_rows(master.base_url) if row["agent_id"] == AGENT]
        assert len(rows) == 1 and [r["instance"] for r in rows[0]["replicas"]] == ["r1", "r2"]

        async with httpx.AsyncClient(base_url=master.base_url, timeout=60) as http:
            # Two queries at once: the second call goes to the replica with nothing in flight.
            llm.add_tool_call(TOOL, {"city": "Lima"})
            first = asyncio.create_task(http.post("/query", json={"query": "Lima?", "agents": [AGENT]}))
            call_one = await one.recv()
            llm.add_tool_call(TOOL, {"city": "Oslo"})
            second = asyncio.create_task(http.post("/query", json={"query": "Oslo?", "agents": [AGENT]}))
            call_two = await two.recv()
            assert (call_one["arguments"], call_two["arguments"]) == ({"city": "Lima"}, {"city": "Oslo"})
            llm.add_text("Warm in Lima.")
            await _answer(one, call_one, {"c": 24})
            assert (await first).json()["answer"] == "Warm in Lima."
            llm.add_text("Cold in Oslo.")
            await _answer(two, call_two, {"c": -3})
            assert (await second).json()["answer"] == "Cold in Oslo."

            # A replica dies with a call in flight: that call fails (it may have run, so it is
            # not sent again), and the next calls go to the replica left.
            llm.add_tool_call(TOOL, {"city": "Rome"})
            llm.add_text("The agent went away.")
            third = asyncio.create_task(http.post("/query", json={"query": "Rome?", "agents": [AGENT]}))
            call_three = await one.recv()
            assert call_three["arguments"] == {"city": "Rome"}
            await one.close()
            body = (await third).json()
            tool_message = llm.requests[-1]["messages"][-1]["content"]
            assert "disconnected" in tool_message, tool_message
            assert body["answer"] == "The agent went away."

            llm.add_tool_call(TOOL, {"city": "Pisa"})
            llm.add_text("Mild in Pisa.")
            fourth = asyncio.create_task(http.post("/query", json={"query": "Pisa?", "agents": [AGENT]}))
            call_four = await two.recv()  # the first frame r2 got since Oslo: Rome never reached it
            assert call_four["arguments"] == {"city": "Pisa"}
            await _answer(two, call_four, {"c": 18})
            assert (await fourth).json()["answer"] == "Mild in Pisa."
        rows = [row for row in await agent_rows(master.base_url) if row["agent_id"] == AGENT]
        assert [r["instance"] for r in rows[0]["replicas"]] == ["r2"]
    finally:
        await one.close()
        await two.close()


async def test_a_replica_must_offer_the_same_tools_and_the_same_instance_replaces(
    master: MasterProcess,
) -> None:
    one, other, again = [await RawPeer.connect(master.ws_url) for _ in range(3)]
    try:
        await one.register("replica-tools", tools=[WEATHER_TOOL], instance="a")
        await other.send(
            {"type": "register", "agent_id": "replica-tools", "role": "action", "tools": [], "instance": "b"}
        )
        error = await other.recv()
        assert error["type"] == "error" and "replicas must offer the same tools" in error["message"], error

        await again.register("replica-tools", tools=[WEATHER_TOOL], instance="a")
        replaced = await one.recv()
        assert replaced["code"] == "agent_replaced", replaced
        rows = [row for row in await agent_rows(master.base_url) if row["agent_id"] == "replica-tools"]
        assert [r["instance"] for r in rows[0]["replicas"]] == ["a"]
    finally:
        for peer in (one, other, again):
            await peer.close()
