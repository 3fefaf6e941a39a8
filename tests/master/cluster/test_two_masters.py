"""Two real master processes on one Redis with OPENAGENT_CLUSTER=1: an agent on one, queries on the other."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from typing import Any

import httpx

from openagent.testing import ScriptedOpenAIServer
from tests.conftest import master_env
from tests.factories import WEATHER_TOOL, MasterProcess, RawPeer, agent_rows

LEASE = "1"


def cluster_env(llm: ScriptedOpenAIServer, **extra: str) -> dict[str, str]:
    return master_env(llm, OPENAGENT_CLUSTER="1", OPENAGENT_MASTER_LEASE_SECONDS=LEASE, **extra)


async def rows_until(base_url: str, check: Any) -> list[dict[str, Any]]:
    async with asyncio.timeout(30):
        while True:
            rows = await agent_rows(base_url)
            if check(rows):
                return rows
            await asyncio.sleep(0.1)


def row(rows: list[dict[str, Any]], agent_id: str) -> dict[str, Any] | None:
    return next((r for r in rows if r["agent_id"] == agent_id), None)


async def test_query_on_one_master_calls_an_agent_on_the_other(llm: ScriptedOpenAIServer) -> None:
    with (
        MasterProcess(cluster_env(llm, OPENAGENT_MASTER_ID="master-a")) as a,
        MasterProcess(cluster_env(llm, OPENAGENT_MASTER_ID="master-b")) as b,
    ):
        peer = await RawPeer.connect(a.ws_url)
        try:
            await peer.register("cross-weather", tools=[WEATHER_TOOL])
            on_b = await rows_until(b.base_url, lambda rows: row(rows, "cross-weather") is not None)
            assert row(on_b, "cross-weather")["master_id"] == "master-a"  # type: ignore[index]
            assert row(await agent_rows(a.base_url), "cross-weather")["master_id"] == "master-a"  # type: ignore[index]

            llm.add_tool_call("cross-weather__get_weather", {"city": "Lima"})
            llm.add_text("Warm in Lima.")
            async with httpx.AsyncClient(base_url=b.base_url, timeout=30) as http:
                pending = asyncio.create_task(http.post("/query", json={"query": "Weather in Lima?"}))
                call = await peer.recv(timeout=20)
                assert call["type"] == "tool_call" and call["arguments"] == {"city": "Lima"}
                await peer.send(
                    {"type": "tool_result", "call_id": call["call_id"], "success": True, "result": {"c": 24}}
                )
                body = (await pending).json()
            assert body["success"] is True and body["answer"] == "Warm in Lima."
            assert body["agents_used"] == [{"agent_id": "cross-weather", "tool_name": "get_weather"}]
            assert json.loads(llm.requests[1]["messages"][-1]["content"]) == {"result": {"c": 24}}
        finally:
            await peer.close()
        # The agent left: its entry goes with it, on both masters.
        await rows_until(b.base_url, lambda rows: row(rows, "cross-weather") is None)


async def test_killed_master_fails_its_calls_fast_and_its_agents_disappear(llm: ScriptedOpenAIServer) -> None:
    with (
        MasterProcess(cluster_env(llm)) as a,
        MasterProcess(cluster_env(llm, TOOL_CALL_TIMEOUT="300")) as b,
    ):
        peer = await RawPeer.connect(a.ws_url)
        await peer.register("doomed-weather", tools=[WEATHER_TOOL])
        await rows_until(b.base_url, lambda rows: row(rows, "doomed-weather") is not None)
        llm.add_tool_call("doomed-weather__get_weather", {"city": "Oslo"})
        llm.add_text("The weather service is gone.")
        async with httpx.AsyncClient(base_url=b.base_url, timeout=60) as http:
            pending = asyncio.create_task(http.post("/query", json={"query": "Weather in Oslo?"}))
            await peer.recv(timeout=20)  # the call reached the agent through master A
            assert a.process is not None
            os.kill(a.process.pid, signal.SIGKILL)
            a.process.wait(timeout=10)
            body = (await pending).json()
        assert body["success"] is True
        error = json.loads(llm.requests[1]["messages"][-1]["content"])["error"]
        assert "stopped answering" in error and "lease expired" in error
        await rows_until(b.base_url, lambda rows: row(rows, "doomed-weather") is None)


async def test_single_master_rows_have_no_master_id(master: MasterProcess) -> None:
    peer = await RawPeer.connect(master.ws_url)
    try:
        await peer.register("solo-weather", tools=[WEATHER_TOOL])
        listed = row(await agent_rows(master.base_url), "solo-weather")
        assert listed is not None and "master_id" not in listed
    finally:
        await peer.close()
