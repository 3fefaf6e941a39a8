"""HTTP invocation agents against a real master and Redis, with an agent that knows only the HTTP contract."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from master.agents.call_records import RECORD_MARGIN_SECONDS
from openagent.testing import ScriptedOpenAIServer, TextReply, ToolCall, ToolCallReply
from tests.conftest import master_env
from tests.factories import InProcessMaster, MasterProcess, RawPeer, agent_rows, in_process_master, serve_app

ECHO_TOOL = {
    "name": "echo",
    "description": "Echo text",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "endpoint": "/run",
}


@dataclass
class RawHttpAgent:
    """An invocation agent written against the contract only; the test decides when to call back."""

    healthy: bool = True
    auto_reply: bool = False
    calls: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    base_url: str = ""

    def app(self) -> Starlette:
        async def health(request: Request) -> JSONResponse:
            return JSONResponse(
                {"status": "ok"} if self.healthy else {"status": "sick"}, 200 if self.healthy else 503
            )

        async def run(request: Request) -> JSONResponse:
            body = await request.json()
            if self.auto_reply:
                asyncio.get_running_loop().create_task(self._reply(body))
            else:
                await self.calls.put(body)
            return JSONResponse({"accepted": True}, status_code=202)

        return Starlette(routes=[Route("/health", health), Route("/run", run, methods=["POST"])])

    async def _reply(self, body: dict[str, Any]) -> None:
        """Post the result, retrying transport errors as a real agent would (a busy master may
        take long to accept fifty connections at once); a repeat is answered as a duplicate."""
        result = {"call_id": body["call_id"], "success": True, "result": {"echo": body["arguments"]["text"]}}
        for attempt in range(5):
            try:
                async with httpx.AsyncClient(timeout=60) as http:
                    (await http.post(body["callback_url"], json=result)).raise_for_status()
                return
            except httpx.TransportError:
                if attempt == 4:
                    raise
                await asyncio.sleep(0.5)


@pytest.fixture
async def raw_agent() -> AsyncIterator[RawHttpAgent]:
    agent = RawHttpAgent()
    async with serve_app(agent.app()) as url:
        agent.base_url = url
        yield agent


REGISTERED: set[str] = set()
"""Agent ids this module registered: unregistered after each test, so that no record is left
in the shared Redis database for later tests (a workspace export, say) to find."""


@pytest.fixture(autouse=True)
async def _unregister_afterwards(master: MasterProcess) -> AsyncIterator[None]:
    yield
    async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
        for agent_id in sorted(REGISTERED):
            await http.post("/unregister", json={"agent_id": agent_id})  # deletes the Redis record
    REGISTERED.clear()


async def register(
    master: MasterProcess | InProcessMaster, agent_id: str, base_url: str, **extra: Any
) -> httpx.Response:
    REGISTERED.add(agent_id)
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(
            f"{master.base_url}/register",
            json={"agent_id": agent_id, "invocation_base_url": base_url, "tools": [ECHO_TOOL], **extra},
        )


async def test_query_through_invocation_agent_with_progress(
    master: MasterProcess, raw_agent: RawHttpAgent, llm: ScriptedOpenAIServer
) -> None:
    response = await register(master, "raw-http", raw_agent.base_url)
    assert response.status_code == 200 and response.json()["status"] == "UP"
    row = next(r for r in await agent_rows(master.base_url) if r["agent_id"] == "raw-http")
    assert row["connection_type"] == "invocation" and row["status"] == "UP" and row["last_check"]

    llm.add_tool_call("raw-http__echo", {"text": "hello"})
    llm.add_text("It said hello.")
    async with httpx.AsyncClient(base_url=master.base_url, timeout=15) as http:
        pending = asyncio.create_task(
            http.post("/query", json={"query": "echo", "allowed_agent_ids": ["raw-http"]})
        )
        async with asyncio.timeout(60):
            call = await raw_agent.calls.get()
        assert call["tool_name"] == "echo" and call["arguments"] == {"text": "hello"}
        assert call["callback_url"].startswith(f"{master.base_url}/tool_callback?")
        # the agent retries its result as long as the master keeps the call's record
        assert call["result_window_seconds"] > RECORD_MARGIN_SECONDS

        progress = {"call_id": call["call_id"], "message": "half way", "progress": 0.5}
        assert (await http.post(call["progress_url"], json=progress)).status_code == 200
        latest = (await http.get(f"/tool_progress/{call['call_id']}")).json()
        assert latest == {"call_id": call["call_id"], "running": True, "message": "half way", "progress": 0.5}

        forged = call["callback_url"].rsplit("token=", 1)[0] + "token=forged"
        result = {"call_id": call["call_id"], "success": True, "result": {"echo": "evil"}}
        assert (await http.post(forged, json=result)).status_code == 404
        assert (await http.post(f"{master.base_url}/tool_callback", json=result)).status_code == 401

        good = {"call_id": call["call_id"], "success": True, "result": {"echo": "hello"}}
        first = await http.post(call["callback_url"], json=good)
        assert first.status_code == 200 and first.json()["status"] == "accepted"
        body = (await pending).json()
        again = await http.post(call["callback_url"], json={**good, "result": {"echo": "changed"}})
        assert again.status_code == 200 and again.json()["status"] == "duplicate"

    assert body["success"] and body["agents_used"] == [{"agent_id": "raw-http", "tool_name": "echo"}]
    assert json.loads(llm.requests[1]["messages"][-1]["content"]) == {"result": {"echo": "hello"}}


async def test_slow_agent_times_out_and_late_callback_is_refused(
    llm: ScriptedOpenAIServer, raw_agent: RawHttpAgent
) -> None:
    scripted_llm = llm
    async with in_process_master(openai_base_url=llm.base_url, tool_call_timeout=0.5) as m:
        await register(m, "raw-slow", raw_agent.base_url)
        scripted_llm.add_tool_call("raw-slow__echo", {"text": "x"})
        scripted_llm.add_text("The echo agent timed out.")
        async with httpx.AsyncClient(timeout=15) as http:
            response = await http.post(
                f"{m.base_url}/query", json={"query": "echo", "allowed_agent_ids": ["raw-slow"]}
            )
            assert response.status_code == 200
            error = json.loads(scripted_llm.requests[1]["messages"][-1]["content"])["error"]
            assert error == "tool 'echo' on agent 'raw-slow' gave no result within 0.5 s"
            call = raw_agent.calls.get_nowait()
            late = await http.post(call["callback_url"], json={"call_id": call["call_id"], "success": True})
            assert late.status_code == 410
            assert (
                await http.post(call["progress_url"], json={"call_id": call["call_id"]})
            ).status_code == 404


async def test_survives_master_restart_and_reports_down_then_up(
    llm: ScriptedOpenAIServer, raw_agent: RawHttpAgent, caplog: pytest.LogCaptureFixture
) -> None:
    scripted_llm = llm
    raw_agent.auto_reply = True
    async with in_process_master(openai_base_url=llm.base_url) as first:
        assert (await register(first, "raw-durable", raw_agent.base_url)).status_code == 200
        port = first.port
    async with in_process_master(openai_base_url=llm.base_url, port=port) as second:
        rows = await agent_rows(second.base_url)
        assert any(r["agent_id"] == "raw-durable" and r["status"] == "UP" for r in rows)
        scripted_llm.add_tool_call("raw-durable__echo", {"text": "still here"})
        scripted_llm.add_text("Still here.")
        async with httpx.AsyncClient(base_url=second.base_url, timeout=15) as http:
            body = (
                await http.post("/query", json={"query": "echo", "allowed_agent_ids": ["raw-durable"]})
            ).json()
            assert body["agents_used"] == [{"agent_id": "raw-durable", "tool_name": "echo"}]

            raw_agent.healthy = False
            report = (await http.get("/refresh")).json()["agents"]
            assert {"agent_id": "raw-durable", "status": "DOWN"}.items() <= next(
                r for r in report if r["agent_id"] == "raw-durable"
            ).items()
            assert any("raw-durable" in r.getMessage() and "DOWN" in r.getMessage() for r in caplog.records)
            scripted_llm.add_text("No tool available.")
            await http.post("/query", json={"query": "echo", "allowed_agent_ids": ["raw-durable"]})
            assert "tools" not in scripted_llm.requests[-1]  # a DOWN agent's tools are not offered

            raw_agent.healthy = True
            report = (await http.get("/refresh")).json()["agents"]
            assert next(r for r in report if r["agent_id"] == "raw-durable")["status"] == "UP"
            assert (await http.post("/unregister", json={"agent_id": "raw-durable"})).status_code == 200
            assert (await http.post("/unregister", json={"agent_id": "raw-durable"})).status_code == 404


async def test_unreachable_agent_fails_fast(master: MasterProcess, llm: ScriptedOpenAIServer) -> None:
    async with serve_app(RawHttpAgent().app()) as url:
        await register(master, "raw-gone", url)
    llm.add_tool_call("raw-gone__echo", {"text": "x"})
    llm.add_text("The agent is unreachable.")
    async with httpx.AsyncClient(base_url=master.base_url, timeout=15) as http:
        response = await http.post("/query", json={"query": "echo", "allowed_agent_ids": ["raw-gone"]})
        assert response.status_code == 200
        error = json.loads(llm.requests[1]["messages"][-1]["content"])["error"]
        assert "raw-gone" in error and "unreachable" in error
        row = next(r for r in await agent_rows(master.base_url) if r["agent_id"] == "raw-gone")
        assert row["status"] == "DOWN"
        await http.post("/unregister", json={"agent_id": "raw-gone"})


@pytest.mark.timeout(300)
async def test_fifty_concurrent_calls_each_get_their_own_result(
    master: MasterProcess, raw_agent: RawHttpAgent, llm: ScriptedOpenAIServer
) -> None:
    raw_agent.auto_reply = True
    await register(master, "raw-busy", raw_agent.base_url)

    def script(request: dict[str, Any]) -> Any:
        messages = request["messages"]
        if messages[-1]["role"] == "tool":
            return TextReply(messages[-1]["content"])
        return ToolCallReply((ToolCall("raw-busy__echo", {"text": messages[-1]["content"]}),))

    llm.set_handler(script)
    # Fifty queries at once on a busy machine: the deadline bounds the wait, not the speed.
    async with httpx.AsyncClient(base_url=master.base_url, timeout=240) as http:
        responses = await asyncio.gather(
            *(
                http.post("/query", json={"query": f"n{n}", "allowed_agent_ids": ["raw-busy"]})
                for n in range(50)
            )
        )
    bodies = [r.json() for r in responses]
    assert all(b["success"] for b in bodies), [b["error"] for b in bodies if not b["success"]][:3]
    answers = [json.loads(b["answer"]) for b in bodies]
    assert answers == [{"result": {"echo": f"n{n}"}} for n in range(50)]
    async with httpx.AsyncClient(timeout=30) as http:
        await http.post(f"{master.base_url}/unregister", json={"agent_id": "raw-busy"})


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"agent_id": "x", "invocation_base_url": "not a url", "tools": [ECHO_TOOL]}, "invocation_base_url"),
        ({"agent_id": "x", "invocation_base_url": "http://127.0.0.1:1", "tools": []}, "tools"),
        (
            {
                "agent_id": "x",
                "invocation_base_url": "http://127.0.0.1:1",
                "tools": [{"name": "t", "parameters": {"type": "nonsense"}}],
            },
            "invalid parameters schema",
        ),
    ],
)
async def test_bad_registrations(master: MasterProcess, body: dict[str, Any], needle: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(f"{master.base_url}/register", json=body)
    assert response.status_code == 422 and needle in response.text


async def test_legacy_websocket_register_with_invocation_url(
    master: MasterProcess, raw_agent: RawHttpAgent
) -> None:
    peer = await RawPeer.connect(master.ws_url)
    try:
        await peer.send(
            {
                "type": "register",
                "agent_id": "raw-legacy",
                "role": "action",
                "tools": [ECHO_TOOL],
                "invocation_url": raw_agent.base_url,
            }
        )
        REGISTERED.add("raw-legacy")
        assert await peer.recv() == {"type": "registered", "agent_id": "raw-legacy"}
    finally:
        await peer.close()
    row = next(r for r in await agent_rows(master.base_url) if r["agent_id"] == "raw-legacy")
    assert row["connection_type"] == "invocation" and row["status"] == "UP"
    async with httpx.AsyncClient(timeout=30) as http:
        await http.post(f"{master.base_url}/unregister", json={"agent_id": "raw-legacy"})


async def test_redis_record_and_ttl(
    master: MasterProcess, raw_agent: RawHttpAgent, redis_client: Any
) -> None:
    await register(master, "raw-stored", raw_agent.base_url, metadata={"team": "a"})
    record = json.loads(await redis_client.get("agent:raw-stored"))
    assert record["invocation_base_url"] == raw_agent.base_url and record["metadata"] == {"team": "a"}
    assert 0 < await redis_client.ttl("agent:raw-stored") <= 86400
    assert "raw-stored" in await redis_client.smembers("agents:invocation")
    async with httpx.AsyncClient(timeout=30) as http:
        await http.post(f"{master.base_url}/unregister", json={"agent_id": "raw-stored"})
    assert await redis_client.get("agent:raw-stored") is None


async def test_remote_ref_in_a_tool_schema_is_refused(master: MasterProcess) -> None:
    tool = {"name": "t", "parameters": {"$ref": "http://169.254.169.254/latest/meta-data"}}
    body = {"agent_id": "x", "invocation_base_url": "http://127.0.0.1:1", "tools": [tool]}
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(f"{master.base_url}/register", json=body)
    assert response.status_code == 422 and "remote $ref" in response.text


async def test_unusable_url_is_refused_before_anything_is_stored(
    master: MasterProcess, redis_client: Any
) -> None:
    """Defect 1: a URL the HTTP client cannot encode is a 422 naming the field, and nothing is stored."""
    for url in ["http://\u0100@127.0.0.1:1", "http://user:pw@127.0.0.1:1", "http://127.0.0.1:99999"]:
        response = await register(master, "bad-url", url)
        assert response.status_code == 422, (url, response.text)
        assert "invocation_base_url" in response.text
        assert await redis_client.get("agent:bad-url") is None
    tool = {**ECHO_TOOL, "endpoint": "/r\u00fcn"}
    body = {"agent_id": "bad-url", "invocation_base_url": "http://127.0.0.1:1", "tools": [tool]}
    async with httpx.AsyncClient(timeout=5) as http:
        response = await http.post(f"{master.base_url}/register", json=body)
    assert response.status_code == 422 and "endpoint" in response.text
    async with httpx.AsyncClient(timeout=5) as http:
        assert (await http.get(f"{master.base_url}/refresh")).status_code == 200


async def test_unusable_stored_record_is_quarantined_at_start_up(
    scripted_llm: ScriptedOpenAIServer, redis_client: Any
) -> None:
    """Defect 1: a record written before validation existed does not stop the master starting."""
    record = {
        "agent_id": "stored-bad-url",
        "invocation_base_url": "http://\u0100@127.0.0.1:1",
        "tools": [ECHO_TOOL],
        "metadata": {},
        "registered_at": 1.0,
    }
    await redis_client.set("agent:stored-bad-url", json.dumps(record))
    await redis_client.sadd("agents:invocation", "stored-bad-url")
    try:
        async with MasterProcess(master_env(scripted_llm)) as m:
            async with httpx.AsyncClient(base_url=m.base_url, timeout=10) as http:
                assert (await http.get("/refresh")).status_code == 200
                rows = (await http.get("/agents")).json()["agents"]
            assert all(row["agent_id"] != "stored-bad-url" for row in rows)
            # (which master logged the quarantine depends on which read the record first: another
            # test's master may share this Redis database)
        assert await redis_client.get("agent:stored-bad-url") is None
        assert json.loads(await redis_client.get("agent_quarantine:stored-bad-url")) == record
        assert "stored-bad-url" not in await redis_client.smembers("agents:invocation")
    finally:
        await redis_client.delete("agent:stored-bad-url", "agent_quarantine:stored-bad-url")
        await redis_client.srem("agents:invocation", "stored-bad-url")
