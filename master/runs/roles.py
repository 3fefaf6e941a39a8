"""Running a query's roles (``roles``: :mod:`master.orchestration.roles`) inside a run.

:class:`RolesRun` is the coordinator's :class:`~master.orchestration.roles.RoleHost` for one run:
each role's model (its own, or the query's) through the orchestrator's LLM within the run's
budget; the executor through :meth:`master.orchestration.orchestrator.Orchestrator.run` with
the agents' tools and the run's hooks (approvals, budgets, records, events as everywhere); the
state after every transition in the run's record and checkpoint (:meth:`RunStore.save`), so that
``POST /runs/{run_id}/resume`` continues a lost run at its last phase on any master; and a
disagreement between reviewer and critic as an approval (``POST /approvals/{approval_id}``:
approve keeps the reviewer's verdict, reject takes the critic's), the run paused in its session
like a run whose calls wait for a person.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import TYPE_CHECKING, Any

from master.agents.calls import ToolRun
from master.agents.registry import AgentTool
from master.auth import Scope
from master.conversation.outcome import Outcome
from master.errors import BudgetExceeded, QueryRejected, SessionStoreUnavailable
from master.llm.model import ChatMessage, ChatResult
from master.orchestration.model_catalog import ModelCatalog
from master.orchestration.prompts import system_prompt
from master.orchestration.roles import Coordinator, CoordinatorState
from master.orchestration.roles.coordinator import AskedRole
from master.runs.state import (
    ApprovalPending,
    BudgetPending,
    CallRef,
    Limits,
    OperatorDecisionPending,
    RunState,
    Spent,
)
from master.runs.work import RunWork, run_part, session_owner, with_note
from protocol import (
    Approval,
    ApprovalRequiredEvent,
    PendingToolCall,
    QueryRequest,
    RoleName,
    RunEvent,
    ToolSchema,
)

if TYPE_CHECKING:
    from master.runs.engine import RunEngine


COORDINATOR = "coordinator"
"""The agent id of a disagreement's approval (its tool: :data:`DISAGREEMENT`)."""
DISAGREEMENT = "critic_disagreement"
_DECISION_TOOL = AgentTool.compile(
    COORDINATOR,
    ToolSchema(
        name=DISAGREEMENT,
        description="The reviewer and the critic disagree: approve keeps the reviewer's verdict, "
        "reject takes the critic's.",
        parameters={"type": "object"},
    ),
)


