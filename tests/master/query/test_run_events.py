"""Every event a run streams is a :data:`protocol.RunEvent`: the SSE of ``POST /query`` (a tool
query, a roles query, a query held for approval) and the WebSocket ``run_event`` frames of a
query client that sent ``stream: true``, against the scripted LLM; and ``/openapi.json``
documents the union as the SSE response's schema."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from openagent import OrchestratorActionAgent, ToolSchema
from openagent.config import ClientConfig
from openagent.testing import ScriptedOpenAIServer
from protocol import (
    ApprovalRequiredEvent,
    QueryResult,
    RunEventFrame,
    RunPausedEvent,
    parse_message,
    parse_run_event,
)
from tests.factories import EVERY_TENANT, InProcessMaster, RawPeer, in_process_master
from tests.master.query.test_roles import ROLES, execute, plan, review

KEY = "events-key"
HEADERS = {"Authorization": f"Bearer {KEY}"}
STEP = ToolSchema(
    name="step",
    description="Do one step",
    parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
)
PAY = ToolSchema(
    name="pay",
    description="Pay someone",
    parameters={"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]},
    requires_approval=True,
)


@dataclass
class Stack:
    master: InProcessMaster
    http: httpx.AsyncClient


@pytest.fixture
async def stack(llm: ScriptedOpenAIServer) -> AsyncIterator[Stack]:
    """A master with the ``works`` agent: ``step`` reports progress, ``pay`` needs approval."""

    async def handler(tool_name: str, arguments: dict[str, Any], *, progress_callback: Any) -> dict[str, Any]:
        await progress_callback(f"working on {tool_name}", 0.5)
        return {"done": tool_name, **arguments}

    async with in_process_master(
        openai_base_url=llm.base_url, openai_api_key="scripted", openagent_api_key=KEY
    ) as master:
        config = ClientConfig(master_ws=master.ws_url, api_key=KEY)
        async with OrchestratorActionAgent("works", [STEP, PAY], handler, config=config):
            async with asyncio.timeout(30):
                while "works" not in master.services.agents.known_ids(EVERY_TENANT):
                    await asyncio.sleep(0.01)
            async with httpx.AsyncClient(base_url=master.base_url, headers=HEADERS, timeout=60) as http:
                yield Stack(master, http)


async def sse(http: httpx.AsyncClient, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events of a streamed ``POST /query``, each checked to be a RunEvent of its name."""
    events: list[tuple[str, dict[str, Any]]] = []
    async with http.stream("POST", "/query", json={**body, "stream": True}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        name = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                event = parse_run_event(data)  # raises when it does not fit the union
                assert event.type == name == data["type"], (name, data)
                events.append((name, data))
    assert events and events[-1][0] == "query_result"
    return events


async def test_a_tool_query_streams_run_events(stack: Stack, llm: ScriptedOpenAIServer) -> None:
    llm.add_tool_call("works__step", {"n": 7})
    llm.add_text("Step seven is done.")
    events = await sse(stack.http, {"query": "do step 7", "allowed_agent_ids": ["works"]})
    names = [name for name, _ in events]
    assert names[0] == "step"
    assert names.index("tool_call") < names.index("tool_progress") < names.index("tool_result")
    assert {"token", "query_result"} <= set(names) and "run_paused" not in names
    progress = dict(events)["tool_progress"]
    assert (progress["agent_id"], progress["tool_name"], progress["progress"]) == ("works", "step", 0.5)
    assert dict(events)["tool_result"]["result"] == {"done": "step", "n": 7}


async def test_a_roles_query_streams_run_events(stack: Stack, llm: ScriptedOpenAIServer) -> None:
    plan(llm)
    execute(llm, 1, "Step one is done.")
    review(llm, "pass", "step 1 was done")
    execute(llm, 2, "Step two, first try.")
    review(llm, "needs_retry", "say what step 2 returned")
    execute(llm, None, "Step two returned n=2.")
    review(llm, "pass", "now it says")
    body = {"query": "do the work", "auto_mode": True, "roles": ROLES, "allowed_agent_ids": ["works"]}
    events = await sse(stack.http, body)
    kinds = [name for name, _ in events]
    assert kinds.count("plan") == 1 and kinds.count("subtask_started") == 3 and kinds.count("verdict") == 3
    assert {"tool_call", "tool_result", "query_result"} <= set(kinds)
    assert events[-1][1]["status"] == "completed"


async def test_a_held_call_streams_approval_required_then_run_paused(
    stack: Stack, llm: ScriptedOpenAIServer
) -> None:
    llm.add_tool_call("works__pay", {"to": "bob"})
    events = await sse(stack.http, {"query": "pay bob", "allowed_agent_ids": ["works"]})
    assert [name for name, _ in events][-3:] == ["approval_required", "run_paused", "query_result"]
    required = ApprovalRequiredEvent.model_validate(events[-3][1])
    paused = RunPausedEvent.model_validate(events[-2][1])
    result = QueryResult.model_validate(events[-1][1])
    assert (required.agent_id, required.tool_name, required.arguments) == ("works", "pay", {"to": "bob"})
    assert paused.status == result.status == "awaiting_approval"
    assert paused.approval_ids == [required.approval_id] and paused.run_id == result.run_id


async def test_a_websocket_query_with_stream_gets_run_event_frames_before_its_result(
    stack: Stack, llm: ScriptedOpenAIServer
) -> None:
    peer = await RawPeer.connect(stack.master.ws_url, additional_headers=HEADERS)
    try:
        await peer.register("events-client", role="query")
        llm.add_tool_call("works__step", {"n": 1})
        llm.add_text("Done.")
        query = {"type": "query", "query": "do step 1", "allowed_agent_ids": ["works"]}
        await peer.send({**query, "query_id": "q-stream", "stream": True})
        frames = [await peer.recv()]
        while frames[-1]["type"] != "query_result":
            frames.append(await peer.recv())
        *streamed, last = [parse_message(json.dumps(frame)) for frame in frames]
        assert all(isinstance(f, RunEventFrame) and f.query_id == "q-stream" for f in streamed)
        kinds = [f.event.type for f in streamed if isinstance(f, RunEventFrame)]
        assert kinds[0] == "step" and kinds.index("tool_call") < kinds.index("tool_result")
        assert "token" in kinds and "query_result" not in kinds
        assert isinstance(last, QueryResult) and last.answer == "Done." and last.query_id == "q-stream"

        # Without stream (an older client): the query_result frame alone, as before.
        llm.add_text("Plain.")
        await peer.send({**query, "query_id": "q-plain"})
        reply = await peer.recv()
        assert (reply["type"], reply["query_id"], reply["answer"]) == ("query_result", "q-plain", "Plain.")
    finally:
        await peer.close()


async def test_the_openapi_document_has_the_run_event_schema(stack: Stack) -> None:
    document = (await stack.http.get("/openapi.json")).json()
    schemas = document["components"]["schemas"]
    union = schemas["RunEvent"]
    assert set(union["discriminator"]["mapping"]) == {
        "step",
        "plan",
        "subtask_started",
        "verdict",
        "tool_call",
        "tool_progress",
        "tool_result",
        "token",
        "approval_required",
        "run_paused",
        "query_result",
    }
    for ref in union["discriminator"]["mapping"].values():
        member = schemas[ref.rsplit("/", 1)[-1]]
        assert "type" in member["required"], ref
    stream = document["paths"]["/query"]["post"]["responses"]["200"]["content"]["text/event-stream"]
    assert stream["schema"] == {"$ref": "#/components/schemas/RunEvent"}
