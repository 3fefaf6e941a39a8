"""The run's two verbs: start a run, or resume one from what it waits for.

:meth:`RunEngine.start` runs a new query: the coordinator of roles when it has ``roles``, a plan
proposal when it asks for one, else the orchestrator's rounds (or a proposed plan's steps).
:meth:`RunEngine.resume` goes on with a run from its :class:`~master.runs.state.RunState`, by
what it waits for (:attr:`~master.runs.state.RunState.pending`): a person's approvals
(:mod:`master.runs.held`), its asker's tool results, a raised budget (a halted or lost run), or,
for a coordinated run, the coordinator's state (:mod:`master.runs.roles`). :meth:`RunEngine.settle`
keeps, after either, what the run waits for next and what it resumes from.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, assert_never

from master.agents.calls import ToolRun
from master.auth import Scope
from master.conversation.approvals import ApprovalStore
from master.conversation.history import CLIENT
from master.conversation.outcome import Outcome
from master.conversation.store import SessionStore
from master.errors import InvalidPlan, QueryRejected, SessionStoreUnavailable
from master.llm.tokens import count_tool
from master.llm.windows import ContextWindows
from master.orchestration.model_catalog import ModelCatalog
from master.orchestration.plans import (
    SUBMIT_PLAN,
    describe,
    find_plan,
    plan_from_reply,
    planning_prompt,
    resolve_steps,
)
from master.orchestration.prompts import system_prompt
from master.runs.context import ContextMaker
from master.runs.extras import RunExtras
from master.runs.held import HeldRuns
from master.runs.roles import run_roles
from master.runs.state import (
    ApprovalPending,
    BudgetPending,
    CallRef,
    ClientToolResultPending,
    Limits,
    OperatorDecisionPending,
    RunState,
    Spent,
    read_state,
)
from master.runs.store import LiveRun, RunStore
from master.runs.work import UNKNOWN_CALL, Decisions, RunWork, run_part, with_note
from master.settings import Settings
from protocol import Approval

logger = logging.getLogger("master.runs.engine")


class RunEngine:
    """Starts and resumes runs (module docstring)."""

    def __init__(
        self,
        *,
        settings: Settings,
        sessions: SessionStore,
        catalog: ModelCatalog,
        windows: ContextWindows | None = None,
        approvals: ApprovalStore | None = None,
        runs: RunStore | None = None,
        on_summary_rejected: Callable[[str], None] | None = None,
    ) -> None:
        self.sessions = sessions
        self.catalog = catalog
        self.runs = runs
        self.held = HeldRuns(sessions=sessions, approvals=approvals, runs=runs)
        self.context = ContextMaker(
            settings=settings,
            sessions=sessions,
            catalog=catalog,
            windows=windows,
            on_summary_rejected=on_summary_rejected,
        )

    # ------------------------------------------------------------------ the two verbs

    async def start(self, run: RunWork, tools: list[dict[str, Any]]) -> tuple[Outcome, list[Approval] | None]:
        """Run a new query (module docstring). Returns its outcome and the approvals a
        coordinated run's disagreement waits for."""
        request = run.request
        if request.roles is not None:
            return await run_roles(self, run, tools)
        if request.auto_require_plan_approval and request.auto_plan_execute is None:
            return await self._propose_plan(run), None
        return await self._execute(run, tools), None

    async def resume(
        self, run: RunWork, tools: list[dict[str, Any]], state: RunState, decisions: Decisions
    ) -> tuple[Outcome, list[Approval] | None]:
        """Go on with the run of ``state`` by what it waits for, with ``decisions``."""
        if state.roles is not None:
            return await run_roles(self, run, tools, state)
        pending = state.pending
        if isinstance(pending, ApprovalPending):
            return await self.held.resume(run, tools, state, taken=decisions.claimed), None
        if isinstance(pending, ClientToolResultPending):
            if decisions.tool_results is None:
                raise QueryRejected("invalid_query", "the run waits for the results of its tool calls")
            return await self._continue(run, tools, state, decisions.tool_results), None
        if isinstance(pending, BudgetPending) or pending is None:
            return await self.halted(run, tools, state), None
        if isinstance(pending, OperatorDecisionPending):
            raise QueryRejected("invalid_query", "an operator's decision waits only in a run with roles")
        assert_never(pending)

    async def waiting(
        self, session_id: str, scope: Scope, extras: RunExtras, results: Mapping[str, str] | None
    ) -> RunState | None:
        """The state of the run a request goes on with (``None``: a new run): the session's run
        waiting for ``results``, its run paused for approvals (every one decided), or a halted or
        lost run claimed from its record."""
        state = await self._paused(session_id, results) if results is not None else None
        if extras.resume_approvals:
            state = await self.held.decided_state(session_id, scope)
        if extras.resume_run is not None:
            state = extras.resume_run.checkpoint.model_copy(deep=True)
        return state

    async def settle(
        self, run: RunWork, outcome: Outcome, held: list[Approval] | None
    ) -> list[Approval] | None:
        """After a run's part: keep what it waits for (its asker's tool results, a person's
        decisions) and what it resumes from (a halt's checkpoint, a coordinated run's state).
        Returns the approvals it waits for."""
        if outcome.status == "awaiting_tool_results":
            await self._pause(run, outcome)
        live = run.live
        if live is not None:
            live.stopped_by = outcome.stopped_by
            if run.coordinated:  # resumable from the coordinator's state, or not at all
                live.checkpoint, live.checkpoint_calls = run.resume_from, len(live.completed)
            elif outcome.status == "stopped" and run.recorder.plan_id is None and run.messages is not None:
                live.checkpoint = halt_checkpoint(run, outcome, live)
                live.checkpoint_calls = len(live.completed)
            else:  # answered, or paused again (its session keeps it)
                live.checkpoint = None
        return await self.held.hold(run, outcome) if outcome.held else held

    # ------------------------------------------------------------------ starting

    async def _execute(self, run: RunWork, extra_tools: list[dict[str, Any]]) -> Outcome:
        request = run.request
        system = with_note(system_prompt(request.orchestrator_prompt_profile), run.system_note)
        costs = [*run.toolbox.token_costs(count_tool), *map(count_tool, extra_tools)]
        context = await self.context.build(run, system, [*run.toolbox.openai_tools(), *extra_tools], costs)
        execution = request.auto_plan_execute
        run.messages = context.messages
        if execution is None:
            return await run.orchestrator.run(
                messages=context.messages,
                tools=context.tools if run.extras.offer_tools else [],
                toolbox=run.toolbox,
                model=run.model,
                auto_mode=request.auto_mode,
                budget=run.budget,
                hooks=run.hooks,
            )
        plan, executed = find_plan(run.turns, execution.plan_id)
        if plan is None:
            raise QueryRejected(
                "unknown_plan", f"no plan {execution.plan_id!r} in session {request.session_id!r}"
            )
        if executed:
            raise QueryRejected("plan_already_executed", f"plan {execution.plan_id!r} was already executed")
        try:
            steps = resolve_steps(run.toolbox, execution.steps if execution.steps is not None else plan.steps)
        except InvalidPlan as exc:
            raise QueryRejected(
                "invalid_plan", f"plan {execution.plan_id!r} refused, nothing was run: {exc}"
            ) from None
        # The turns were read when the request started: only an atomic claim in Redis makes sure
        # that, of concurrent executions, exactly one runs the steps.
        try:
            claimed = await self.sessions.claim_plan(
                run.recorder.session_id, execution.plan_id, run.recorder.query_id
            )
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        if not claimed:
            raise QueryRejected(
                "plan_already_executed", f"plan {execution.plan_id!r} was already executed (or is running)"
            )
        run.recorder.plan_id = execution.plan_id
        run.recorder.flush_each_step = True
        return await run.orchestrator.run_steps(
            messages=context.messages, steps=steps, model=run.model, budget=run.budget, hooks=run.hooks
        )

    async def _propose_plan(self, run: RunWork) -> Outcome:
        if not len(run.toolbox):  # no model could plan with no tool: refuse before asking one
            raise QueryRejected(
                "invalid_query",
                "no linked agent offers a tool, so there is nothing to plan; connect an action agent "
                "or check allowed_agent_ids",
            )
        system = (
            with_note(system_prompt(run.request.orchestrator_prompt_profile), run.system_note)
            + "\n\n"
            + planning_prompt(run.toolbox)
        )
        context = await self.context.build(run, system, [SUBMIT_PLAN])
        run.budget.check_tokens()
        reply = await run.orchestrator.llm.complete(
            model=run.model, messages=context.messages, tools=[SUBMIT_PLAN]
        )
        run.budget.add_tokens(reply.total_tokens)
        try:
            plan = plan_from_reply(reply)
            resolve_steps(run.toolbox, plan.steps)
        except InvalidPlan as exc:
            raise QueryRejected("llm_invalid_plan", f"the model proposed no usable plan: {exc}") from None
        return Outcome(answer=describe(plan), status="awaiting_approval", plan=plan)

    # ------------------------------------------------------------------ resuming

    async def halted(self, run: RunWork, tools: list[dict[str, Any]], state: RunState) -> Outcome:
        """Go on with a run a budget or the step limit stopped (``POST /runs/{run_id}/resume``):
        its messages as they were, the budget it spent counted against the new one, the calls it
        had in flight told as unknown (never sent again), then the next rounds."""
        messages: list[Any] = list(state.messages)
        unknown = state.unknown
        if unknown:
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {
                                "name": call.name,
                                "arguments": call.arguments
                                if isinstance(call.arguments, str)
                                else json.dumps(call.arguments),
                            },
                        }
                        for call in unknown
                    ],
                }
            )
            messages.extend(
                {"role": "tool", "tool_call_id": call.id, "content": UNKNOWN_CALL} for call in unknown
            )
            if run.live is not None:
                for call in unknown:
                    run.live.add_unknown(call.ref())
        state.spent.charge(run.budget)
        budget = run.budget
        run.messages = messages
        auto = run.request.auto_mode
        steps = state.steps
        return await run.orchestrator.run(
            messages=messages,
            tools=[*run.toolbox.openai_tools(), *tools] if run.extras.offer_tools else [],
            toolbox=run.toolbox,
            model=run.model,
            auto_mode=auto,
            budget=budget,
            hooks=run.hooks,
            # Without auto mode the resumed part gets its tool round; the step limit gives more rounds.
            steps_done=steps if auto and state.stopped_by != "max_steps" else 0,
        )

    async def session_of_calls(self, results: Mapping[str, str]) -> str:
        """The session whose paused run waits for the results' calls."""
        first = next(iter(results), None)
        try:
            session_id = await self.sessions.paused_session(first) if first is not None else None
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        if session_id is None:
            raise QueryRejected(
                "invalid_query",
                f"no run waits for the result of tool call {first!r}: it was continued already, "
                "expired, or never asked for",
            )
        return session_id

    async def _paused(self, session_id: str, results: Mapping[str, str]) -> RunState:
        """The session's paused run, when ``results`` answer exactly the calls it waits for."""
        try:
            state = read_state(await self.sessions.paused(session_id), where=f"session {session_id}")
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        if state is None:
            raise QueryRejected("invalid_query", f"no run of session {session_id!r} waits for tool results")
        pending = state.pending
        if not isinstance(pending, ClientToolResultPending):
            raise QueryRejected("invalid_query", f"no run of session {session_id!r} waits for tool results")
        waiting = [call.id for call in pending.calls]
        missing = [call_id for call_id in waiting if call_id not in results]
        unknown = [call_id for call_id in results if call_id not in waiting]
        if missing or unknown:
            raise QueryRejected(
                "invalid_query",
                f"the paused run of session {session_id!r} waits for the results of "
                f"{', '.join(map(repr, waiting))}"
                + (f"; missing: {', '.join(map(repr, missing))}" if missing else "")
                + (f"; not asked for: {', '.join(map(repr, unknown))}" if unknown else ""),
            )
        return state

    async def _continue(
        self, run: RunWork, tools: list[dict[str, Any]], state: RunState, results: Mapping[str, str]
    ) -> Outcome:
        """Go on with a paused run: its messages, the results it waited for, the next rounds."""
        try:
            if await self.sessions.take_paused(run.recorder.session_id) is None:
                raise QueryRejected("invalid_query", "the paused run was continued already")
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        pending = state.pending
        assert isinstance(pending, ClientToolResultPending)  # checked by _paused
        messages: list[Any] = list(state.messages)
        client_runs = []
        for call in pending.calls:
            content = results[call.id]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
            client_runs.append(
                ToolRun(call.name, CLIENT, call.name, call.arguments, success=True, result=content)
            )
        await (run.hooks.on_step or run.recorder.steps)(client_runs)
        run.messages = messages
        return await run.orchestrator.run(
            messages=messages,
            tools=[*run.toolbox.openai_tools(), *tools] if run.extras.offer_tools else [],
            toolbox=run.toolbox,
            model=run.model,
            auto_mode=run.request.auto_mode,
            budget=run.budget,
            hooks=run.hooks,
            steps_done=state.steps,
        )

    async def _pause(self, run: RunWork, outcome: Outcome) -> None:
        """Keep a run that waits for its asker's tool results, to go on with the next request."""
        recorder = run.recorder
        state = RunState(
            query=recorder.query,
            query_id=recorder.query_id,
            messages=run.messages or [],
            steps=outcome.steps,
            status="awaiting_tool_results",
            pending=ClientToolResultPending(calls=[CallRef(**call.model_dump()) for call in outcome.pending]),
            **run_part(run),
        )
        try:
            await self.sessions.pause(
                recorder.session_id, state.dump(), [call.id for call in outcome.pending]
            )
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None


def halt_checkpoint(run: RunWork, outcome: Outcome, live: LiveRun) -> RunState:
    """What a run a budget or the step limit stopped resumes from."""
    messages = list(run.messages or [])
    last = messages[-1] if messages else None
    if outcome.stopped_by == "max_steps" and isinstance(last, dict) and last.get("role") == "user":
        messages.pop()  # the step limit's note: a resume goes on with tools
    return RunState(
        run_id=live.run_id,
        tenant=live.tenant,
        session_id=run.recorder.session_id,
        query=run.recorder.query,
        query_id=run.recorder.query_id,
        messages=messages,
        steps=outcome.steps,
        status="stopped",
        stopped_by=outcome.stopped_by,
        request=run.request.model_dump(mode="json", exclude={"attachments", "stream"}),
        budget=Limits.of(run.budget),
        spent=Spent.of(run.budget),
        unknown=[CallRef.model_validate(call) for call in live.in_flight],
        pending=BudgetPending(stopped_by=outcome.stopped_by),
    )
