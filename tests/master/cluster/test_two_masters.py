"""Two real master processes on one Redis with OPENAGENT_CLUSTER=1: an agent on one, queries on the other."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from openagent.testing import ScriptedOpenAIServer
from tests.conftest import master_env
from tests.factories import WEATHER_TOOL, MasterProcess, RawPeer, agent_rows, serve_app

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


async def test_callback_of_an_invocation_call_may_arrive_at_the_other_master(
    llm: ScriptedOpenAIServer,
) -> None:
    calls: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def run(request: Request) -> JSONResponse:
        await calls.put(await request.json())
        return JSONResponse({"accepted": True}, status_code=202)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    agent_app = Starlette(routes=[Route("/health", health), Route("/run", run, methods=["POST"])])
    with MasterProcess(cluster_env(llm)) as a, MasterProcess(cluster_env(llm)) as b:
        async with serve_app(agent_app) as agent_url, httpx.AsyncClient(timeout=30) as http:
            tool = {"name": "echo", "parameters": {"type": "object"}, "endpoint": "/run"}
            registered = await http.post(
                f"{a.base_url}/register",
                json={"agent_id": "callback-anywhere", "invocation_base_url": agent_url, "tools": [tool]},
            )
            assert registered.status_code == 200, registered.text
            llm.add_tool_call("callback-anywhere__echo", {"text": "hi"})
            llm.add_text("Echoed.")
            pending = asyncio.create_task(
                http.post(
                    f"{a.base_url}/query", json={"query": "echo", "allowed_agent_ids": ["callback-anywhere"]}
                )
            )
            async with asyncio.timeout(60):
                call = await calls.get()
            # A load balancer sends the agent's callbacks to master B instead of A.
            query_string = call["callback_url"].split("?", 1)[1]
            progress = await http.post(
                f"{b.base_url}/tool_progress?{query_string}",
                json={"call_id": call["call_id"], "message": "half"},
            )
            assert progress.json()["status"] == "forwarded"
            answer = await http.post(
                f"{b.base_url}/tool_callback?{query_string}",
                json={"call_id": call["call_id"], "success": True, "result": {"echo": "hi"}},
            )
            assert answer.json()["status"] == "forwarded"
            body = (await pending).json()
            # The test database is shared: leave no agent behind.
            await http.post(f"{a.base_url}/unregister", json={"agent_id": "callback-anywhere"})
        assert body["success"] is True and body["answer"] == "Echoed."
        assert json.loads(llm.requests[1]["messages"][-1]["content"]) == {"result": {"echo": "hi"}}


async def test_progress_of_a_remote_call_reaches_the_sse_stream(llm: ScriptedOpenAIServer) -> None:
    with MasterProcess(cluster_env(llm)) as a, MasterProcess(cluster_env(llm)) as b:
        peer = await RawPeer.connect(a.ws_url)
        try:
            await peer.register("progress-weather", tools=[WEATHER_TOOL])
            await rows_until(b.base_url, lambda rows: row(rows, "progress-weather") is not None)
            llm.add_tool_call("progress-weather__get_weather", {"city": "Kyiv"})
            llm.add_text("Mild.")
            events: list[tuple[str, dict[str, Any]]] = []

            async def agent() -> None:
                call = await peer.recv(timeout=20)
                await peer.send(
                    {
                        "type": "tool_progress",
                        "call_id": call["call_id"],
                        "message": "asking",
                        "progress": 0.5,
                    }
                )
                await peer.send(
                    {"type": "tool_result", "call_id": call["call_id"], "success": True, "result": 1}
                )

            serving = asyncio.create_task(agent())
            async with httpx.AsyncClient(base_url=b.base_url, timeout=30) as http:
                async with http.stream("POST", "/query", json={"query": "Kyiv?", "stream": True}) as response:
                    event = None
                    async for line in response.aiter_lines():
                        if line.startswith("event: "):
                            event = line[7:]
                        elif line.startswith("data: ") and event:
                            events.append((event, json.loads(line[6:])))
            await serving
        finally:
            await peer.close()
    progress = [data for name, data in events if name == "tool_progress"]
    assert progress and progress[0]["message"] == "asking" and progress[0]["agent_id"] == "progress-weather"
    assert events[-1][0] == "query_result" and events[-1][1]["answer"] == "Mild."


async def test_a_call_fails_at_once_when_its_agent_re_registers_on_the_other_master(
    llm: ScriptedOpenAIServer,
) -> None:
    # A lease long enough that A cannot be taken for dead before its agent is back on B (and short
    # enough that B sees the agent on A within a heartbeat, a third of it).
    env = {"OPENAGENT_MASTER_LEASE_SECONDS": "15", "TOOL_CALL_TIMEOUT": "300"}
    with (
        MasterProcess(master_env(llm, OPENAGENT_CLUSTER="1", OPENAGENT_MASTER_ID="master-a", **env)) as a,
        MasterProcess(master_env(llm, OPENAGENT_CLUSTER="1", OPENAGENT_MASTER_ID="master-b", **env)) as b,
    ):
        peer = await RawPeer.connect(a.ws_url)
        await peer.register("moving-weather", tools=[WEATHER_TOOL])
        await rows_until(b.base_url, lambda rows: row(rows, "moving-weather") is not None)
        llm.add_tool_call("moving-weather__get_weather", {"city": "Oslo"})
        llm.add_text("The weather service moved.")
        async with httpx.AsyncClient(base_url=b.base_url, timeout=120) as http:
            pending = asyncio.create_task(http.post("/query", json={"query": "Weather in Oslo?"}))
            await peer.recv(timeout=20)  # the call reached the agent through master A
            assert a.process is not None
            os.kill(a.process.pid, signal.SIGKILL)
            a.process.wait(timeout=10)
            again = await RawPeer.connect(b.ws_url)  # the agent reconnects, to master B
            try:
                await again.register("moving-weather", tools=[WEATHER_TOOL])
                body = (await pending).json()
            finally:
                await again.close()
        assert body["success"] is True, body
        error = json.loads(llm.requests[1]["messages"][-1]["content"])["error"]
        assert "reconnected elsewhere" in error and "'master-b'" in error and "'master-a'" in error
        assert "lease expired" not in error


async def test_a_call_paused_on_one_master_is_approved_on_the_other(llm: ScriptedOpenAIServer) -> None:
    """Issue 24: the run pauses on master A; a person decides on master B; B resumes the run and
    its approved call reaches the agent, which is connected to A, exactly once."""
    transfer = {
        "name": "transfer",
        "description": "Send money",
        "parameters": {
            "type": "object",
            "properties": {"to": {"type": "string"}, "amount": {"type": "number"}},
            "required": ["to", "amount"],
        },
        "requires_approval": True,
    }
    with (
        MasterProcess(cluster_env(llm, OPENAGENT_MASTER_ID="master-a")) as a,
        MasterProcess(cluster_env(llm, OPENAGENT_MASTER_ID="master-b")) as b,
    ):
        peer = await RawPeer.connect(a.ws_url)
        try:
            await peer.register("vault", tools=[transfer])
            await rows_until(b.base_url, lambda rows: row(rows, "vault") is not None)
            llm.add_tool_call("vault__transfer", {"to": "bob", "amount": 10})
            async with (
                httpx.AsyncClient(base_url=a.base_url, timeout=30) as on_a,
                httpx.AsyncClient(base_url=b.base_url, timeout=30) as on_b,
            ):
                paused = (await on_a.post("/query", json={"query": "pay Bob"})).json()
                assert paused["status"] == "awaiting_approval", paused
                approval_id = paused["approvals"][0]["approval_id"]
                listed = (await on_b.get("/approvals", params={"session_id": paused["session_id"]})).json()
                assert [x["approval_id"] for x in listed["approvals"]] == [approval_id]

                llm.add_text("Paid Bob 10.")
                deciding = asyncio.create_task(
                    on_b.post(f"/approvals/{approval_id}", json={"decision": "approve"})
                )
                call = await peer.recv(timeout=20)
                assert call["type"] == "tool_call" and call["arguments"] == {"to": "bob", "amount": 10}
                await peer.send(
                    {
                        "type": "tool_result",
                        "call_id": call["call_id"],
                        "success": True,
                        "result": {"sent": 10},
                    }
                )
                decided = await deciding
                assert decided.status_code == 200, decided.text
                assert decided.json()["answer"] == "Paid Bob 10."
                assert decided.json()["run_id"] == paused["run_id"]
                again = await on_a.post(f"/approvals/{approval_id}", json={"decision": "reject"})
                assert again.status_code == 409, again.text
                assert (await on_a.get(f"/runs/{paused['run_id']}")).json()["state"] == "completed"
        finally:
            await peer.close()
