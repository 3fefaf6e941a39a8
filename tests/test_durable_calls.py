"""Durable HTTP invocation calls: a call the agent accepted (202) outlives its master.

Real master processes on the tests' Redis and a small invocation agent served here, which
accepts each call and lets the test post the callback when it wants: after the master that
made the call was killed (kill -9) and restarted, or, with two masters, at the survivor. The
result then lands in the call's session once, however often it is delivered; a wrong token
is refused and consumes nothing. See docs/scale-out.md, "Durable invocation calls".
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from master.storage.redis_client import create_redis
from master.storage.redis_keys import call_record_key
from openagent.testing import ScriptedOpenAIServer
from tests.conftest import master_env
from tests.factories import MasterProcess, serve_app

LEASE = "1"
TOOL = {"name": "measure", "parameters": {"type": "object"}, "endpoint": "/run"}


@asynccontextmanager
async def accepting_agent() -> AsyncIterator[tuple[str, asyncio.Queue[dict[str, Any]]]]:
    """An invocation agent that answers 202 and queues each call; yields (base URL, calls)."""
    calls: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def run(request: Request) -> JSONResponse:
        await calls.put(await request.json())
        return JSONResponse({"accepted": True}, status_code=202)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    app = Starlette(routes=[Route("/health", health), Route("/run", run, methods=["POST"])])
    async with serve_app(app) as url:
        yield url, calls


def kill(master: MasterProcess) -> None:
    assert master.process is not None
    os.kill(master.process.pid, signal.SIGKILL)
    master.process.wait(timeout=10)


async def start_call(
    http: httpx.AsyncClient,
    master: MasterProcess,
    llm: ScriptedOpenAIServer,
    agent_id: str,
    agent_url: str,
    calls: asyncio.Queue[dict[str, Any]],
    then: str | None = None,
) -> tuple[str, dict[str, Any], asyncio.Task[httpx.Response]]:
    """Register the agent, open a session, and start a query whose tool call the agent accepts:
    (session id, the call as the agent received it, the query's pending request). ``then`` is
    the model's answer after the tool call."""
    registered = await http.post(
        f"{master.base_url}/register",
        json={"agent_id": agent_id, "invocation_base_url": agent_url, "tools": [TOOL]},
    )
    assert registered.status_code == 200, registered.text
    llm.add_text("Hello.")
    first = await http.post(f"{master.base_url}/query", json={"query": "hi", "allowed_agent_ids": []})
    session_id = first.json()["session_id"]
    llm.add_tool_call(f"{agent_id}__measure", {"what": "depth"})
    if then is not None:
        llm.add_text(then)
    pending = asyncio.create_task(
        http.post(
            f"{master.base_url}/query",
            json={"query": "How deep?", "session_id": session_id, "allowed_agent_ids": [agent_id]},
        )
    )
    async with asyncio.timeout(30):
        call = await calls.get()
    return session_id, call, pending


async def post_callback(
    http: httpx.AsyncClient, base_url: str, call: dict[str, Any], *, token: str | None = None
) -> httpx.Response:
    query_string = call["callback_url"].split("?", 1)[1]
    if token is not None:
        query_string = f"call_id={call['call_id']}&token={token}"
    return await http.post(
        f"{base_url}/tool_callback?{query_string}",
        json={"call_id": call["call_id"], "success": True, "result": {"depth_m": 42}},
    )


async def session_turns(http: httpx.AsyncClient, base_url: str, session_id: str) -> list[dict[str, Any]]:
    response = await http.get(f"{base_url}/sessions/{session_id}")
    assert response.status_code == 200, response.text
    turns: list[dict[str, Any]] = response.json()["turns"]
    return turns


def late_turns(turns: list[dict[str, Any]], call_id: str) -> list[dict[str, Any]]:
    return [turn for turn in turns if turn.get("call_id") == call_id]


async def test_a_callback_after_a_restart_is_recorded_once(llm: ScriptedOpenAIServer) -> None:
    agent_id = "durable-restart"
    env = master_env(llm)
    first = MasterProcess(env)
    async with accepting_agent() as (agent_url, calls), httpx.AsyncClient(timeout=60) as http:
        with first:
            session_id, call, pending = await start_call(http, first, llm, agent_id, agent_url, calls)
            kill(first)
            try:
                await pending
            except httpx.HTTPError:
                pass  # the query died with its master
        restarted = MasterProcess(env, port=first.port)  # the agent's callback_url names this port
        async with restarted:
            refused = await post_callback(http, restarted.base_url, call, token="not-the-token")
            assert refused.status_code == 404, refused.text

            recorded = await post_callback(http, restarted.base_url, call)
            assert recorded.status_code == 200, recorded.text
            assert recorded.json() == {
                "call_id": call["call_id"],
                "status": "recorded",
                "session_id": session_id,
            }
            again = await post_callback(http, restarted.base_url, call)
            assert again.status_code == 409, again.text
            assert "already recorded" in again.json()["detail"]

            turns = await session_turns(http, restarted.base_url, session_id)
            [late] = late_turns(turns, call["call_id"])
            assert late["late_callback"] is True and late["result"] == {"depth_m": 42}
            assert (late["tool_agent_id"], late["tool_name"], late["tool_args"]) == (
                agent_id,
                "measure",
                {"what": "depth"},
            )
            assert turns[0]["query"] == "hi" and len(turns) == 2  # the killed query stored nothing

            # The next query of the session tells the model what arrived.
            llm.add_text("It is 42 m deep.")
            follow = await http.post(
                f"{restarted.base_url}/query",
                json={"query": "So?", "session_id": session_id, "allowed_agent_ids": []},
            )
            assert follow.json()["answer"] == "It is 42 m deep."
            notes = [m.get("content") for m in llm.requests[-1]["messages"] if m["role"] == "system"]
            assert any(
                "returned" in str(n) and "42" in str(n) and "after its query had ended" in str(n)
                for n in notes
            )
            await http.post(f"{restarted.base_url}/unregister", json={"agent_id": agent_id})


async def test_a_call_that_outlives_the_drain_deadline_is_recorded_after_the_restart(
    llm: ScriptedOpenAIServer,
) -> None:
    """SIGTERM: the master drains, gives up on the accepted call at its deadline (the query
    answers with that error), stops; the agent's callback, at the restarted master, is recorded."""
    agent_id = "durable-drain"
    env = master_env(llm, OPENAGENT_DRAIN_SECONDS="1")
    first = MasterProcess(env)
    async with accepting_agent() as (agent_url, calls), httpx.AsyncClient(timeout=60) as http:
        with first:
            session_id, call, pending = await start_call(
                http, first, llm, agent_id, agent_url, calls, then="The service will answer later."
            )
            assert first.process is not None
            first.process.send_signal(signal.SIGTERM)
            body = (await pending).json()
            assert body["answer"] == "The service will answer later.", body
            error = json.loads(llm.requests[-1]["messages"][-1]["content"])["error"]
            assert "drain deadline" in error and "will be recorded in the session" in error, error
            await asyncio.to_thread(first.process.wait, 60)
            first_log = first.log()
        redis = create_redis(first.env["REDIS_URL"])
        try:  # the query stored its error turn; the call's record stays pending for the callback
            assert await redis.hget(call_record_key(call["call_id"]), "state") == "pending", first_log
        finally:
            await redis.aclose()
        async with MasterProcess(env, port=first.port) as restarted:
            answer = await post_callback(http, restarted.base_url, call)
            assert answer.status_code == 200, answer.text
            assert answer.json()["status"] == "recorded"
            turns = await session_turns(http, restarted.base_url, session_id)
            stored = [t for t in turns if t.get("decision") == "call_tool" and not t.get("late_callback")]
            assert [t["error"] for t in stored] == [error]  # the query's own turn: the master gave up
            [late] = late_turns(turns, call["call_id"])
            assert late["result"] == {"depth_m": 42}
            await http.post(f"{restarted.base_url}/unregister", json={"agent_id": agent_id})


async def test_a_callback_of_a_call_its_query_finished_is_refused(llm: ScriptedOpenAIServer) -> None:
    """The query stored the call's outcome (here: it timed out): a late callback changes nothing."""
    agent_id = "durable-timeout"
    async with (
        accepting_agent() as (agent_url, calls),
        httpx.AsyncClient(timeout=60) as http,
        MasterProcess(master_env(llm, TOOL_CALL_TIMEOUT="1")) as master,
    ):
        session_id, call, pending = await start_call(
            http, master, llm, agent_id, agent_url, calls, then="It timed out."
        )
        assert (await pending).json()["success"] is True
        turns = await session_turns(http, master.base_url, session_id)
        late = await post_callback(http, master.base_url, call)
        assert late.status_code == 410, late.text
        assert await session_turns(http, master.base_url, session_id) == turns
        await http.post(f"{master.base_url}/unregister", json={"agent_id": agent_id})


def cluster_env(llm: ScriptedOpenAIServer, master_id: str) -> dict[str, str]:
    return master_env(
        llm, OPENAGENT_CLUSTER="1", OPENAGENT_MASTER_LEASE_SECONDS=LEASE, OPENAGENT_MASTER_ID=master_id
    )


async def test_a_callback_at_the_survivor_of_two_masters_is_recorded(llm: ScriptedOpenAIServer) -> None:
    agent_id = "durable-cluster"
    async with (
        accepting_agent() as (agent_url, calls),
        httpx.AsyncClient(timeout=60) as http,
        MasterProcess(cluster_env(llm, "durable-b")) as survivor,
    ):
        doomed = MasterProcess(cluster_env(llm, "durable-a"))
        with doomed:
            session_id, call, pending = await start_call(http, doomed, llm, agent_id, agent_url, calls)
            kill(doomed)
            try:
                await pending
            except httpx.HTTPError:
                pass
        # A load balancer sends the callback to the other master. Until the dead master's lease
        # expires it is forwarded there and unanswered (503: the agent retries); then recorded.
        async with asyncio.timeout(60):
            while True:
                answer = await post_callback(http, survivor.base_url, call)
                if answer.status_code != 503:
                    break
                await asyncio.sleep(0.2)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"call_id": call["call_id"], "status": "recorded", "session_id": session_id}
        again = await post_callback(http, survivor.base_url, call)
        assert again.status_code == 409, again.text
        [late] = late_turns(await session_turns(http, survivor.base_url, session_id), call["call_id"])
        assert late["result"] == {"depth_m": 42} and late["late_callback"] is True
        await http.post(f"{survivor.base_url}/unregister", json={"agent_id": agent_id})


