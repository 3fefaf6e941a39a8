"""The two verbs (:mod:`master.runs.engine`): a resume goes by what the run waits for, and a
request that brings the wrong decisions for it is refused by name, taking nothing."""

from __future__ import annotations

from typing import Any, cast

import pytest

from master.errors import QueryRejected
from master.runs.engine import RunEngine
from master.runs.extras import NO_EXTRAS
from master.runs.state import (
    ApprovalPending,
    CallRef,
    ClientToolResultPending,
    HeldCall,
    OperatorDecisionPending,
    RunState,
)
from master.runs.work import Decisions, RunWork


class _Sessions:
    """A session store holding one paused run (only what the checks read)."""

    def __init__(self, paused: RunState | None) -> None:
        self.state = paused.dump() if paused is not None else None
        self.taken = 0

    async def paused(self, session_id: str) -> dict[str, Any] | None:
        return self.state

    async def take_paused(self, session_id: str) -> dict[str, Any] | None:
        self.taken += 1
        state, self.state = self.state, None
        return state


def _engine(sessions: _Sessions) -> RunEngine:
    return RunEngine(settings=cast(Any, None), sessions=cast(Any, sessions), catalog=cast(Any, None))


_NO_RUN = cast(RunWork, None)  # every case below is refused before the run is looked at

_HELD = RunState(
    query="pay bob",
    pending=ApprovalPending(
        held=[HeldCall(id="c1", name="bank__wire", arguments="{}", approval_id="appr-1")]
    ),
)


async def test_tool_results_for_a_run_waiting_for_approvals_are_refused_and_take_nothing() -> None:
    sessions = _Sessions(_HELD)
    with pytest.raises(QueryRejected, match="no run of session 's' waits for tool results"):
        await _engine(sessions).waiting("s", cast(Any, None), NO_EXTRAS, {})
    assert sessions.taken == 0 and sessions.state is not None  # still waits for its approvals


async def test_tool_results_must_answer_exactly_the_calls_the_run_waits_for() -> None:
    waiting = RunState(pending=ClientToolResultPending(calls=[CallRef(id="c1", name="get_time")]))
    engine = _engine(_Sessions(waiting))
    with pytest.raises(QueryRejected, match="missing: 'c1'; not asked for: 'c9'"):
        await engine.waiting("s", cast(Any, None), NO_EXTRAS, {"c9": "x"})
    found = await engine.waiting("s", cast(Any, None), NO_EXTRAS, {"c1": "12:00"})
    assert found is not None and found.pending == waiting.pending


async def test_a_run_waiting_for_tool_results_is_not_resumed_without_them() -> None:
    state = RunState(pending=ClientToolResultPending(calls=[CallRef(id="c1", name="get_time")]))
    with pytest.raises(QueryRejected, match="waits for the results of its tool calls"):
        await _engine(_Sessions(None)).resume(_NO_RUN, [], state, Decisions())


async def test_an_operator_decision_outside_a_run_with_roles_is_refused() -> None:
    state = RunState(pending=OperatorDecisionPending())
    with pytest.raises(QueryRejected, match="operator's decision"):
        await _engine(_Sessions(None)).resume(_NO_RUN, [], state, Decisions())
