"""SIGTERM drains a real master: new work is refused, the call in flight finishes, then the
agents are handed off with 1012 and move to the other master (master/gateway/drain.py).

The slow tools wait on an event the test sets, so "in flight" is a state, not a duration.
"""

from __future__ import annotations

import asyncio
import json
import signal
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from websockets.exceptions import ConnectionClosed

from master.storage.redis_client import create_redis
from master.storage.redis_keys import AGENT_INDEX, agent_key
from openagent import OrchestratorActionAgent
from openagent.config import ClientConfig
from openagent.testing import ScriptedOpenAIServer
from protocol import CLOSE_SERVICE_RESTART
from tests.conftest import master_env
from tests.factories import WEATHER_TOOL, MasterProcess, RawPeer, agent_rows, serve_app

SLOW = {"name": "slow", "description": "Finishes when the test says so", "parameters": {"type": "object"}}


class SlowTool:
    """A tool handler that starts, then waits for :meth:`release`."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self._release = asyncio.Event()

    async def __call__(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.started.set()
        await self._release.wait()
        return {"done": arguments}

    def release(self) -> None:
        self._release.set()


def two_urls(first: MasterProcess, second: MasterProcess) -> ClientConfig:
    return ClientConfig(
        master_ws=f"{first.ws_url},{second.ws_url}",
        api_key="",
        reconnect_initial_delay=0.05,
        reconnect_max_delay=0.5,
        keepalive_interval=0,
    )


async def listed_on(base_url: str, agent_id: str) -> dict[str, Any]:
    async with asyncio.timeout(30):
        while True:
            for row in await agent_rows(base_url):
                if row["agent_id"] == agent_id:
                    return row
            await asyncio.sleep(0.05)


async def until_draining(http: httpx.AsyncClient) -> dict[str, Any]:
    """Wait for the SIGTERM to reach the master: /ready turns 503 ``draining``."""
    async with asyncio.timeout(30):
        while True:
            ready = await http.get("/ready")
            if ready.status_code == 503:
                body: dict[str, Any] = ready.json()
                return body
            await asyncio.sleep(0.05)


async def close_code(peer: RawPeer) -> int | None:
    async with asyncio.timeout(30):
        await peer.ws.wait_closed()
    return peer.ws.close_code


def sigterm(master: MasterProcess) -> None:
    assert master.process is not None
    master.process.send_signal(signal.SIGTERM)


async def test_sigterm_finishes_the_call_in_flight_then_hands_the_agent_off(
    llm: ScriptedOpenAIServer,
) -> None:
    agent_id = "drain-slow"
    tool = SlowTool()
    with MasterProcess(master_env(llm)) as first, MasterProcess(master_env(llm)) as second:
        async with OrchestratorActionAgent(agent_id, [SLOW], tool, config=two_urls(first, second)):
            await listed_on(first.base_url, agent_id)
            observer = await RawPeer.connect(first.ws_url)
            await observer.register("drain-observer")
            llm.add_tool_call(f"{agent_id}__slow", {"n": 1})
            llm.add_text("finished")
            async with httpx.AsyncClient(base_url=first.base_url, timeout=60) as http:
                pending = asyncio.create_task(
                    http.post("/query", json={"query": "go", "allowed_agent_ids": [agent_id]})
                )
                async with asyncio.timeout(30):
                    await tool.started.wait()
                sigterm(first)

                assert (await until_draining(http))["status"] == "draining"
                refused = await http.post("/query", json={"query": "another"})
                assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
                assert refused.json()["error_code"] == "draining"
                # A WebSocket query is refused the same way; a new connection is closed with 1012.
                await observer.send({"type": "query", "query_id": "q-late", "query": "hi"})
                assert await observer.recv() == {
                    "type": "error",
                    "code": "draining",
                    "message": refused.json()["error"],
                    "ref": "q-late",
                }
                late = await RawPeer.connect(first.ws_url)
                try:
                    await late.recv()
                except ConnectionClosed as exc:
                    assert exc.rcvd is not None and exc.rcvd.code == CLOSE_SERVICE_RESTART
                else:
                    raise AssertionError("a connection opened while draining stayed open")
                # The call is still running, so no agent has been handed off yet.
                assert observer.ws.close_code is None

                tool.release()
                body = (await pending).json()
            assert body["success"] is True and body["answer"] == "finished", body
            assert json.loads(llm.requests[1]["messages"][-1]["content"]) == {"result": {"done": {"n": 1}}}

            assert await close_code(observer) == CLOSE_SERVICE_RESTART
            await listed_on(second.base_url, agent_id)  # the SDK moved at once to the next URL
            assert first.process is not None
            await asyncio.to_thread(first.process.wait, 60)


async def test_a_call_that_outlives_the_drain_deadline_fails_clearly(llm: ScriptedOpenAIServer) -> None:
    with MasterProcess(master_env(llm, OPENAGENT_DRAIN_SECONDS="1")) as master:
        peer = await RawPeer.connect(master.ws_url)
        await peer.register("drain-stuck", tools=[WEATHER_TOOL])
        llm.add_tool_call("drain-stuck__get_weather", {"city": "Oslo"})
        llm.add_text("The weather service did not answer in time.")
        async with httpx.AsyncClient(base_url=master.base_url, timeout=60) as http:
            pending = asyncio.create_task(
                http.post("/query", json={"query": "Weather in Oslo?", "allowed_agent_ids": ["drain-stuck"]})
            )
            call = await peer.recv()
            assert call["type"] == "tool_call"
            sigterm(master)  # the agent never answers
            body = (await pending).json()
        assert body["success"] is True and body["answer"] == "The weather service did not answer in time."
        error = json.loads(llm.requests[1]["messages"][-1]["content"])["error"]
        assert "shutting down" in error and "drain deadline (OPENAGENT_DRAIN_SECONDS=1)" in error, error
        assert await close_code(peer) == CLOSE_SERVICE_RESTART


async def test_sigterm_waits_for_an_invocation_call_and_takes_its_callback(llm: ScriptedOpenAIServer) -> None:
    """An HTTP invocation call accepted (202) before SIGTERM: its callback, arriving while the
    master drains, still completes the query."""
    calls: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def run(request: Request) -> JSONResponse:
        await calls.put(await request.json())
        return JSONResponse({"accepted": True}, status_code=202)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    agent_app = Starlette(routes=[Route("/health", health), Route("/run", run, methods=["POST"])])
    with MasterProcess(master_env(llm)) as master:
        async with serve_app(agent_app) as agent_url, httpx.AsyncClient(timeout=60) as http:
            tool = {"name": "echo", "parameters": {"type": "object"}, "endpoint": "/run"}
            registered = await http.post(
                f"{master.base_url}/register",
                json={"agent_id": "drain-invocation", "invocation_base_url": agent_url, "tools": [tool]},
            )
            assert registered.status_code == 200, registered.text
            try:
                llm.add_tool_call("drain-invocation__echo", {"text": "hi"})
                llm.add_text("Echoed while draining.")
                pending = asyncio.create_task(
                    http.post(
                        f"{master.base_url}/query",
                        json={"query": "echo", "allowed_agent_ids": ["drain-invocation"]},
                    )
                )
                async with asyncio.timeout(30):
                    call = await calls.get()
                sigterm(master)
                async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as probe:
                    await until_draining(probe)
                answer = await http.post(
                    call["callback_url"], json={"call_id": call["call_id"], "success": True, "result": "hi"}
                )
                assert answer.status_code == 200, answer.text
                body = (await pending).json()
            finally:  # the test database is shared: leave no agent behind (the master is stopping)
                redis = create_redis(master.env["REDIS_URL"])
                await redis.delete(agent_key("drain-invocation"))
                await redis.srem(AGENT_INDEX, "drain-invocation")
                await redis.aclose()
        assert body["success"] is True and body["answer"] == "Echoed while draining.", body
        assert json.loads(llm.requests[1]["messages"][-1]["content"]) == {"result": "hi"}


async def test_cluster_call_through_a_draining_master_finishes_and_the_agent_moves(
    llm: ScriptedOpenAIServer,
) -> None:
    """Agent on A, query on B: A drains the call B sent it, then the agent registers on B."""
    agent_id = "drain-cross"
    tool = SlowTool()

    def env(master_id: str) -> dict[str, str]:
        return master_env(
            llm, OPENAGENT_CLUSTER="1", OPENAGENT_MASTER_LEASE_SECONDS="1", OPENAGENT_MASTER_ID=master_id
        )

    with MasterProcess(env("drain-a")) as a, MasterProcess(env("drain-b")) as b:
        async with OrchestratorActionAgent(agent_id, [SLOW], tool, config=two_urls(a, b)):
            assert (await listed_on(b.base_url, agent_id))["master_id"] == "drain-a"
            llm.add_tool_call(f"{agent_id}__slow", {"n": 2})
            llm.add_text("finished across masters")
            async with httpx.AsyncClient(base_url=b.base_url, timeout=60) as http:
                pending = asyncio.create_task(
                    http.post("/query", json={"query": "go", "allowed_agent_ids": [agent_id]})
                )
                async with asyncio.timeout(30):
                    await tool.started.wait()
                sigterm(a)
                async with httpx.AsyncClient(base_url=a.base_url, timeout=30) as on_a:
                    await until_draining(on_a)
                tool.release()
                body = (await pending).json()
            assert body["success"] is True and body["answer"] == "finished across masters", body
            assert json.loads(llm.requests[1]["messages"][-1]["content"]) == {"result": {"done": {"n": 2}}}

            async with asyncio.timeout(30):
                while (await listed_on(b.base_url, agent_id)).get("master_id") != "drain-b":
                    await asyncio.sleep(0.05)
            assert a.process is not None
            await asyncio.to_thread(a.process.wait, 60)