async def test_a_callback_at_the_other_live_master_completes_the_query(llm: ScriptedOpenAIServer) -> None:
    """The client still waits on the master that made the call: the callback is forwarded there,
    the query completes with it; a repeat after the query stored its turns is refused (410)."""
    agent_id = "durable-forward"
    async with (
        accepting_agent() as (agent_url, calls),
        httpx.AsyncClient(timeout=60) as http,
        MasterProcess(cluster_env(llm, "durable-c")) as holder,
        MasterProcess(cluster_env(llm, "durable-d")) as other,
    ):
        session_id, call, pending = await start_call(
            http, holder, llm, agent_id, agent_url, calls, then="42 m."
        )
        forwarded = await post_callback(http, other.base_url, call)
        assert forwarded.json() == {"call_id": call["call_id"], "status": "forwarded"}
        body = (await pending).json()
        assert body["success"] is True and body["answer"] == "42 m."
        repeat = await post_callback(http, other.base_url, call)
        assert repeat.status_code == 410, repeat.text
        turns = await session_turns(http, other.base_url, session_id)
        assert [t.get("result") for t in turns if t.get("decision") == "call_tool"] == [{"depth_m": 42}]
        assert not any(t.get("late_callback") for t in turns)
        await http.post(f"{holder.base_url}/unregister", json={"agent_id": agent_id})


