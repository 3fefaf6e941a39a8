"""The coordinator's state machine (:mod:`master.orchestration.roles`).

:class:`Coordinator` moves a :class:`CoordinatorState` one transition at a time and hands it to
:meth:`RoleHost.persist` after each, so that a run continued elsewhere starts at its last
persisted phase (a passed sub-task is never run again). It knows nothing of Redis, sessions or
approvals: the :class:`RoleHost` (the query service's side) asks the models, runs the executor,
persists, streams events and opens the person's decision on a disagreement.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Literal, Protocol, TypeVar

from master.llm.model import ChatMessage, ChatResult
from master.orchestration.roles.state import (
    MAX_ATTEMPTS,
    CoordinatorState,
    Disagreement,
    ReviewVerdict,
    Subtask,
    VerdictName,
)
from master.orchestration.roles.tools import (
    PLAN_TOOL,
    REMINDER,
    REVIEW_TOOL,
    SUBMIT_PLAN,
    SUBMIT_REVIEW,
    executor_request,
    plan_of,
    planner_prompt,
    review_of,
    review_request,
    reviewer_prompt,
)
from protocol import PlanEvent, PlannedSubtask, RunEvent, SubtaskStartedEvent, VerdictEvent

T = TypeVar("T")
AskedRole = Literal["planner", "reviewer", "critic"]


class RoleHost(Protocol):
    """What the coordinator needs from the run it coordinates."""

    async def ask(self, role: AskedRole, messages: list[ChatMessage], tool: dict[str, Any]) -> ChatResult:
        """One completion of ``role``'s model, offered only ``tool`` (budgets apply)."""
        ...

    async def execute(self, request: str, subtask: int) -> str | None:
        """Run the executor on ``request`` (sub-task index ``subtask``) with the agents' tools:
        its answer, or ``None`` when the run stops or pauses there (a budget, an approval)."""
        ...

    async def persist(self, state: CoordinatorState) -> None:
        """Keep ``state`` where a resume finds it (after every transition)."""
        ...

    def emit(self, event: RunEvent) -> None:
        """A live event for a streaming client (``plan``, ``subtask_started``, ``verdict``)."""
        ...

    async def escalate(self, state: CoordinatorState) -> str:
        """Open a person's decision on the disagreement of ``state.pending``; returns its approval id."""
        ...

    @property
    def tool_names(self) -> list[str]:
        """The executor's tools, named to the planner."""
        ...