class RolesRun:
    """The coordinator's host for one run (module docstring)."""

    def __init__(self, service: RunEngine, run: RunWork, extra_tools: list[dict[str, Any]]) -> None:
        self._service = service
        self._run = run
        self._extra_tools = extra_tools
        self._roles = run.request.role_map()
        self.outcome = Outcome(answer="")
        self.approvals: list[Approval] | None = None
        self.coordinator = Coordinator(self, run.recorder.query, self._roles)
        self._state = CoordinatorState()
        """The state the coordinator works on (the same object)."""
        self._unknown_note = ""
        """Told to the executor of a sub-task resumed mid-attempt: the calls whose outcome is unknown."""

    # ------------------------------------------------------------------ RoleHost

    @property
    def tool_names(self) -> list[str]:
        return [tool["function"]["name"] for tool in self._run.toolbox.openai_tools()]

    def model_of(self, role: RoleName) -> str:
        config = self._roles.get(role)
        wanted = config.model if config is not None else None
        if wanted is None:
            return self._run.model
        try:
            return self._service.catalog.resolve(wanted)
        except ValueError as exc:
            raise QueryRejected("invalid_model", f"roles.{role}.model: {exc}") from None

    async def ask(self, role: AskedRole, messages: list[ChatMessage], tool: dict[str, Any]) -> ChatResult:
        budget = self._run.budget
        budget.check_tokens()
        async with asyncio.timeout(budget.remaining_seconds):
            reply = await self._run.orchestrator.llm.complete(
                model=self.model_of(role),
                messages=messages,
                tools=[tool],
                options=self._run.hooks.llm_options,
            )
        budget.add_usage(reply.total_tokens, reply.prompt_tokens, reply.completion_tokens)
        return reply

    async def execute(self, request: str, subtask: int) -> str | None:
        run = self._run
        messages: list[ChatMessage] = [
            {"role": "system", "content": with_note(system_prompt("roles"), run.system_note)},
            {"role": "user", "content": request + self._unknown_note},
        ]
        self._unknown_note = ""
        run.messages = messages
        rounds = 0
        on_step = run.hooks.on_step

        async def step_done(runs: list[ToolRun]) -> None:
            # Each round's results kept with the state: a resume goes on from here, not again.
            nonlocal rounds
            rounds += 1
            if on_step is not None:
                await on_step(runs)
            await self._save(
                self.checkpoint(self._state).model_copy(update={"messages": messages, "steps": rounds})
            )

        run.hooks.on_step = step_done
        try:
            outcome = await run.orchestrator.run(
                messages=messages,
                tools=[*run.toolbox.openai_tools(), *self._extra_tools] if run.extras.offer_tools else [],
                toolbox=run.toolbox,
                model=self.model_of("executor"),
                auto_mode=True,
                budget=run.budget,
                hooks=run.hooks,
            )
        finally:
            run.hooks.on_step = on_step
        return await self.executed(outcome, subtask)

    async def executed(self, outcome: Outcome, subtask: int) -> str | None:
        """The executor's answer, or ``None`` when it stopped (a budget: resumable at this
        attempt) or waits for a person (its calls held as approvals, the run paused with the
        coordinator's state); a pause for the asker's own tools blocks the run."""
        self.outcome.tool_runs.extend(outcome.tool_runs)
        self.outcome.steps += outcome.steps
        if outcome.status == "completed":
            return outcome.answer
        if outcome.status == "stopped":
            self.outcome.status, self.outcome.stopped_by = "stopped", outcome.stopped_by
            messages = list(self._run.messages or [])
            last = messages[-1] if messages else None
            if outcome.stopped_by == "max_steps" and isinstance(last, dict) and last.get("role") == "user":
                messages.pop()  # the step limit's note: a resume goes on with tools
            self._run.resume_from = self.checkpoint(self._state).model_copy(
                update={
                    "messages": messages,
                    "steps": outcome.steps,
                    "stopped_by": outcome.stopped_by,
                    "status": "stopped",
                    "pending": BudgetPending(stopped_by=outcome.stopped_by),
                }
            )
            return None
        if outcome.held:
            self.approvals = await self._hold(outcome)
            self.outcome.status = "awaiting_approval"
            return None
        raise _Blocked(
            f"sub-task {subtask + 1}: the executor called a tool the asker runs itself, which a "
            "coordinated run does not wait for"
        )

    async def persist(self, state: CoordinatorState) -> None:
        await self._save(self.checkpoint(state))

    async def _save(self, checkpoint: RunState) -> None:
        """The run's record (with the coordinator's state) and ``checkpoint``, written now."""
        live, runs = self._run.live, self._service.runs
        if live is None:
            return
        assert checkpoint.roles is not None
        live.coordinator = checkpoint.roles.model_dump(mode="json")
        live.dirty = True
        if runs is None:
            return
        try:
            await runs.save(live, checkpoint)
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None

    def emit(self, event: RunEvent) -> None:
        self._run.hooks.emit(event)

    async def escalate(self, state: CoordinatorState) -> str:
        """One approval for the disagreement of ``state.pending``, the run paused in its session
        (resumed through the approval desk once it is decided)."""
        run, service = self._run, self._service
        pending = state.pending
        assert pending is not None
        arguments = {
            "subtask": pending.subtask + 1,
            "task": state.subtasks[pending.subtask].task,
            "reviewer": pending.reviewer.model_dump(mode="json"),
            "critic": pending.critic.model_dump(mode="json"),
        }
        call = PendingToolCall(
            id=f"call-{uuid.uuid4().hex}",
            name=f"{COORDINATOR}__{DISAGREEMENT}",
            arguments=json.dumps(arguments),
        )
        session_id = run.recorder.session_id
        owner = await session_owner(service.sessions, run.principal, session_id, run.new_session)
        approvals = await service.held.keep(
            session_id,
            owner,
            run.principal,
            [(call, COORDINATOR, _DECISION_TOOL)],
            self._paused().model_copy(update={"pending": OperatorDecisionPending()}),
        )
        self.approvals = approvals
        for approval in approvals:
            self.emit(ApprovalRequiredEvent(**dict(approval)))
        return approvals[0].approval_id

    # ------------------------------------------------------------------ driving

    async def start(self, state: CoordinatorState | None, decided: dict[str, Any] | None = None) -> Outcome:
        """Run the coordinator from ``state`` (a new run's when ``None``); ``decided``: the
        approval record of the disagreement the run waited for."""
        state = self.adopt(state or CoordinatorState())
        if state.phase == "execute" and state.subtasks:  # resumed mid-attempt: tell what was lost
            self._unknown_note = _unknown_note(self._run)
        if decided is not None:
            status = str(decided.get("status"))
            self.coordinator.decide(
                state,
                "approved" if status == "approved" else "rejected" if status == "rejected" else "expired",
            )
        try:
            state = await self.coordinator.run(state)
        except _Blocked as exc:
            self.coordinator.block(state, str(exc))
            await self.persist(state)
        except BudgetExceeded as exc:
            self.outcome.status, self.outcome.stopped_by = "stopped", exc.name
            self._run.resume_from = self.checkpoint(state).model_copy(
                update={"status": "stopped", "pending": BudgetPending(stopped_by=exc.name)}
            )
        except TimeoutError:
            self.outcome.status, self.outcome.stopped_by = "stopped", "max_seconds"
            self._run.resume_from = self.checkpoint(state).model_copy(
                update={"status": "stopped", "pending": BudgetPending(stopped_by="max_seconds")}
            )
        return self.ended(state)

    def adopt(self, state: CoordinatorState) -> CoordinatorState:
        """Work on ``state`` (shown in the run's record from now on)."""
        self._state = state
        if self._run.live is not None:
            self._run.live.coordinator = state.model_dump(mode="json")
        return state

    def ended(self, state: CoordinatorState) -> Outcome:
        """The run's outcome where the coordinator stopped."""
        if self._run.live is not None:
            self._run.live.coordinator = state.model_dump(mode="json")
        if state.phase == "complete":
            self.outcome.answer = state.answer or ""
        elif state.phase == "blocked":
            self.outcome.status, self.outcome.stopped_by = "stopped", "blocked"
            self.outcome.answer = f"The run is blocked: {state.reason}"
        elif state.phase == "escalated":
            self.outcome.status = "awaiting_approval"
            self.outcome.answer = "The reviewer and the critic disagree: a person decides."
        return self.outcome

    def checkpoint(self, state: CoordinatorState) -> RunState:
        """What a resume continues from: the coordinator's state, the request, the budget spent."""
        run = self._run
        live = run.live
        return RunState(
            run_id=live.run_id if live is not None else None,
            tenant=live.tenant if live is not None else None,
            session_id=run.recorder.session_id,
            query=run.recorder.query,
            query_id=run.recorder.query_id,
            request=run.request.model_dump(mode="json", exclude={"attachments", "stream"}),
            budget=Limits.of(run.budget),
            spent=Spent.of(run.budget),
            roles=state.model_copy(deep=True),
        )

    async def _hold(self, outcome: Outcome) -> list[Approval]:
        """The executor's held calls as approvals; the run paused in its session with the
        coordinator's state, to go on with this sub-task once they are decided."""
        run, service = self._run, self._service
        calls = []
        for call in outcome.held:
            target = run.toolbox.resolve(call.name)
            assert target is not None  # held calls were resolved and validated
            agent, tool = target
            calls.append((call, agent.agent_id, tool))
        session_id = run.recorder.session_id
        owner = await session_owner(service.sessions, run.principal, session_id, run.new_session)
        paused = self._paused().model_copy(update={"messages": run.messages or [], "steps": outcome.steps})
        approvals = await service.held.keep(session_id, owner, run.principal, calls, paused)
        for approval in approvals:
            self.emit(ApprovalRequiredEvent(**dict(approval)))
        return approvals

    def _paused(self) -> RunState:
        run = self._run
        return RunState(
            query=run.recorder.query,
            query_id=run.recorder.query_id,
            request=run.request.model_dump(mode="json", exclude={"attachments", "stream"}),
            roles=self._state.model_copy(deep=True),
            pending=ApprovalPending(),
            **run_part(run),
        )