async def test_a_holder_restarted_under_its_fixed_id_records_the_forwarded_callback(
    llm: ScriptedOpenAIServer,
) -> None:
    """OPENAGENT_MASTER_ID is fixed: the restarted holder has a live lease again, so the other
    master forwards the callback to it; the call is not in its memory, so it records it."""
    agent_id = "durable-same-id"
    async with (
        accepting_agent() as (agent_url, calls),
        httpx.AsyncClient(timeout=60) as http,
        MasterProcess(cluster_env(llm, "durable-f")) as other,
    ):
        holder = MasterProcess(cluster_env(llm, "durable-e"))
        with holder:
            session_id, call, pending = await start_call(http, holder, llm, agent_id, agent_url, calls)
            kill(holder)
            try:
                await pending
            except httpx.HTTPError:
                pass
        async with MasterProcess(cluster_env(llm, "durable-e"), port=holder.port) as restarted:
            answer = await post_callback(http, other.base_url, call)
            assert answer.status_code == 200, answer.text
            assert answer.json() == {
                "call_id": call["call_id"],
                "status": "recorded",
                "session_id": session_id,
            }
            assert f"forwarded callback of call {call['call_id']}: recorded" in restarted.log()
            again = await post_callback(http, restarted.base_url, call)
            assert again.status_code == 409, again.text
            [late] = late_turns(await session_turns(http, restarted.base_url, session_id), call["call_id"])
            assert late["result"] == {"depth_m": 42}
            await http.post(f"{restarted.base_url}/unregister", json={"agent_id": agent_id})
