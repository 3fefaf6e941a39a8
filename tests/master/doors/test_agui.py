"""The AG-UI door (``POST /ag-ui``): the run's events as AG-UI events, approvals as interrupts.

The translation is checked on its own (:class:`master.doors.agui.events.RunEvents` over the
entry's events), then on a real master (lifespan, Redis, uvicorn on loopback) with the scripted
LLM and a bank agent whose ``transfer`` needs approval: every event the door sends is parsed with
the official ``ag-ui-protocol`` models, a thread is one session, an approval is an interrupt whose
``resume`` decides the same record as ``POST /approvals/{id}``, and the spec's refusals come as
``RUN_ERROR``. ``test_agui_client.py`` drives the same door with the official ``@ag-ui/client``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from master.auth import Role as KeyRole
from master.doors.agui.events import RunEvents
from master.query.events import Finished, Progress
from openagent import ClientConfig, OrchestratorActionAgent, ToolSchema
from openagent.testing import ScriptedOpenAIServer
from protocol import Approval, PendingToolCall, QueryResponse, parse_run_event
from tests.factories import EVERY_TENANT, InProcessMaster, in_process_master

KEY = "ag-ui-door-key"
DEADLINE = 60
EVENTS: TypeAdapter[Any] = TypeAdapter(Event)

TRANSFER = ToolSchema(
    name="transfer",
    description="Transfer money to someone",
    parameters={
        "type": "object",
        "properties": {"to": {"type": "string"}, "amount": {"type": "number"}},
        "required": ["to", "amount"],
    },
    requires_approval=True,
)
BALANCE = ToolSchema(name="balance", description="Read the balance", parameters={"type": "object"})
PAYMENT = {"to": "bob", "amount": 250}


def _progress(kind: str, data: dict[str, Any]) -> Progress:
    return Progress(parse_run_event({**data, "type": kind}))


def _approval(approval_id: str = "ap-1", **more: Any) -> Approval:
    return Approval(
        approval_id=approval_id,
        session_id="thread-1",
        agent_id="bank",
        tool_name="transfer",
        arguments=PAYMENT,
        created_at=1.0,
        expires_at=2.0,
        **more,
    )


def _types(events: list[Any]) -> list[str]:
    return [str(event.type.value) for event in events]


# --------------------------------------------------------------------------- the translation


def test_tokens_steps_and_tool_calls_become_ag_ui_events() -> None:
    run = RunEvents("thread-1", "run-1", state={"theme": "dark"})
    progress = [
        _progress("token", {"text": "Let me check. "}),
        _progress("step", {"step": 1, "tool_calls": ["bank__balance"]}),
        _progress(
            "tool_call", {"call_id": "c1", "agent_id": "bank", "tool_name": "balance", "arguments": {}}
        ),
        _progress(
            "tool_progress", {"call_id": "c1", "agent_id": "bank", "tool_name": "balance", "message": "half"}
        ),
        _progress(
            "tool_result",
            {
                "call_id": "c1",
                "agent_id": "bank",
                "tool_name": "balance",
                "success": True,
                "result": {"eur": 3},
            },
        ),
        _progress("token", {"text": "You have "}),
        _progress("token", {"text": "3 EUR."}),
    ]
    response = QueryResponse(
        query_id="q", session_id="thread-1", run_id="r", success=True, answer="You have 3 EUR."
    )
    events = [e for p in [*progress, Finished(response)] for e in run.translate(p)]

    assert _types(events) == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STEP_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "CUSTOM",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STEP_FINISHED",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    start, result, snapshot, finished = events[4], events[8], events[14], events[15]
    assert (start.tool_call_id, start.tool_call_name) == ("c1", "bank__balance")
    assert (result.tool_call_id, json.loads(result.content)) == ("c1", {"eur": 3})
    assert snapshot.snapshot["theme"] == "dark"  # the client's state, kept
    assert snapshot.snapshot["openagent"]["sessionId"] == "thread-1"
    assert finished.outcome.type == "success" and finished.result["answer"] == "You have 3 EUR."


def test_an_approval_is_an_interrupt_and_its_resumed_call_keeps_its_id() -> None:
    held = _approval()
    first = RunEvents("thread-1", "run-1")
    waiting = QueryResponse(
        query_id="q", session_id="thread-1", success=True, status="awaiting_approval", approvals=[held]
    )
    events = [
        *first.translate(_progress("approval_required", held.model_dump(mode="json"))),
        *first.translate(Finished(waiting)),
    ]
    assert _types(events) == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    [interrupt] = events[-1].outcome.interrupts
    assert (interrupt.id, interrupt.reason, interrupt.tool_call_id) == ("ap-1", "tool_call", "call-ap-1")
    assert events[0].tool_call_id == "call-ap-1" and json.loads(events[1].delta) == PAYMENT
    assert interrupt.response_schema["required"] == ["approved"]

    resumed = RunEvents("thread-1", "run-2", resumed=[_approval(status="approved")])
    call = {"call_id": "d-9", "agent_id": "bank", "tool_name": "transfer"}
    done = QueryResponse(query_id="q", session_id="thread-1", success=True, answer="Sent.")
    events = [
        *resumed.translate(_progress("tool_call", {**call, "arguments": PAYMENT})),
        *resumed.translate(_progress("tool_result", {**call, "success": True, "result": "ok"})),
        *resumed.translate(Finished(done)),
    ]
    # The spec: the resumed run sends the result against the original id, not a new start.
    assert _types(events)[:1] == ["TOOL_CALL_RESULT"] and events[0].tool_call_id == "call-ap-1"


def test_a_failed_run_is_a_run_error_and_front_end_tools_stay_pending() -> None:
    failed = QueryResponse(query_id="q", success=False, error="no such session", error_code="unknown_session")
    [error] = list(RunEvents("t", "r").translate(Finished(failed)))
    assert (error.type.value, error.code, error.message) == (
        "RUN_ERROR",
        "unknown_session",
        "no such session",
    )

    pending = QueryResponse(
        query_id="q",
        session_id="t",
        success=True,
        status="awaiting_tool_results",
        tool_calls=[PendingToolCall(id="fc-1", name="pick_color", arguments='{"hue": 3}')],
    )
    events = list(RunEvents("t", "r").translate(Finished(pending)))
    assert _types(events) == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    assert events[-1].outcome.pending_tool_call_ids == ["fc-1"]


# --------------------------------------------------------------------------- on a real master


@dataclass
class Bank:
    master: InProcessMaster
    llm: ScriptedOpenAIServer
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def http(self, key: str = KEY) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.master.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=DEADLINE
        )

    async def run(self, thread: str, text: str | None = None, key: str = KEY, **more: Any) -> list[Any]:
        """One ``POST /ag-ui``: its events, parsed with the official models."""
        body: dict[str, Any] = {
            "threadId": thread,
            "runId": uuid.uuid4().hex,
            "messages": [{"id": "m1", "role": "user", "content": text}] if text else [],
            "tools": [],
            "context": [],
            "state": {},
            "forwardedProps": {},
            **more,
        }
        async with self.http(key) as http:
            response = await http.post("/ag-ui", json=body)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/event-stream")
        blocks = [b for b in response.text.split("\n\n") if b.strip()]
        events = [EVENTS.validate_json(block.removeprefix("data: ")) for block in blocks]
        assert _types(events)[0] == "RUN_STARTED" and events[0].run_id == body["runId"]
        return events


@pytest.fixture
async def bank(llm: ScriptedOpenAIServer) -> AsyncIterator[Bank]:
    async with in_process_master(
        openai_base_url=llm.base_url, openai_api_key="scripted", openagent_api_key=KEY
    ) as master:
        running = Bank(master, llm)

        async def handler(tool_name: str, arguments: dict[str, Any], *, progress_callback: Any) -> Any:
            running.calls.append((tool_name, arguments))
            return {"eur": 3} if tool_name == "balance" else {"sent": arguments}

        config = ClientConfig(master_ws=master.ws_url, api_key=KEY)
        async with OrchestratorActionAgent("bank", [TRANSFER, BALANCE], handler, config=config):
            async with asyncio.timeout(DEADLINE):
                while "bank" not in master.services.agents.known_ids(EVERY_TENANT):
                    await asyncio.sleep(0.01)
            yield running


async def test_a_thread_is_a_session_and_a_tool_call_streams(bank: Bank) -> None:
    thread = f"thread-{uuid.uuid4().hex}"
    bank.llm.add_tool_call("bank__balance", {})
    bank.llm.add_text("You have 3 EUR.")

    events = await bank.run(thread, "what is my balance?")

    kinds = _types(events)
    assert kinds[-1] == "RUN_FINISHED" and events[-1].outcome.type == "success"
    for kind in ("STEP_STARTED", "TOOL_CALL_START", "TOOL_CALL_RESULT", "STEP_FINISHED", "STATE_SNAPSHOT"):
        assert kind in kinds, kinds
    text = "".join(e.delta for e in events if e.type.value == "TEXT_MESSAGE_CONTENT")
    assert text == "You have 3 EUR."
    assert bank.calls == [("balance", {})]
    assert events[-2].snapshot["openagent"]["sessionId"] == thread

    bank.llm.add_text("Still 3 EUR.")
    await bank.run(thread, "and now?")
    prompt = json.dumps(bank.llm.requests[-1]["messages"])
    assert "what is my balance?" in prompt  # the thread's session holds the first run


async def test_an_approval_interrupts_the_run_and_resume_decides_it(bank: Bank) -> None:
    thread = f"thread-{uuid.uuid4().hex}"
    bank.llm.add_tool_call("bank__transfer", PAYMENT)
    bank.llm.add_text("Sent 250 to bob.")

    events = await bank.run(thread, "send 250 to bob")

    assert events[-1].outcome.type == "interrupt", _types(events)
    [interrupt] = events[-1].outcome.interrupts
    assert bank.calls == []  # nothing ran undecided

    refused = await bank.run(thread, "something else")  # open interrupts block new input
    assert _types(refused) == ["RUN_STARTED", "RUN_ERROR"] and interrupt.id in refused[-1].message

    bad = await bank.run(
        thread, resume=[{"interruptId": interrupt.id, "status": "resolved", "payload": {"yes": 1}}]
    )
    assert _types(bad) == ["RUN_STARTED", "RUN_ERROR"] and "responseSchema" in bad[-1].message

    resume = [{"interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}]
    resumed = await bank.run(thread, resume=resume)

    assert resumed[-1].outcome.type == "success", _types(resumed)
    [result] = [e for e in resumed if e.type.value == "TOOL_CALL_RESULT"]
    assert result.tool_call_id == interrupt.tool_call_id
    assert "TOOL_CALL_START" not in _types(resumed)
    assert bank.calls == [("transfer", PAYMENT)]
    async with bank.http() as http:  # the same record as every door's
        record = (await http.get(f"/approvals/{interrupt.id}")).json()
        assert record["status"] == "approved"
        again = await http.post(f"/approvals/{interrupt.id}", json={"decision": "reject"})
        assert again.json()["error_code"] == "approval_decided"

    replayed = await bank.run(thread, resume=resume)  # the spec: a replay is safe
    assert replayed[-1].type.value == "RUN_FINISHED" and bank.calls == [("transfer", PAYMENT)]


async def test_a_cancelled_interrupt_refuses_the_call(bank: Bank) -> None:
    thread = f"thread-{uuid.uuid4().hex}"
    bank.llm.add_tool_call("bank__transfer", PAYMENT)
    bank.llm.add_text("I did not send it.")
    [interrupt] = (await bank.run(thread, "send 250 to bob"))[-1].outcome.interrupts

    resumed = await bank.run(thread, resume=[{"interruptId": interrupt.id, "status": "cancelled"}])

    assert resumed[-1].outcome.type == "success"
    assert bank.calls == []
    assert "cancelled in the front end" in json.dumps(bank.llm.requests[-1]["messages"])


async def test_front_end_tools_wait_for_the_next_input(bank: Bank) -> None:
    thread = f"thread-{uuid.uuid4().hex}"
    tool = {"name": "pick_color", "description": "Ask the user for a color", "parameters": {"type": "object"}}
    bank.llm.add_tool_call("pick_color", {}, call_id="fc-1")
    bank.llm.add_text("You picked red.")

    first = await bank.run(thread, "pick a color", tools=[tool])
    assert first[-1].outcome.pending_tool_call_ids == ["fc-1"]

    messages = [
        {"id": "m1", "role": "user", "content": "pick a color"},
        {
            "id": "m2",
            "role": "assistant",
            "toolCalls": [
                {"id": "fc-1", "type": "function", "function": {"name": "pick_color", "arguments": "{}"}}
            ],
        },
        {"id": "m3", "role": "tool", "toolCallId": "fc-1", "content": "red"},
    ]
    second = await bank.run(thread, messages=messages, tools=[tool])
    assert second[-1].outcome.type == "success"
    assert "".join(e.delta for e in second if e.type.value == "TEXT_MESSAGE_CONTENT") == "You picked red."


async def test_a_body_that_is_not_a_run_agent_input_is_refused(bank: Bank) -> None:
    async with bank.http() as http:
        response = await http.post("/ag-ui", json={"threadId": "t"})
    assert response.status_code == 422
    assert "runId" in response.text and response.json()["error_code"] == "validation_error"


async def test_another_tenants_interrupt_cannot_be_resumed(bank: Bank) -> None:
    thread = f"thread-{uuid.uuid4().hex}"
    bank.llm.add_tool_call("bank__transfer", PAYMENT)
    [interrupt] = (await bank.run(thread, "send 250 to bob"))[-1].outcome.interrupts
    keys = bank.master.services.keys
    assert keys is not None
    _, other = await keys.create(name="client of b", role=KeyRole.CLIENT, tenant="b", agent_ids=[])
    resume = [{"interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}]

    refused = await bank.run(thread, resume=resume, key=other)

    assert _types(refused) == ["RUN_STARTED", "RUN_ERROR"] and refused[-1].code == "unknown_approval"
    assert bank.calls == []
    async with bank.http() as http:
        assert (await http.get(f"/approvals/{interrupt.id}")).json()["status"] == "pending"


async def test_a_thread_id_that_cannot_be_a_session_id_is_refused(bank: Bank) -> None:
    refused = await bank.run("a thread/with spaces", "hi")
    assert _types(refused) == ["RUN_STARTED", "RUN_ERROR"] and refused[-1].code == "validation_error"
    assert "threadId" in refused[-1].message and bank.llm.requests == []
