"""Session turns of one query, written as the run goes (see the spec's "Session store").

Decisions: ``answer_directly``; ``call_tool`` (one turn per tool call, with
``tool_agent_id``, ``tool_name``, ``tool_args`` and ``result`` or ``error``; the
answer rides on the last one when the query had a single round);
``final_answer`` (the answer of an auto-mode run whose steps were stored as they
happened); ``plan`` (a proposed plan awaiting approval); ``plan_executed``;
``summary``; ``collaboration``; ``awaiting_tool_results`` (a run paused for the results of
tools its asker runs, with its ``calls``; the run's later turns carry the same ``query_id``). A run that a budget or the step limit ended has
``status: "stopped"`` and ``stopped_by`` on its last turn.
"""

from __future__ import annotations

import time
from typing import Any

from master.agents.calls import ToolRun
from master.conversation.outcome import Outcome
from master.conversation.store import SessionStore, Turn


def tool_turn(base: dict[str, Any], run: ToolRun) -> Turn:
    turn: Turn = {
        **base,
        "decision": "call_tool",
        "tool_agent_id": run.agent_id,
        "tool_name": run.tool_name or run.function_name,
        "tool_args": run.arguments,
    }
    if run.success:
        turn["result"] = run.result
    else:
        turn["error"] = run.error
    return turn


class TurnRecorder:
    """Collects a query's turns; auto mode and plan execution store each step as it happens."""

    def __init__(
        self,
        sessions: SessionStore,
        session_id: str,
        *,
        query: str,
        query_id: str,
        model: str,
        flush_each_step: bool,
        owner: str | None = None,
        run_id: str | None = None,
    ) -> None:
        self._sessions = sessions
        self.owner = owner
        """The tenant that owns the session, recorded when the first append creates it."""
        self.session_id = session_id
        self.query_id = query_id
        self.query = query
        self._base: dict[str, Any] = {"query": query, "query_id": query_id, "model": model}
        if run_id is not None:  # ``GET /runs/{run_id}`` reads the run that made the turn
            self._base["run_id"] = run_id
        self.flush_each_step = flush_each_step
        self.plan_id: str | None = None
        self._pending: list[Turn] = []
        self._calls: list[str] = []
        """Call ids of the pending turns' HTTP invocation calls, whose records the append ends."""
        self._steps_stored = False

    def _stamp(self, turn: Turn) -> Turn:
        return {**self._base, **turn, "ts": time.time()}

    def add_summary(self, turn: Turn) -> None:
        """Store ``turn`` before the query's own turns (the query service stores the summaries it
        makes at once instead, under the session's summary lock)."""
        self._pending.append(turn)

    async def steps(self, runs: list[ToolRun]) -> None:
        # A collaboration's turn was stored by the collaboration manager when it ended.
        self._pending.extend(self._stamp(tool_turn({}, run)) for run in runs if run.collaboration is None)
        self._calls.extend(run.recorded_call_id for run in runs if run.recorded_call_id)
        if any(run.collaboration is not None for run in runs):
            await self.flush()
            self._steps_stored = True
        elif self.flush_each_step:
            await self.flush()
            self._steps_stored = True

    async def flush(self, also_set: tuple[str, str, int] | None = None) -> None:
        if self._pending:
            turns, self._pending = self._pending, []
            calls, self._calls = self._calls, []
            await self._sessions.append(
                self.session_id, turns, settled_calls=calls, also_set=also_set, owner=self.owner
            )

    async def finish(self, outcome: Outcome, also_set: tuple[str, str, int] | None = None) -> None:
        """Store the answer (and whatever is still pending); ``also_set`` ``(key, value, ttl)`` is
        set in the same write (the run's record)."""
        extra: dict[str, Any] = {"answer": outcome.answer}
        if outcome.status == "stopped":
            extra |= {"status": "stopped", "stopped_by": outcome.stopped_by}
        if outcome.status == "awaiting_tool_results":  # the answer comes when the run goes on
            calls = [call.model_dump() for call in outcome.pending]
            self._pending.append(self._stamp({"decision": "awaiting_tool_results", "calls": calls}))
        elif outcome.status == "awaiting_approval" and outcome.held:  # a person decides first
            calls = [call.model_dump() for call in outcome.held]
            self._pending.append(self._stamp({"decision": "awaiting_approval", "calls": calls}))
        elif outcome.plan is not None:
            self._pending.append(
                self._stamp(
                    {
                        "decision": "plan",
                        "plan_id": outcome.plan.plan_id,
                        "plan": outcome.plan.model_dump(),
                        "status": "awaiting_approval",
                        "answer": outcome.answer,
                    }
                )
            )
        elif self.plan_id is not None:
            self._pending.append(self._stamp({"decision": "plan_executed", "plan_id": self.plan_id, **extra}))
        elif self._pending and self._pending[-1].get("decision") == "call_tool":
            self._pending[-1].update(extra)
        elif self._steps_stored:
            self._pending.append(self._stamp({"decision": "final_answer", "steps": outcome.steps, **extra}))
        else:
            self._pending.append(self._stamp({"decision": "answer_directly", **extra}))
        await self.flush(also_set)
