"""Running one admitted query, whatever its door (:mod:`master.query.entry` calls it).

:meth:`QueryService.run` validates the request, prepares the run (its session, tools, hooks
and files: :mod:`master.query.setup`), has :class:`master.runs.engine.RunEngine` start it or
resume it (by what the run waits for) within the query's budgets, and stores the turns.
It raises :class:`QueryRejected` (with a stable code) for requests it cannot run;
:class:`master.query.entry.QueryEntry` turns every outcome into a :class:`protocol.QueryResponse`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from master.agents.calls import ToolRun
from master.agents.directory import AgentDirectory
from master.agents.dispatch import Target
from master.agents.registry import AgentTool
from master.agents.toolbox import Toolbox
from master.attachments import RagLink
from master.auth import Principal, Scope
from master.collaboration import CollaborationManager
from master.conversation.approvals import ApprovalStore
from master.conversation.outcome import Outcome
from master.conversation.store import SessionStore
from master.conversation.turns import TurnRecorder
from master.errors import LLMError, QueryRejected, SessionStoreUnavailable
from master.llm.windows import ContextWindows
from master.observability import logs, tracing
from master.observability.metrics import Metrics
from master.orchestration.budgets import BudgetTracker
from master.orchestration.model_catalog import ModelCatalog
from master.orchestration.orchestrator import (
    EventSink,
    Orchestrator,
    RunHooks,
    Verdict,
)
from master.query.policy import ApprovalPolicy
from master.query.setup import RunSetup
from master.runs.engine import RunEngine
from master.runs.extras import NO_EXTRAS, RunExtras
from master.runs.roles import check_role_models
from master.runs.state import (
    RunState,
)
from master.runs.store import LiveRun, RunStore
from master.runs.work import Decisions, RunWork, waiting_for
from master.sandbox.spawn import Spawner
from master.settings import Settings
from protocol import AgentUsed, Approval, QueryRequest, QueryResponse, Usage

logger = logging.getLogger("master.query.service")

NOT_CONFIGURED = (
    "no LLM is configured: set OPENAI_API_KEY (and OPENAI_BASE_URL for Ollama, vLLM, llama.cpp "
    "or another OpenAI-compatible server) in the environment or .env, then restart the master"
)


class QueryService:
    """Runs queries against the orchestrator and records them in the session store."""

    def __init__(
        self,
        *,
        settings: Settings,
        agents: AgentDirectory,
        sessions: SessionStore,
        catalog: ModelCatalog,
        orchestrator: Orchestrator | None,
        unavailable_reason: str = NOT_CONFIGURED,
        collaboration: CollaborationManager | None = None,
        rag: RagLink | None = None,
        spawner: Spawner | None = None,
        metrics: Metrics | None = None,
        approvals: ApprovalStore | None = None,
        runs: RunStore | None = None,
        windows: ContextWindows | None = None,
    ) -> None:
        self._metrics = metrics
        self.runs = runs
        self.approvals = approvals
        self.policy = ApprovalPolicy(settings, can_wait=approvals is not None)
        """Which calls wait for a person: the one verdict of the orchestrator's calls and of the
        doors' direct calls (:meth:`master.query.entry.QueryEntry.call_tool`)."""
        self._settings = settings
        self._agents = agents
        self._sessions = sessions
        self._catalog = catalog
        self._orchestrator = orchestrator
        self._unavailable_reason = unavailable_reason
        self._setup = RunSetup(
            settings=settings,
            agents=agents,
            sessions=sessions,
            collaboration=collaboration,
            rag=rag,
            spawner=spawner,
        )
        self.engine = RunEngine(
            settings=settings,
            sessions=sessions,
            catalog=catalog,
            windows=windows,
            approvals=approvals,
            runs=runs,
            on_summary_rejected=None if metrics is None else metrics.summary_rejected,
        )
        """Starts and resumes the runs (:mod:`master.runs.engine`)."""

    async def run(
        self,
        request: QueryRequest,
        query_id: str,
        events: EventSink | None = None,
        extras: RunExtras | None = None,
        live: LiveRun | None = None,
        *,
        principal: Principal,
    ) -> QueryResponse:
        """Answer one query. Raises :class:`QueryRejected` (with a stable code) when it cannot.

        Logs inside carry the query's ids; the query is counted and timed by outcome (``GET
        /metrics``) and, when tracing, is the root span of its trace. ``principal`` is who asks:
        another tenant's session is unknown to it (``unknown_session``), only its tenant's agents
        and the shared ones are offered, and the session it starts is its tenant's.
        """
        started = time.perf_counter()
        outcome = "internal_error"
        with (
            logs.query_context(query_id, request.session_id),
            tracing.span("query", {"openagent.query_id": query_id}) as span,
        ):
            try:
                response = await self._run(request, query_id, events, extras or NO_EXTRAS, live, principal)
                outcome = response.status or "completed"
                return response
            except QueryRejected as exc:
                outcome = exc.code
                tracing.set_attribute(span, "error.type", exc.code)
                raise
            finally:
                if self._metrics is not None:
                    self._metrics.queries.labels(outcome).inc()
                    self._metrics.query_seconds.labels(outcome).observe(time.perf_counter() - started)

    async def _run(
        self,
        request: QueryRequest,
        query_id: str,
        events: EventSink | None,
        extras: RunExtras,
        live: LiveRun | None,
        principal: Principal,
    ) -> QueryResponse:
        scope = Scope.of(principal)
        new_files = self._setup.decode_attachments(request)
        if request.auto_plan_execute is not None and request.session_id is None:
            raise QueryRejected(
                "invalid_query", "'auto_plan_execute' needs the session_id the plan was proposed in"
            )
        orchestrator = self._orchestrator
        if orchestrator is None:
            raise QueryRejected("llm_not_configured", self._unavailable_reason)
        try:
            model = self._catalog.resolve(request.orchestrator_model)
        except ValueError as exc:
            raise QueryRejected("invalid_model", str(exc)) from None
        check_role_models(self._catalog, request)
        # The agents on offer, from the start (an allowed id among them is known: no other look).
        targets = self.tool_agents(request.allowed_agent_ids, scope)
        if request.allowed_agent_ids:
            offered = {agent.agent_id for agent in targets}
            if unoffered := [agent_id for agent_id in request.allowed_agent_ids if agent_id not in offered]:
                self._setup.check_known(unoffered, scope, auto_mode=request.auto_mode)

        results = extras.tool_results
        session_hint = request.session_id
        if results is not None and session_hint is None:
            session_hint = await self.engine.session_of_calls(results)
        new_id = extras.new_session_id
        if extras.thread_id is not None and session_hint is None:
            session_hint, new_id = await self._setup.thread_session(extras.thread_id, scope)
        session_id, turns = await self._setup.load_session(session_hint, scope, new_id)
        logs.set_session(session_id)
        tracing.set_current_attribute("openagent.session_id", session_id)
        paused = await self.engine.waiting(session_id, scope, extras, results)
        if live is not None:
            live.session_id = session_id
            if paused is not None and extras.resume_run is None:  # the run goes on under its id
                live.run_id = paused.run_id or live.run_id
                live.query_id = paused.query_id or live.query_id
                live.completed[:0] = paused.completed
                live.created_at = paused.created_at or live.created_at
        toolbox = Toolbox(targets)
        settings = self._settings
        budget = BudgetTracker.from_request(
            request.budget,
            tool_calls=settings.orchestrator_max_tool_calls,
            tokens=settings.orchestrator_max_tokens,
            seconds=settings.orchestrator_max_seconds,
        )
        recorder = TurnRecorder(
            self._sessions,
            session_id,
            query=paused.query if paused else request.query,
            query_id=paused.query_id if paused else query_id,
            model=model,
            flush_each_step=request.auto_mode,
            owner=principal.tenant,
            run_id=live.run_id if live is not None else None,
        )
        hooks = RunHooks(on_step=recorder.steps, events=events, llm_options=extras.llm_options or None)
        if live is not None:
            on_step = recorder.steps

            async def step_done(runs: list[ToolRun]) -> None:
                live.done(runs)
                await on_step(runs)

            async def sending(calls: list[tuple[str, str, Any]]) -> None:
                assert self.runs is not None  # a live run is one of the store's
                await self.runs.sending(live, calls)

            hooks.on_step, hooks.sending = step_done, sending
        approval, may_wait = await self._approval_hook_of(request, session_id, toolbox)
        new_session = session_hint is None
        extra_tools = self._setup.collaboration_hook(
            hooks,
            toolbox,
            session_id,
            query_id,
            Scope.of(principal),
            lambda: self._setup.owner(principal, session_id, new_session),
        )
        extra_tools += self._setup.spawn_hook(hooks, request, principal)
        if may_wait or hooks.spawn is not None:  # else every call of the run runs: no word to ask
            hooks.approval = approval
        extra_tools += self._setup.client_tools(hooks, toolbox, extra_tools, extras.client_tools)
        rag = await self._setup.rag_query(  # the last check (its cap), storing the files it accepts
            session_id,
            toolbox,
            new_files,
            budget.remaining_seconds,
            new_session=session_hint is None,
            principal=principal,
        )
        if rag is not None:
            hooks.call_options = rag.call_options
        # Accepted: only now does the run have a record (a refusal above left nothing in Redis).
        if live is not None and self.runs is not None:
            await self.runs.accept(live)
        started = time.monotonic()
        run = RunWork(
            orchestrator,
            request,
            turns,
            toolbox,
            model,
            budget,
            recorder,
            hooks,
            extras=extras,
            live=live,
            principal=principal,
            new_session=new_session,
        )
        run.system_note = rag.system_note() if rag is not None else ""
        outcome: Outcome | None = None
        try:
            if extras.history and session_hint is None:
                run.turns = await self._setup.store_history(session_id, extras.history, principal.tenant)
            if paused is None:
                outcome, held = await self.engine.start(run, extra_tools)
            else:
                decisions = Decisions(tool_results=results, claimed=extras.resume_run is not None)
                outcome, held = await self.engine.resume(run, extra_tools, paused, decisions)
            approvals = await self.engine.settle(run, outcome, held)
            if approvals and not outcome.answer:
                outcome.answer = waiting_for(approvals)
            notice = rag.notice() if rag is not None else None
            if notice:
                outcome.answer = f"{notice}\n\n{outcome.answer}".strip()
            final = self._final_record(live, outcome)
            await recorder.finish(outcome, final)
            if final is not None and live is not None and self.runs is not None:
                self.runs.ended(live)
        except LLMError as exc:
            logger.warning("query %s failed: %s", query_id, exc)
            await self._store_quietly(recorder)
            raise QueryRejected(exc.code, str(exc)) from None
        except SessionStoreUnavailable as exc:
            logger.error("query %s answered but not stored: %s", query_id, exc)
            if live is not None and self.runs is not None:  # its final record went with the answer
                self.runs.abandon(live, f"answered, but the answer could not be stored: {exc}")
            raise QueryRejected("session_store_unavailable", f"answered, but not stored: {exc}") from None
        finally:
            if rag is not None:
                await self._setup.finish_rag(rag, outcome.tool_runs if outcome is not None else [])
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "query %s %s in %.0f ms, %d tool call(s), %d tokens",
                query_id,
                outcome.status,
                (time.monotonic() - started) * 1000,
                len(outcome.tool_runs),
                budget.tokens,
            )
        return QueryResponse(
            query_id=query_id,
            session_id=session_id,
            success=True,
            answer=outcome.answer,
            agents_used=agents_used(outcome.tool_runs),
            status=outcome.status,
            plan=outcome.plan,
            stopped_by=outcome.stopped_by,
            usage=Usage(
                prompt_tokens=budget.prompt_tokens,
                completion_tokens=budget.completion_tokens,
                total_tokens=budget.round_tokens,
            ),
            tool_calls=outcome.pending or None,
            steps=outcome.steps,
            approvals=approvals,
        )

    def _final_record(self, live: LiveRun | None, outcome: Outcome) -> tuple[str, str, int] | None:
        """The run's final record, written with the session's answer when it can be."""
        if live is None or self.runs is None:
            return None
        reason = f"stopped by {outcome.stopped_by}" if outcome.status == "stopped" else None
        return self.runs.final_record(live, outcome.status, reason)

    async def _approval_hook_of(
        self, request: QueryRequest, session_id: str, toolbox: Toolbox
    ) -> tuple[Callable[[str, Target, AgentTool], Verdict], bool]:
        """The run's approval hook (:attr:`policy`, with the request's ``approval``), with the
        tools a person approved for the rest of the session (read only when one of the offered
        tools could wait at all: most queries need no read), and whether any offered tool could
        wait or be refused (``False``: the hook says ``run`` to every one of them)."""
        hook = self.policy.hook(request.approval)
        if all(hook(n, a, t) == "run" for n, (a, t) in toolbox.named()):
            return hook, False
        remembered = await self.remembered(session_id)
        return (self.policy.hook(request.approval, remembered) if remembered else hook), True

    async def remembered(self, session_id: str) -> frozenset[tuple[str, str]]:
        """The ``(agent_id, tool_name)`` pairs a person approved for the rest of the session."""
        if self.approvals is None:
            return frozenset()
        try:
            return await self.approvals.remembered(session_id)
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None

    # The runs held for approvals (:class:`master.runs.held.HeldRuns`), for the doors and the desk.

    async def hold_direct(
        self,
        agent_id: str,
        tool: AgentTool,
        arguments: dict[str, Any],
        *,
        query_id: str,
        principal: Principal,
    ) -> QueryResponse:
        """Keep a door's direct call that :attr:`policy` holds (:meth:`HeldRuns.hold_direct`)."""
        return await self.engine.held.hold_direct(
            agent_id, tool, arguments, query_id=query_id, principal=principal
        )

    async def take_direct(self, session_id: str) -> RunState:
        return await self.engine.held.take_direct(session_id)

    async def record_direct(self, session_id: str, run: ToolRun, owner: str) -> None:
        await self.engine.held.record_direct(session_id, run, owner)

    async def held_run(self, session_id: str, scope: Scope) -> tuple[RunState | None, list[Approval]]:
        """The session's run paused for approvals and its approvals (:meth:`HeldRuns.held_run`)."""
        return await self.engine.held.held_run(session_id, scope)

    async def _store_quietly(self, recorder: TurnRecorder) -> None:
        """After a failure, keep what the run already did (summary, steps)."""
        try:
            await recorder.flush()
        except SessionStoreUnavailable as exc:
            logger.error("could not store the turns of a failed query: %s", exc)

    def tool_agents(self, allowed: list[str] | None, scope: Scope) -> list[Target]:
        """Connected WebSocket agents, then invocation agents not known to be DOWN (a live
        WebSocket agent shadows an invocation agent with the same id); those offered to ``scope``."""
        return self._agents.tool_targets(scope, allowed)


def rejected_response(request: QueryRequest, query_id: str, exc: QueryRejected) -> QueryResponse:
    return QueryResponse(
        query_id=query_id,
        session_id=request.session_id,
        success=False,
        error=exc.message,
        error_code=exc.code,
    )


def agents_used(runs: list[ToolRun]) -> list[AgentUsed]:
    seen: dict[tuple[str, str], AgentUsed] = {}
    for run in runs:
        for agent_id in run.collaboration or []:
            seen.setdefault(
                (agent_id, run.function_name), AgentUsed(agent_id=agent_id, tool_name=run.function_name)
            )
        if run.dispatched and run.agent_id and run.tool_name:
            seen.setdefault(
                (run.agent_id, run.tool_name), AgentUsed(agent_id=run.agent_id, tool_name=run.tool_name)
            )
    return list(seen.values())