class Coordinator:
    """Runs the phases of one coordinated run (module docstring)."""

    def __init__(self, host: RoleHost, query: str, roles: Collection[str]) -> None:
        self._host = host
        self._query = query
        self._reviewer = "reviewer" in roles
        self._critic = "critic" in roles

    async def run(self, state: CoordinatorState) -> CoordinatorState:
        """Go on from ``state.phase`` until the run completes, blocks, escalates, or the executor
        stops (then ``phase`` stays ``execute``: a resume runs the sub-task's attempt again)."""
        while True:
            phase = state.phase
            if phase in ("complete", "blocked", "escalated"):
                return state
            if phase == "init":
                state.phase = "plan"
            elif phase == "plan":
                await self._plan(state)
            elif phase == "dispatch":
                self._dispatch(state)
            elif phase == "execute":
                if not await self._execute(state):
                    return state
            elif phase == "review_step":
                await self._review(state)
            elif phase == "next_subtask":
                self._next(state)
            await self._host.persist(state)

    def decide(self, state: CoordinatorState, decision: Literal["approved", "rejected", "expired"]) -> None:
        """A person decided the disagreement: ``approved`` keeps the reviewer's verdict,
        ``rejected`` takes the critic's; ``expired`` blocks the run."""
        pending = state.pending
        if pending is None or state.phase != "escalated":
            return
        state.pending = None
        state.current = pending.subtask
        if decision == "expired":
            self.block(state, "no one decided the disagreement between reviewer and critic in time")
            return
        chosen = pending.reviewer if decision == "approved" else pending.critic
        who = "reviewer" if decision == "approved" else "critic"
        verdict = ReviewVerdict(
            role="person",
            verdict=chosen.verdict,
            reason=f"a person sided with the {who}",
            attempt=chosen.attempt,
        )
        state.subtask.verdicts.append(verdict)
        self._host.emit(_verdict_event(state, verdict))
        self._apply(state, verdict)

    # ------------------------------------------------------------------ the phases

    async def _plan(self, state: CoordinatorState) -> None:
        messages: list[ChatMessage] = [
            {"role": "system", "content": planner_prompt(self._host.tool_names)},
            {"role": "user", "content": self._query},
        ]
        subtasks = await self._answer("planner", messages, PLAN_TOOL, plan_of)
        if subtasks is None:
            self.block(
                state, f"the planner's model answered without calling {SUBMIT_PLAN}, even after a reminder"
            )
            return
        state.subtasks, state.current, state.phase = subtasks, 0, "dispatch"
        self._host.emit(
            PlanEvent(subtasks=[PlannedSubtask(task=s.task, criteria=s.criteria) for s in subtasks])
        )

    def _dispatch(self, state: CoordinatorState) -> None:
        subtask = state.subtask
        subtask.status, subtask.attempts = "running", subtask.attempts + 1
        state.phase = "execute"
        self._host.emit(SubtaskStartedEvent(index=state.current, task=subtask.task, attempt=subtask.attempts))

    async def _execute(self, state: CoordinatorState) -> bool:
        answer = await self._host.execute(
            executor_request(self._query, state.subtasks, state.current), state.current
        )
        if answer is None:
            return False
        self.executed(state, answer)
        return True

    def executed(self, state: CoordinatorState, answer: str) -> None:
        """The executor answered the current sub-task: on to its review."""
        subtask = state.subtask
        subtask.output, subtask.status = answer, "reviewing"
        state.phase = "review_step"

    async def _review(self, state: CoordinatorState) -> None:
        subtask = state.subtask
        if not self._reviewer:
            self._apply(
                state,
                ReviewVerdict(role="person", verdict="pass", reason="no reviewer", attempt=subtask.attempts),
            )
            return
        reviewer = await self._judge(state, "reviewer", None)
        if reviewer is None:
            return
        if self._critic:
            critic = await self._judge(state, "critic", reviewer)
            if critic is None:
                return
            if critic.verdict != reviewer.verdict:
                state.pending = Disagreement(
                    approval_id="", subtask=state.current, reviewer=reviewer, critic=critic
                )
                state.phase = "escalated"
                state.pending.approval_id = await self._host.escalate(state)
                return
        self._apply(state, reviewer)

    async def _judge(
        self, state: CoordinatorState, role: Literal["reviewer", "critic"], reviewer: ReviewVerdict | None
    ) -> ReviewVerdict | None:
        subtask = state.subtask
        told = (reviewer.verdict, reviewer.reason) if reviewer is not None else None
        messages: list[ChatMessage] = [
            {"role": "system", "content": reviewer_prompt(role)},
            {"role": "user", "content": review_request(self._query, subtask, told)},
        ]
        found = await self._answer(role, messages, REVIEW_TOOL, review_of)
        if found is None:
            self.block(
                state, f"the {role}'s model answered without calling {SUBMIT_REVIEW}, even after a reminder"
            )
            return None
        verdict = ReviewVerdict(role=role, verdict=found[0], reason=found[1], attempt=subtask.attempts)
        subtask.verdicts.append(verdict)
        self._host.emit(_verdict_event(state, verdict))
        return verdict

    def _apply(self, state: CoordinatorState, verdict: ReviewVerdict) -> None:
        """The verdict that stands: pass → next; needs_retry → once more; fail → blocked."""
        subtask = state.subtask
        name: VerdictName = verdict.verdict
        if name == "pass":
            subtask.status, state.phase = "passed", "next_subtask"
        elif name == "needs_retry" and subtask.attempts < MAX_ATTEMPTS:
            subtask.retry_reason, state.phase = verdict.reason, "dispatch"
        elif name == "needs_retry":
            self.block(
                state,
                f"sub-task {state.current + 1} still needs a retry after {subtask.attempts} attempts: {verdict.reason}",
            )
        else:
            subtask.status = "failed"
            self.block(state, f"sub-task {state.current + 1} failed review: {verdict.reason}")

    def _next(self, state: CoordinatorState) -> None:
        if state.current + 1 < len(state.subtasks):
            state.current += 1
            state.phase = "dispatch"
            return
        state.phase = "complete"
        state.answer = _answer_of(state.subtasks)

    def block(self, state: CoordinatorState, reason: str) -> None:
        if state.subtasks and state.subtask.status not in ("passed", "failed"):
            state.subtask.status = "blocked"
        state.phase, state.reason = "blocked", reason

    async def _answer(
        self,
        role: AskedRole,
        messages: list[ChatMessage],
        tool: dict[str, Any],
        parse: Callable[[ChatResult], T | None],
    ) -> T | None:
        """The role's answer through its tool; one reminder when the model answers without it."""
        reply = await self._host.ask(role, messages, tool)
        found = parse(reply)
        if found is not None:
            return found
        name = tool["function"]["name"]
        messages.append({"role": "assistant", "content": reply.content or ""})
        messages.append({"role": "user", "content": REMINDER.format(tool=name)})
        return parse(await self._host.ask(role, messages, tool))


def _verdict_event(state: CoordinatorState, verdict: ReviewVerdict) -> VerdictEvent:
    return VerdictEvent(
        index=state.current,
        role=verdict.role,
        verdict=verdict.verdict,
        reason=verdict.reason,
        attempt=verdict.attempt,
    )


def _answer_of(subtasks: list[Subtask]) -> str:
    if len(subtasks) == 1:
        return subtasks[0].output or ""
    return "\n\n".join(f"{n}. {s.task}\n{s.output or ''}" for n, s in enumerate(subtasks, start=1))
