"""The run's events (:mod:`protocol.events`): one union discriminated by ``type``, each event's
JSON carrying its ``type``, the WebSocket ``run_event`` frame in the protocol's frame union."""

from __future__ import annotations

from typing import Any, get_args

import pytest
from pydantic import ValidationError

from protocol import (
    Approval,
    PlanEvent,
    QueryResponse,
    QueryResult,
    RunEvent,
    RunEventFrame,
    StepEvent,
    VerdictEvent,
    parse_message,
    parse_run_event,
)
from protocol.events import run_event_schema, run_finished, run_paused

SAMPLES: list[dict[str, Any]] = [
    {"type": "step", "step": 1, "tool_calls": ["works__step"]},
    {"type": "plan", "subtasks": [{"task": "do it", "criteria": ["done"]}]},
    {"type": "subtask_started", "index": 0, "task": "do it", "attempt": 1},
    {"type": "verdict", "index": 0, "role": "reviewer", "verdict": "needs_retry", "reason": "more"},
    {"type": "tool_call", "call_id": "c1", "agent_id": "a", "tool_name": "t", "arguments": {"x": 1}},
    {"type": "tool_progress", "call_id": "c1", "message": "half", "progress": 0.5},
    {
        "type": "tool_result",
        "call_id": None,
        "agent_id": "a",
        "tool_name": "t",
        "success": False,
        "error": "no",
    },
    {"type": "token", "text": "Hel"},
    {
        "type": "approval_required",
        "approval_id": "ap-1",
        "session_id": "s",
        "agent_id": "a",
        "tool_name": "pay",
        "arguments": {"to": "bob"},
        "created_at": 1.0,
        "expires_at": 2.0,
    },
    {"type": "run_paused", "run_id": "r", "status": "awaiting_tool_results", "tool_call_ids": ["c1"]},
    {"type": "query_result", "query_id": "q", "success": True, "answer": "ok"},
]


@pytest.mark.parametrize("data", SAMPLES, ids=[s["type"] for s in SAMPLES])
def test_each_event_parses_to_its_model_and_dumps_its_type(data: dict[str, Any]) -> None:
    event = parse_run_event(data)
    assert event.type == data["type"]
    dumped = event.model_dump(mode="json")
    assert dumped["type"] == data["type"] and parse_run_event(event.model_dump_json()) == event


def test_the_union_covers_every_sample_and_refuses_unknown_or_incomplete_events() -> None:
    members = get_args(get_args(RunEvent)[0])
    assert {m.model_fields["type"].default for m in members} == {s["type"] for s in SAMPLES}
    with pytest.raises(ValidationError, match="does not match any of the expected tags"):
        parse_run_event({"type": "nonsense"})
    with pytest.raises(ValidationError, match="step"):
        parse_run_event({"type": "step"})  # no step number
    with pytest.raises(ValidationError, match="verdict"):
        VerdictEvent(index=0, role="reviewer", verdict="maybe")  # type: ignore[arg-type]


def test_plan_keeps_the_wire_shape_of_its_subtasks() -> None:
    event = PlanEvent.model_validate({"subtasks": [{"task": "t", "criteria": ["c"]}]})
    assert event.model_dump(mode="json") == {"type": "plan", "subtasks": [{"task": "t", "criteria": ["c"]}]}
    assert StepEvent(step=2, tool_calls=["a__b"]).model_dump() == {
        "type": "step",
        "step": 2,
        "tool_calls": ["a__b"],
    }


def test_the_run_event_frame_is_a_protocol_frame() -> None:
    frame = RunEventFrame(query_id="q1", event=StepEvent(step=1))
    parsed = parse_message(frame.model_dump_json())
    assert isinstance(parsed, RunEventFrame) and parsed == frame
    assert parsed.event.type == "step"


def test_run_paused_and_run_finished_say_what_the_result_says() -> None:
    approval = Approval(
        approval_id="ap-1",
        session_id="s",
        agent_id="a",
        tool_name="t",
        arguments={},
        created_at=0,
        expires_at=1,
    )
    waiting = QueryResponse(
        query_id="q", run_id="r", success=True, status="awaiting_approval", approvals=[approval]
    )
    paused = run_paused(waiting)
    assert paused is not None and (paused.status, paused.approval_ids, paused.plan) == (
        "awaiting_approval",
        ["ap-1"],
        False,
    )
    assert run_paused(QueryResponse(query_id="q", success=True, status="completed")) is None
    finished = run_finished(waiting)
    assert isinstance(finished, QueryResult) and finished.model_dump(exclude={"type"}) == waiting.model_dump()


def test_the_schema_requires_the_type_of_every_member() -> None:
    schema = run_event_schema()
    mapping = schema["discriminator"]["mapping"]
    assert set(mapping) == {s["type"] for s in SAMPLES}
    for ref in mapping.values():
        assert schema["$defs"][ref.rsplit("/", 1)[-1]]["required"][0] == "type"
