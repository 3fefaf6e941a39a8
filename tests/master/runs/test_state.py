"""The run's typed state (:mod:`master.runs.state`): what it stores, and the states written before it."""

from __future__ import annotations

import pytest

from master.runs.state import (
    ApprovalPending,
    Asker,
    BudgetPending,
    CallRef,
    ClientToolResultPending,
    HeldCall,
    OperatorDecisionPending,
    RunState,
    read_state,
)


def test_a_state_round_trips_through_its_json_with_its_pending_kind() -> None:
    state = RunState(
        run_id="run-1",
        session_id="s",
        query="pay bob",
        messages=[{"role": "user", "content": "pay bob"}],
        pending=ApprovalPending(
            held=[HeldCall(id="c1", name="bank__wire", arguments="{}", approval_id="appr-1")],
            asker=Asker(key="k", tenant="a"),
        ),
    )
    back = RunState.model_validate_json(state.model_dump_json())
    assert back == state
    assert back.held is not None and back.held.held[0].approval_id == "appr-1"
    assert RunState.model_validate(state.dump()) == state  # as a session's pause slot keeps it


def test_an_unknown_pending_kind_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="teleport"):
        RunState.model_validate({"pending": {"kind": "teleport"}})


def test_a_halt_checkpoint_written_before_the_model_reads_as_a_budget_pending() -> None:
    state = read_state(
        {
            "kind": "halt",
            "run_id": "run-1",
            "query": "q",
            "query_id": "q-1",
            "messages": [],
            "steps": 2,
            "stopped_by": "max_tool_calls",
            "request": {"query": "q"},
            "budget": {"max_tool_calls": 1, "max_tokens": None, "max_seconds": None},
            "spent": {"tool_calls": 1, "tokens": 10, "seconds": 0.5},
            "unknown": [{"id": "c1", "name": "a__t", "arguments": "{}"}],
        },
        where="test",
    )
    assert state is not None
    assert state.pending == BudgetPending(stopped_by="max_tool_calls")
    assert state.status == "stopped" and state.steps == 2 and state.spent.tool_calls == 1
    assert state.budget is not None and state.budget.max_tool_calls == 1
    assert state.unknown == [CallRef(id="c1", name="a__t", arguments="{}")]


def test_a_paused_run_written_before_the_model_reads_with_its_held_calls_and_asker() -> None:
    legacy = {
        "query": "q",
        "query_id": "q-1",
        "messages": [],
        "request": {"query": "q"},
        "kind": "approval",
        "held": [{"id": "c1", "name": "bank__wire", "arguments": "{}", "approval_id": "appr-1"}],
        "asker": {"key": "k", "name": "n", "tenant": "a", "admin": False},
    }
    state = read_state(legacy, where="test")
    assert state is not None and isinstance(state.pending, ApprovalPending)
    assert state.pending.asker == Asker(key="k", name="n", tenant="a")
    assert [call.approval_id for call in state.pending.held] == ["appr-1"]
    assert not state.direct
    direct = read_state({**legacy, "direct": True}, where="test")
    assert direct is not None and direct.direct


def test_a_disagreement_written_before_the_model_reads_as_an_operator_decision() -> None:
    state = read_state(
        {
            "kind": "approval",
            "roles": {"phase": "escalated"},
            "held": [{"id": "c1", "name": "coordinator__critic_disagreement", "approval_id": "appr-1"}],
        },
        where="test",
    )
    assert state is not None and isinstance(state.pending, OperatorDecisionPending)
    assert state.roles is not None and state.roles.phase == "escalated"


def test_a_client_tool_pause_written_before_the_model_reads_with_its_calls() -> None:
    state = read_state(
        '{"query": "q", "pending": [{"id": "c1", "name": "get_time", "arguments": "{}"}], "steps": 1}',
        where="test",
    )
    assert state is not None
    assert state.pending == ClientToolResultPending(calls=[CallRef(id="c1", name="get_time", arguments="{}")])
    assert state.status == "awaiting_tool_results"


def test_what_is_not_a_state_reads_as_none(caplog: pytest.LogCaptureFixture) -> None:
    assert read_state(None, where="test") is None
    assert read_state('{"steps": "many"}', where="run r-1") is None
    assert "run r-1: the stored run state is unreadable" in caplog.text
