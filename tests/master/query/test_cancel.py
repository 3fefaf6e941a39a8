"""One cancel for every door (:mod:`master.runs.cancel`), through the real app: a real master
(lifespan, Redis, uvicorn on loopback), the scripted LLM, raw WebSocket peers (an action agent
whose tool never answers by itself, a query client) and the keys of tenants ``a`` and ``b``.

- a WebSocket ``cancel`` frame stops a query of its connection (by ``query_id``) or any run of its
  tenant (by ``run_id``), answered with the run's state; an unknown or another tenant's run is an
  ``error`` naming it, and another tenant's ``DELETE /runs/{run_id}`` is ``404`` too;
- a paused run (awaiting approval, awaiting tool results, stopped by a budget) is cancelled in
  the store: its approvals are withdrawn, and it never resumes.

The cancel of a run held by another master is in ``test_runs.py``; the doors' own cancels in
their tests (``test_openai_responses.py``, ``test_a2a_server.py``, ``test_mcp_server.py``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from master.storage.redis_keys import RUNS_RUNNING_KEY
from openagent.testing import ScriptedOpenAIServer
from tests.factories import InProcessMaster, RawPeer, in_process_master
from tests.master.test_tenants import ADMIN, GATED, as_tenant, keyed_master

DEADLINE = 60
WAIT = {"name": "wait", "description": "Waits until told", "parameters": {"type": "object", "properties": {}}}


@pytest.fixture
async def hub(llm: ScriptedOpenAIServer) -> AsyncIterator[InProcessMaster]:
    async with keyed_master(openai_base_url=llm.base_url, openai_api_key="scripted") as master:
        yield master


def http(master: InProcessMaster, tenant: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=master.base_url, headers=as_tenant(tenant), timeout=DEADLINE)


async def frames_until(peer: RawPeer, wanted: set[str], count: int = 1) -> dict[str, dict[str, Any]]:
    """The next frames of the ``wanted`` types (``count`` of them), by type."""
    found: dict[str, dict[str, Any]] = {}
    async with asyncio.timeout(DEADLINE):
        while len(found) < count:
            frame = await peer.recv(DEADLINE)
            if frame["type"] in wanted:
                found[frame["type"]] = frame
    return found


async def running_run(redis_client: aioredis.Redis, but: set[str]) -> str:
    """The id of a running run not in ``but`` (the tests' Redis outlives each master)."""
    async with asyncio.timeout(DEADLINE):
        while True:
            for run_id in sorted(await redis_client.smembers(RUNS_RUNNING_KEY)):
                record = json.loads(await redis_client.get(f"run:{run_id}") or "{}")
                if run_id not in but and record.get("state") == "running" and record.get("in_flight"):
                    return str(run_id)
            await asyncio.sleep(0.05)


async def test_a_websocket_cancel_stops_a_query_and_refuses_what_it_does_not_see(
    hub: InProcessMaster, llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    before = set(await redis_client.smembers(RUNS_RUNNING_KEY))
    agent = await RawPeer.connect(hub.ws_url, additional_headers=ADMIN)  # a shared agent
    asker = await RawPeer.connect(hub.ws_url, additional_headers=as_tenant("a"))
    stranger = await RawPeer.connect(hub.ws_url, additional_headers=as_tenant("b"))
    try:
        await agent.register("waiter", tools=[WAIT])
        await asker.register("a-asker", role="query")
        await stranger.register("b-asker", role="query")
        llm.add_tool_call("waiter__wait", {})
        await asker.send({"type": "query", "query_id": "q-1", "query": "wait for it"})
        call = (await frames_until(agent, {"tool_call"}))["tool_call"]
        run_id = await running_run(redis_client, before)

        # Another tenant: unknown, through every way of asking; the run goes on.
        await stranger.send({"type": "cancel", "run_id": run_id})
        refused = (await frames_until(stranger, {"error"}))["error"]
        assert (refused["code"], refused["ref"]) == ("unknown_run", run_id), refused
        async with http(hub, "b") as b:
            gone = await b.delete(f"/runs/{run_id}")
        assert gone.status_code == 404 and gone.json()["error_code"] == "unknown_run"
        await stranger.send({"type": "cancel", "query_id": "q-1"})  # not its connection's query
        refused = (await frames_until(stranger, {"error"}))["error"]
        assert (refused["code"], refused["ref"]) == ("unknown_run", "q-1"), refused
        async with http(hub, "a") as a:
            assert (await a.get(f"/runs/{run_id}")).json()["state"] == "running"

        # Its own query, by query_id: the run stops, the query's answer says so.
        await asker.send({"type": "cancel", "query_id": "q-1"})
        got = await frames_until(asker, {"cancel_result", "query_result"}, count=2)
        assert got["cancel_result"] == {
            "type": "cancel_result",
            "run_id": run_id,
            "query_id": "q-1",
            "state": "cancelled",
            "reason": "cancelled by a client",
        }
        result = got["query_result"]
        assert (result["success"], result["error_code"], result["run_id"]) == (False, "run_cancelled", run_id)
        cancel = (await frames_until(agent, {"tool_cancel"}))["tool_cancel"]
        assert cancel["call_id"] == call["call_id"]
        async with http(hub, "a") as a:
            record = (await a.get(f"/runs/{run_id}")).json()
        assert record["state"] == "cancelled" and [c["name"] for c in record["unknown"]] == ["waiter__wait"]

        # Again, by run_id: the same record (idempotent). Unknown ones are errors naming them.
        await asker.send({"type": "cancel", "run_id": run_id})
        again = await frames_until(asker, {"cancel_result", "error"})
        assert again["cancel_result"]["state"] == "cancelled", again
        await asker.send({"type": "cancel", "query_id": "q-1"})  # answered already
        assert (await frames_until(asker, {"error"}))["error"]["ref"] == "q-1"
        await asker.send({"type": "cancel", "run_id": "run-nope"})
        unknown = (await frames_until(asker, {"error"}))["error"]
        assert (unknown["code"], unknown["ref"]) == ("unknown_run", "run-nope") and "run-nope" in unknown[
            "message"
        ]
        await asker.send({"type": "cancel"})
        invalid = (await frames_until(asker, {"error"}))["error"]
        assert invalid["code"] == "invalid_message" and "query_id" in invalid["message"], invalid

        # A finished run: run_not_running, naming its state.
        llm.add_text("Done.")
        await asker.send({"type": "query", "query_id": "q-2", "query": "hi"})
        done = (await frames_until(asker, {"query_result"}))["query_result"]
        await asker.send({"type": "cancel", "run_id": done["run_id"]})
        finished = (await frames_until(asker, {"error"}))["error"]
        assert finished["code"] == "run_not_running" and "completed" in finished["message"], finished
    finally:
        for peer in (agent, asker, stranger):
            await peer.close()


async def test_a_run_awaiting_approval_is_cancelled_and_its_approvals_withdrawn(
    hub: InProcessMaster, llm: ScriptedOpenAIServer
) -> None:
    bank = await RawPeer.connect(hub.ws_url, additional_headers=ADMIN)
    try:
        await bank.register("bank", tools=[GATED])
        llm.add_tool_call("bank__wire", {"to": "bob"})
        async with http(hub, "a") as a, http(hub, "b") as b:
            paused = (await a.post("/query", json={"query": "pay bob"})).json()
            assert paused["status"] == "awaiting_approval", paused
            run_id = paused["run_id"]
            [approval] = paused["approvals"]
            assert (await b.delete(f"/runs/{run_id}")).status_code == 404  # another tenant's
            assert (await a.get(f"/runs/{run_id}")).json()["state"] == "awaiting_approval"

            cancelled = await a.delete(f"/runs/{run_id}")
            assert cancelled.status_code == 200, cancelled.text
            record = cancelled.json()
            assert record["state"] == "cancelled" and record["resumable"] is False
            assert "awaiting_approval" in record["reason"] and "DELETE /runs" in record["reason"]
            withdrawn = (await a.get(f"/approvals/{approval['approval_id']}")).json()
            assert (withdrawn["status"], withdrawn["message"]) == (
                "rejected",
                "withdrawn: the run was cancelled",
            )
            late = await a.post(f"/approvals/{approval['approval_id']}", json={"decision": "approve"})
            assert late.status_code == 409 and late.json()["error_code"] == "approval_decided", late.text
            resumed = await a.post(f"/approvals/{approval['approval_id']}/resume")
            assert resumed.status_code == 200 and "cancelled" in resumed.json()["answer"], resumed.text
            assert (await a.get(f"/runs/{run_id}")).json()["state"] == "cancelled"
            again = await a.delete(f"/runs/{run_id}")
            assert again.status_code == 200 and again.json()["state"] == "cancelled"
        with pytest.raises(TimeoutError):  # the call never reached the agent
            await bank.recv(timeout=0.5)
    finally:
        await bank.close()


async def test_a_run_stopped_by_its_budget_is_cancelled_and_never_resumes(
    hub: InProcessMaster, llm: ScriptedOpenAIServer
) -> None:
    agent = await RawPeer.connect(hub.ws_url, additional_headers=ADMIN)
    try:
        await agent.register("stepper", tools=[WAIT])
        llm.add_tool_call("stepper__wait", {})
        llm.add_tool_call("stepper__wait", {})  # asked for, over the budget: not run
        async with http(hub, "a") as a:
            body = {"query": "go", "auto_mode": True, "budget": {"max_tool_calls": 1}}
            asking = asyncio.create_task(a.post("/query", json=body))
            call = (await frames_until(agent, {"tool_call"}))["tool_call"]
            await agent.send(
                {"type": "tool_result", "call_id": call["call_id"], "success": True, "result": 1}
            )
            stopped = (await asking).json()
            assert stopped["status"] == "stopped", stopped
            run_id = stopped["run_id"]
            assert (await a.get(f"/runs/{run_id}")).json()["resumable"] is True

            cancelled = await a.delete(f"/runs/{run_id}")
            assert cancelled.status_code == 200, cancelled.text
            assert cancelled.json()["state"] == "cancelled" and "stopped" in cancelled.json()["reason"]
            assert (await a.get(f"/runs/{run_id}")).json()["resumable"] is False
            resume = await a.post(f"/runs/{run_id}/resume", json={"budget": {"max_tool_calls": 5}})
            assert resume.status_code == 409 and resume.json()["error_code"] == "run_not_resumable"
            assert "cancelled" in resume.json()["detail"]
    finally:
        await agent.close()


async def test_a_run_awaiting_tool_results_is_cancelled_and_the_results_go_nowhere(
    hub: InProcessMaster, llm: ScriptedOpenAIServer
) -> None:
    clock = {
        "type": "function",
        "function": {"name": "local_time", "parameters": {"type": "object", "properties": {}}},
    }
    llm.add_tool_call("local_time", {}, call_id="call_clock")
    async with http(hub, "a") as a:
        body = {"model": "openagent", "messages": [{"role": "user", "content": "time?"}], "tools": [clock]}
        paused = await a.post("/v1/chat/completions", json=body)
        assert paused.status_code == 200, paused.text
        run_id = paused.json()["openagent"]["run_id"]
        assert (await a.get(f"/runs/{run_id}")).json()["state"] == "awaiting_tool_results"

        cancelled = await a.delete(f"/runs/{run_id}")
        assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled", cancelled.text
        results = {
            "model": "openagent",
            "messages": [
                {"role": "user", "content": "time?"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_clock",
                            "type": "function",
                            "function": {"name": "local_time", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_clock", "content": "10:30"},
            ],
            "tools": [clock],
        }
        late = await a.post("/v1/chat/completions", json=results)
        assert late.status_code == 400 and "waits for tool results" in late.text, late.text
        assert (await a.get(f"/runs/{run_id}")).json()["state"] == "cancelled"


async def test_a2a_and_websocket_cancels_on_one_master_stop_runs_the_other_holds(
    llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    """Two masters on one Redis: A2A ``CancelTask`` and a WebSocket ``cancel`` (by ``run_id``) on
    master B stop runs master A holds; the A2A task ends ``CANCELED`` on both, the HTTP asker on A
    gets ``run_cancelled``, every record says ``cancelled``."""
    from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest, SendMessageRequest, TaskState

    from tests.master.doors.test_a2a_server import KEY, a2a_client, state_of, text_message
    from tests.master.query.test_runs import works_agent

    calls: list[tuple[str, dict[str, Any]]] = []
    release = asyncio.Event()
    settings: dict[str, Any] = {"openai_base_url": llm.base_url, "openai_api_key": "scripted"}
    headers = {"Authorization": f"Bearer {KEY}"}
    async with (
        in_process_master(openagent_master_id="cancel2-a", openagent_api_key=KEY, **settings) as a,
        in_process_master(openagent_master_id="cancel2-b", openagent_api_key=KEY, **settings) as b,
        works_agent(a.ws_url, calls, release, key=KEY) as slow_started,
        httpx.AsyncClient(base_url=a.base_url, headers=headers, timeout=DEADLINE) as on_a,
        httpx.AsyncClient(base_url=b.base_url, headers=headers, timeout=DEADLINE) as on_b,
    ):
        async with asyncio.timeout(DEADLINE):
            while (await on_a.get("/a2a/agents/works/.well-known/agent-card.json")).status_code != 200:
                await asyncio.sleep(0.05)
        llm.add_tool_call("works__slow", {})
        async with a2a_client(a.base_url, streaming=True) as a2a_a, a2a_client(b.base_url) as a2a_b:
            stream = a2a_a.send_message(SendMessageRequest(message=text_message("slowly")))
            task_id = (await anext(stream)).task.id
            async with asyncio.timeout(DEADLINE):
                await slow_started.wait()
            working = await a2a_b.get_task(GetTaskRequest(id=task_id))
            run_id = working.metadata["openagent_run_id"]
            canceled = await a2a_b.cancel_task(CancelTaskRequest(id=task_id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
            async with asyncio.timeout(DEADLINE):
                rest = [r async for r in stream]
            await stream.aclose()
            assert state_of(rest[-1]) == TaskState.TASK_STATE_CANCELED
            record = (await on_b.get(f"/runs/{run_id}")).json()
            assert record["state"] == "cancelled" and record["holder"] == "cancel2-a", record

        before = set(await redis_client.smembers(RUNS_RUNNING_KEY))
        llm.add_tool_call("works__slow", {})
        asking = asyncio.create_task(on_a.post("/query", json={"query": "slowly again"}))
        run_id = await running_run(redis_client, before)
        peer = await RawPeer.connect(b.ws_url, additional_headers=headers)
        try:
            await peer.register("b-asker", role="query")
            await peer.send({"type": "cancel", "run_id": run_id})
            result = await frames_until(peer, {"cancel_result", "error"})
            assert result["cancel_result"]["state"] == "cancelled", result
        finally:
            await peer.close()
        answer = await asking
        assert answer.status_code == 409 and answer.json()["error_code"] == "run_cancelled", answer.text
        assert (await on_a.get(f"/runs/{run_id}")).json()["state"] == "cancelled"
        release.set()
    assert calls == [("slow", {}), ("slow", {})]