class _Blocked(Exception):
    """The executor paused in a way the coordinator does not wait through."""


def check_role_models(catalog: ModelCatalog, request: QueryRequest) -> None:
    """Refuse a role's model the master does not offer (``invalid_model``), before the run starts."""
    for role, config in request.role_map().items():
        if config.model is not None:
            try:
                catalog.resolve(config.model)
            except ValueError as exc:
                raise QueryRejected("invalid_model", f"roles.{role}.model: {exc}") from None


async def run_roles(
    service: RunEngine, run: RunWork, extra_tools: list[dict[str, Any]], paused: RunState | None = None
) -> tuple[Outcome, list[Approval] | None]:
    """Run (or go on with) the coordinator of ``run``: ``paused`` is a resumed run's checkpoint
    (``kind: roles``) or the session's run paused on a disagreement (``kind: approval``, decided).
    Returns the outcome and the approvals a new disagreement waits for."""
    host = RolesRun(service, run, extra_tools)
    run.coordinated = True
    if paused is None:
        return await host.start(None), host.approvals
    state = paused.roles.model_copy(deep=True) if paused.roles is not None else CoordinatorState()
    decided: dict[str, Any] | None = None
    if (
        isinstance(paused.pending, ApprovalPending) and state.phase == "execute"
    ):  # the executor's calls, decided
        host.adopt(state)
        run.model = host.model_of("executor")
        answer = await host.executed(await service.held.resume(run, extra_tools, paused), state.current)
        if answer is None:
            return host.ended(state), host.approvals
        host.coordinator.executed(state, answer)
        await host.persist(state)
    elif paused.held is not None:  # the operator's decision on a disagreement
        try:
            if await service.sessions.take_paused(run.recorder.session_id) is None:
                raise QueryRejected("invalid_query", "the paused run was resumed already")
            held = paused.held.held
            store = service.held.approvals
            scope = Scope.of(run.principal)
            found = await store.record(held[0].approval_id, scope) if held and store is not None else None
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        decided = found or {"status": "expired"}
    elif state.phase == "execute" and paused.messages:  # the executor's rounds so far, kept
        host.adopt(state)
        run.model = host.model_of("executor")
        answered = {str(m.get("tool_call_id")) for m in paused.messages if isinstance(m, dict)}
        unknown = [
            CallRef.model_validate(call)
            for call in (run.live.unknown if run.live else [])
            if str(call.get("id")) not in answered
        ]
        outcome = await service.halted(run, extra_tools, paused.model_copy(update={"unknown": unknown}))
        answer = await host.executed(outcome, state.current)
        if answer is None:
            return host.ended(state), host.approvals
        host.coordinator.executed(state, answer)
        await host.persist(state)
    else:  # a lost or halted run: what it spent counts against its new budget
        paused.spent.charge(run.budget)
    return await host.start(state, decided), host.approvals


def _unknown_note(run: RunWork) -> str:
    unknown = run.live.unknown if run.live is not None else []
    if not unknown:
        return ""
    calls = ", ".join(f"{call.get('name')}({call.get('arguments')})" for call in unknown)
    return (
        f"\n\nAn earlier attempt of this sub-task was cut off; the outcome of these calls is unknown "
        f"(they may or may not have taken effect): {calls}. Do not repeat them unless the sub-task needs it."
    )
