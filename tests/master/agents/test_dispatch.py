"""The dispatcher, in process: call ids, results, failures, disconnects, timeouts, HTTP callbacks.

A call always ends for a reason the caller can tell apart: its result, the tool's failure, the
agent's disconnect (at once, by :meth:`Dispatcher.fail_agent`), or the timeout.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from master.agents.frames import tool_call_frame
from master.agents.invocation import InvocationAgent
from master.agents.pending import MAX_PROGRESS_MESSAGE_CHARS
from master.agents.registrations import InvocationRegistration
from master.errors import AgentDisconnected, AgentUnavailable, ToolFailed, ToolTimeout
from master.storage.json_bytes import dump_json
from openagent.testing import ScriptedOpenAIServer
from protocol import ToolCall, ToolProgress, ToolResult
from tests.conftest import master_env
from tests.factories import (
    WEATHER_TOOL,
    MasterProcess,
    RawPeer,
    answering_agent,
    dispatcher_for_tests,
    free_port,
    serve_app,
)

ECHO = {"name": "echo", "parameters": {"type": "object"}}


async def test_a_result_reaches_the_caller_with_its_own_call_id() -> None:
    calls: list[ToolCall] = []
    async with dispatcher_for_tests() as dispatcher:
        agent = answering_agent(dispatcher, "echo", [ECHO], lambda name, args: {"echo": args}, calls=calls)
        started: list[str] = []
        results = await asyncio.gather(
            *(dispatcher.call(agent, "echo", {"n": n}, on_started=started.append) for n in range(20))
        )
    assert results == [{"echo": {"n": n}} for n in range(20)]
    assert len({call.call_id for call in calls}) == 20 and sorted(started) == sorted(c.call_id for c in calls)


async def test_tool_failure_names_tool_agent_and_error() -> None:
    async with dispatcher_for_tests() as dispatcher:
        calls: list[ToolCall] = []
        agent = answering_agent(dispatcher, "weather", [WEATHER_TOOL], calls=calls)
        pending = asyncio.create_task(dispatcher.call(agent, "get_weather", {"city": "x"}))
        await wait_for(lambda: bool(calls))
        result = ToolResult(call_id=calls[0].call_id, success=False, error="upstream down")
        assert dispatcher.resolve(agent, result)
        with pytest.raises(ToolFailed, match="tool 'get_weather' on agent 'weather' failed: upstream down"):
            await pending
        assert not dispatcher.resolve(agent, result)  # finished: nothing to resolve


async def test_only_the_called_connection_resolves_a_call() -> None:
    async with dispatcher_for_tests() as dispatcher:
        calls: list[ToolCall] = []
        agent = answering_agent(dispatcher, "a", [ECHO], calls=calls)
        impostor = answering_agent(dispatcher, "a", [ECHO])  # same id, another connection
        pending = asyncio.create_task(dispatcher.call(agent, "echo", {}))
        await wait_for(lambda: bool(calls))
        forged = ToolResult(call_id=calls[0].call_id, success=True, result="evil")
        assert not dispatcher.resolve(impostor, forged)
        assert not dispatcher.progress(impostor, ToolProgress(call_id=calls[0].call_id, message="x"))
        assert dispatcher.resolve(agent, ToolResult(call_id=calls[0].call_id, success=True, result="ok"))
        assert await pending == "ok"


async def test_disconnect_fails_in_flight_calls_at_once_not_by_timeout() -> None:
    async with dispatcher_for_tests(call_timeout=3600) as dispatcher:
        calls: list[ToolCall] = []
        agent = answering_agent(dispatcher, "dies", [ECHO], calls=calls)
        other = answering_agent(dispatcher, "lives", [ECHO], calls=calls)
        doomed = [asyncio.create_task(dispatcher.call(agent, "echo", {"n": n})) for n in range(3)]
        survivor = asyncio.create_task(dispatcher.call(other, "echo", {}))
        await wait_for(lambda: len(calls) == 4)
        assert dispatcher.fail_agent(agent, "disconnected") == 3
        for task in doomed:
            with pytest.raises(
                AgentDisconnected, match="agent 'dies' disconnected while running tool 'echo'"
            ):
                await task
        assert not survivor.done()
        survivor_call = next(c for c in calls if c.arguments == {})
        dispatcher.resolve(other, ToolResult(call_id=survivor_call.call_id, success=True, result=1))
        assert await survivor == 1


async def test_a_send_on_a_closed_connection_is_a_disconnect() -> None:
    async with dispatcher_for_tests() as dispatcher:
        agent = answering_agent(dispatcher, "gone", [ECHO])

        async def broken(frame: str) -> None:
            raise ConnectionResetError("closed")

        agent.send = broken
        with pytest.raises(AgentDisconnected, match="disconnected before receiving the call"):
            await dispatcher.call(agent, "echo", {})


async def test_timeout_names_the_tool_and_the_limit_and_late_results_are_refused() -> None:
    async with dispatcher_for_tests(call_timeout=0.05) as dispatcher:
        calls: list[ToolCall] = []
        agent = answering_agent(dispatcher, "slow", [ECHO], calls=calls)  # never answers
        with pytest.raises(ToolTimeout, match="tool 'echo' on agent 'slow' gave no result within 0.05 s"):
            await dispatcher.call(agent, "echo", {})
        late = ToolResult(call_id=calls[0].call_id, success=True, result="late")
        assert not dispatcher.resolve(agent, late)
        assert dispatcher.latest_progress(calls[0].call_id) == (None, False)
        assert dispatcher.latest_progress("never-seen") is None


async def test_progress_is_recorded_and_forwarded() -> None:
    async with dispatcher_for_tests() as dispatcher:
        calls: list[ToolCall] = []
        seen: list[ToolProgress] = []
        agent = answering_agent(dispatcher, "p", [ECHO], calls=calls)
        pending = asyncio.create_task(dispatcher.call(agent, "echo", {}, on_progress=seen.append))
        await wait_for(lambda: bool(calls))
        progress = ToolProgress(call_id=calls[0].call_id, message="half", progress=0.5)
        assert dispatcher.progress(agent, progress)
        assert dispatcher.latest_progress(calls[0].call_id) == (progress, True)
        dispatcher.resolve(agent, ToolResult(call_id=calls[0].call_id, success=True, result=None))
        await pending
        assert seen == [progress]
        assert dispatcher.latest_progress(calls[0].call_id) == (progress, False)


async def test_http_agent_gets_a_callback_url_with_a_per_call_token() -> None:
    received: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def invoke(request: Request) -> JSONResponse:
        await received.put(await request.json())
        return JSONResponse({"accepted": True}, status_code=202)

    async with serve_app(Starlette(routes=[Route("/run", invoke, methods=["POST"])])) as url:
        tool = {**ECHO, "endpoint": "/run"}
        registration = InvocationRegistration(agent_id="http-a", invocation_base_url=url, tools=[tool])
        agent = InvocationAgent.from_registration(registration)
        async with dispatcher_for_tests() as dispatcher:
            pending = asyncio.create_task(dispatcher.call(agent, "echo", {"x": 1}))
            async with asyncio.timeout(30):
                body = await received.get()
            assert body["arguments"] == {"x": 1} and body["tool_name"] == "echo"
            token = body["callback_url"].split("token=", 1)[1]
            assert body["callback_url"].startswith("http://127.0.0.1:9/tool_callback?call_id=")
            result = ToolResult(call_id=body["call_id"], success=True, result={"ok": True})
            assert dispatcher.resolve_callback("forged", result) == "unknown"
            assert dispatcher.resolve_callback(token, result) == "accepted"
            assert await pending == {"ok": True}
            assert dispatcher.resolve_callback(token, result) == "duplicate"


async def test_unreachable_http_agent_is_unavailable_and_marked_down() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    registration = InvocationRegistration(agent_id="http-gone", invocation_base_url=url, tools=[ECHO])
    agent = InvocationAgent.from_registration(registration)
    async with dispatcher_for_tests() as dispatcher:
        with pytest.raises(AgentUnavailable, match="agent 'http-gone' is unreachable"):
            await dispatcher.call(agent, "echo", {})
    assert agent.status == "DOWN"


async def test_http_refusal_is_a_tool_failure_naming_the_status() -> None:
    async def refuse(request: Request) -> JSONResponse:
        return JSONResponse({"detail": "no such tool"}, status_code=404)

    async with serve_app(Starlette(routes=[Route("/invoke", refuse, methods=["POST"])])) as url:
        registration = InvocationRegistration(agent_id="http-no", invocation_base_url=url, tools=[ECHO])
        agent = InvocationAgent.from_registration(registration)
        async with dispatcher_for_tests() as dispatcher:
            with pytest.raises(
                ToolFailed, match=r"refused the call to 'echo': HTTP 404 .*no such tool"
            ) as info:
                await dispatcher.call(agent, "echo", {})
    assert "agent 'http-no'" in str(info.value)


async def wait_for(predicate: Any) -> None:
    async with asyncio.timeout(30):
        while not predicate():
            await asyncio.sleep(0)


# A real master: an invocation agent that dies with calls in flight (issue 10, defect 4).

ECHO_TOOL = {
    "name": "echo",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
    "endpoint": "/run",
}


def accepting_agent(calls: asyncio.Queue[dict[str, Any]]) -> Starlette:
    """An invocation agent that accepts every call with 202 and never calls back."""

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def run(request: Request) -> JSONResponse:
        await calls.put(await request.json())
        return JSONResponse({"accepted": True}, status_code=202)

    return Starlette(routes=[Route("/health", health), Route("/run", run, methods=["POST"])])


async def test_an_invocation_agent_that_dies_mid_call_fails_the_call_at_once(
    scripted_llm: ScriptedOpenAIServer,
) -> None:
    """Defect 4: the agent accepted the call (202), then died; the call fails on the next health check,
    naming the agent, long before TOOL_CALL_TIMEOUT (120 s here)."""
    scripted_llm.reset()
    env = master_env(scripted_llm, TOOL_CALL_TIMEOUT="120", OPENAGENT_INFLIGHT_HEALTH_INTERVAL="0.5")
    calls: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    async with MasterProcess(env) as m, httpx.AsyncClient(base_url=m.base_url, timeout=60) as http:
        async with serve_app(accepting_agent(calls)) as url:
            body = {"agent_id": "dies-mid-call", "invocation_base_url": url, "tools": [ECHO_TOOL]}
            assert (await http.post("/register", json=body)).status_code == 200
            scripted_llm.add_tool_call("dies-mid-call__echo", {"text": "x"})
            scripted_llm.add_text("The agent died.")
            query = asyncio.create_task(
                http.post("/query", json={"query": "echo", "allowed_agent_ids": ["dies-mid-call"]})
            )
            async with asyncio.timeout(60):
                await calls.get()
        # the agent's server is gone: its port refuses connections
        response = await query
        assert response.status_code == 200, response.text
        error = json.loads(scripted_llm.requests[1]["messages"][-1]["content"])["error"]
        assert "dies-mid-call" in error and "health check" in error, error
        assert "no result within" not in error
        await http.post("/unregister", json={"agent_id": "dies-mid-call"})  # the test Redis is shared
    scripted_llm.reset()


async def test_a_huge_progress_message_is_capped_and_cannot_forge_log_lines(
    master: MasterProcess, llm: ScriptedOpenAIServer
) -> None:
    """Defect 8: 20 progress messages of 1 MiB with embedded newlines add a few kB to the log, on
    lines of their own; the message kept for ``GET /tool_progress`` is capped too."""
    peer = await RawPeer.connect(master.ws_url)
    try:
        await peer.register("progress-flood", tools=[WEATHER_TOOL])
        llm.add_tool_call("progress-flood__get_weather", {"city": "x"})
        llm.add_text("done")
        async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
            query = asyncio.create_task(
                http.post("/query", json={"query": "w", "allowed_agent_ids": ["progress-flood"]})
            )
            call = await peer.recv(timeout=15)
            before = master.log_path.stat().st_size
            flood = "step\n2024-01-01 00:00:00 CRITICAL forged-line " + "x" * (1 << 20)
            for _ in range(20):
                await peer.send({"type": "tool_progress", "call_id": call["call_id"], "message": flood})
            await peer.send({"type": "tool_progress", "call_id": call["call_id"], "message": "last"})
            for _ in range(100):  # the master handles a connection's frames in order
                latest = (await http.get(f"/tool_progress/{call['call_id']}")).json()
                if latest["message"] == "last":
                    break
                await asyncio.sleep(0.05)
            await peer.send({"type": "tool_progress", "call_id": call["call_id"], "message": flood})
            for _ in range(100):
                latest = (await http.get(f"/tool_progress/{call['call_id']}")).json()
                if latest["message"] != "last":
                    break
                await asyncio.sleep(0.05)
            assert len(latest["message"]) <= MAX_PROGRESS_MESSAGE_CHARS + 50
            await peer.send({"type": "tool_result", "call_id": call["call_id"], "success": True})
            assert (await query).status_code == 200
        grown = master.log_path.stat().st_size - before
        assert grown < 64 * 1024, grown
        lines = master.log_path.read_text(errors="replace").splitlines()
        assert not any("CRITICAL forged-line" in line and "progress" not in line for line in lines)
    finally:
        await peer.close()


async def test_finished_calls_are_forgotten_after_twice_the_call_timeout() -> None:
    """The memory of finished calls (duplicate and late callbacks) is bounded by time as well as
    by count, so it stops growing under a steady load (the RSS creep of the 3-minute load run)."""
    import aiohttp

    from master.agents.dispatch import Dispatcher
    from master.agents.invocation import InvocationAgents

    now = [1000.0]
    async with aiohttp.ClientSession() as http:
        invocation = InvocationAgents(None, http, ttl_seconds=1, health_timeout=1)  # type: ignore[arg-type]
        dispatcher = Dispatcher(
            http=http,
            invocation=invocation,
            master_base_url="http://127.0.0.1:9",
            call_timeout=10,
            invoke_timeout=1,
            clock=lambda: now[0],
        )
        agent = answering_agent(dispatcher, "mem", [ECHO], lambda name, args: args)
        first = []
        await dispatcher.call(agent, "echo", {}, on_started=first.append)
        assert dispatcher.latest_progress(first[0]) == (None, False)  # remembered as finished
        now[0] += 21  # more than 2 x TOOL_CALL_TIMEOUT later
        for _ in range(5):
            await dispatcher.call(agent, "echo", {})
        assert dispatcher.latest_progress(first[0]) is None  # forgotten
        assert len(dispatcher._finished) == 5
        await dispatcher.aclose()


@pytest.mark.parametrize("traceparent", [None, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"])
def test_the_tool_call_frame_is_the_protocols_byte_for_byte(traceparent: str | None) -> None:
    """The frame a WebSocket tool call sends is built without the pydantic model: it must be the
    bytes ``ToolCall`` would give (fields, order, nulls kept inside the arguments, numbers,
    non-ASCII text)."""
    arguments = {"text": "héllo", "none": None, "nested": {"a": [1, 2.5, 1e16, -0.0], "b": True}}
    model = ToolCall(call_id="c1", tool_name="echo", arguments=arguments, traceparent=traceparent)
    assert tool_call_frame("c1", "echo", arguments, traceparent) == model.model_dump_json(exclude_none=True)


@pytest.mark.parametrize("traceparent", [None, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"])
def test_arguments_already_encoded_go_into_the_frame_as_they_are(traceparent: str | None) -> None:
    """A call another master sent carries its arguments as JSON text: the frame splices them in,
    and is still the bytes ``ToolCall`` would give."""
    arguments = {"text": "héllo", "none": None, "nested": {"a": [1, 2.5, 1e16, -0.0], "b": True}}
    model = ToolCall(call_id="c1", tool_name="echo", arguments=arguments, traceparent=traceparent)
    encoded = dump_json(arguments).decode()
    frame = tool_call_frame("c1", "echo", {}, traceparent, arguments_json=encoded)
    assert frame == model.model_dump_json(exclude_none=True)
