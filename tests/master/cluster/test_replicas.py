"""Replicas of one agent id on two masters, through the SDK: each master calls its own replica,
and when one dies mid-call its call fails once and the next go to the other master's replica."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from openagent import OrchestratorActionAgent
from openagent.testing import ScriptedOpenAIServer
from tests.factories import WEATHER_TOOL, MasterProcess
from tests.master.cluster.test_two_masters import cluster_env, row, rows_until
from tests.openagent.conftest import fast_config

AGENT = "replicated-weather"
TOOL = f"{AGENT}__get_weather"


class Replica:
    """An SDK agent that records each call it runs; a call for ``Slowtown`` waits forever."""

    def __init__(self, master: MasterProcess, instance: str) -> None:
        self.cities: list[str] = []
        self.started = asyncio.Event()
        self.agent = OrchestratorActionAgent(
            AGENT, [WEATHER_TOOL], self.handle, config=fast_config(master.ws_url), instance=instance
        )

    async def handle(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.cities.append(arguments["city"])
        if arguments["city"] == "Slowtown":
            self.started.set()
            await asyncio.Event().wait()
        return {"city": arguments["city"], "c": 20}


async def ask(http: httpx.AsyncClient, city: str) -> dict[str, Any]:
    response = await http.post("/query", json={"query": f"Weather in {city}?", "agents": [AGENT]})
    body: dict[str, Any] = response.json()
    return body


async def test_each_master_calls_its_replica_and_a_dead_one_is_never_called_twice(
    llm: ScriptedOpenAIServer,
) -> None:
    with (
        MasterProcess(cluster_env(llm, OPENAGENT_MASTER_ID="replicas-a")) as a,
        MasterProcess(cluster_env(llm, OPENAGENT_MASTER_ID="replicas-b")) as b,
    ):
        on_a, on_b = Replica(a, "on-a"), Replica(b, "on-b")
        await on_a.agent.start()
        await on_b.agent.start()
        try:
            async with (
                httpx.AsyncClient(base_url=a.base_url, timeout=60) as http_a,
                httpx.AsyncClient(base_url=b.base_url, timeout=60) as http_b,
            ):
                for http, city in ((http_a, "Lima"), (http_b, "Oslo")):
                    llm.add_tool_call(TOOL, {"city": city})
                    llm.add_text(f"Fine in {city}.")
                    assert (await ask(http, city))["answer"] == f"Fine in {city}."
                assert (on_a.cities, on_b.cities) == (["Lima"], ["Oslo"])  # no hop between masters

                # B's replica dies in the middle of a call: that call fails (it may have run)...
                llm.add_tool_call(TOOL, {"city": "Slowtown"})
                llm.add_text("The agent went away.")
                pending = asyncio.create_task(ask(http_b, "Slowtown"))
                async with asyncio.timeout(30):
                    await on_b.started.wait()
                await on_b.agent.stop()
                assert (await pending)["answer"] == "The agent went away."
                assert "disconnected" in llm.requests[-1]["messages"][-1]["content"]

                # ...and B's next calls go to A's replica, once each.
                await rows_until(
                    b.base_url, lambda rows: (row(rows, AGENT) or {}).get("master_id") == "replicas-a"
                )
                llm.add_tool_call(TOOL, {"city": "Pisa"})
                llm.add_text("Fine in Pisa.")
                assert (await ask(http_b, "Pisa"))["answer"] == "Fine in Pisa."
            assert on_a.cities == ["Lima", "Pisa"] and on_b.cities == ["Oslo", "Slowtown"]
        finally:
            await on_a.agent.stop()
            await on_b.agent.stop()
