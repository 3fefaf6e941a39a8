"""Running one admitted query, whatever its door (:mod:`master.query.entry` calls it).

:meth:`QueryService.run` validates the request, loads the session, builds the
bounded context (summarizing when needed), runs the orchestrator (one round, auto
mode, plan proposal or plan execution) within the query's budgets and stores the turns.
It raises :class:`QueryRejected` (with a stable code) for requests it cannot run;
:class:`master.query.entry.QueryEntry` turns every outcome into a :class:`protocol.QueryResponse`.
"""

from __future__ import annotations

import functools
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from master.agents.calls import ToolRun
from master.agents.directory import AgentDirectory
from master.agents.dispatch import Target
from master.agents.registry import AgentTool
from master.agents.toolbox import Toolbox, function_name
from master.attachments import NewFile, RagLink, RagQuery, decode_attachments
from master.auth import DEFAULT_TENANT, Principal, Scope
from master.collaboration import CollaborationManager
from master.conversation.approvals import ApprovalStore
from master.conversation.context import Context, ContextBuilder
from master.conversation.history import CLIENT, turns_from_messages
from master.conversation.outcome import Outcome
from master.conversation.store import CHECK_FRESH_SECONDS, SessionStore, Turn
from master.conversation.turns import TurnRecorder, tool_turn
from master.errors import InvalidPlan, LLMError, QueryRejected, SessionStoreUnavailable
from master.llm.model import ToolCallRequest
from master.llm.tokens import count_tool
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
    collaboration_tool,
    spawn_tool,
)
from master.orchestration.plans import (
    SUBMIT_PLAN,
    describe,
    find_plan,
    plan_from_reply,
    planning_prompt,
    resolve_steps,
)
from master.orchestration.prompts import system_prompt
from master.query.extras import NO_EXTRAS, RunExtras
from master.query.policy import ApprovalPolicy
from master.query.roles import check_role_models, run_roles
from master.runs.state import (
    ApprovalPending,
    Asker,
    BudgetPending,
    CallRef,
    ClientToolResultPending,
    HeldCall,
    Limits,
    RunState,
    Spent,
    read_state,
)
from master.runs.store import LiveRun, RunStore
from master.sandbox.spawn import Spawner
from master.settings import Settings
from protocol import AgentUsed, Approval, PendingToolCall, QueryRequest, QueryResponse, Usage

logger = logging.getLogger("master.query.service")

NOT_CONFIGURED = (
    "no LLM is configured: set OPENAI_API_KEY (and OPENAI_BASE_URL for Ollama, vLLM, llama.cpp "
    "or another OpenAI-compatible server) in the environment or .env, then restart the master"
)

MAX_KNOWN_LISTED = 20
"""How many known agent ids an ``unknown_agent`` refusal lists."""

UNKNOWN_CALL = (
    "The outcome of this call is unknown: it was sent, but the run stopped (its master was lost, "
    "or it was cancelled) before the result came back. It was not run again; it may or may not "
    "have taken effect. Say so in your answer, and do not repeat it unless the user asks."
)
"""The tool message a resumed run gives the model for a call that was in flight when it stopped."""


@dataclass
class _Run:
    """What one query works with."""

    orchestrator: Orchestrator
    request: QueryRequest
    turns: list[Turn]
    toolbox: Toolbox
    model: str
    budget: BudgetTracker
    recorder: TurnRecorder
    hooks: RunHooks
    principal: Principal
    """Who asked (see :meth:`QueryService._owner`)."""
    system_note: str = ""
    """Added to the system prompt: the session's attached files (refs and names only)."""
    extras: RunExtras = NO_EXTRAS
    messages: list[Any] | None = None
    """The run's messages, as the orchestrator leaves them (kept when the run pauses)."""
    new_session: bool = True
    """Whether the run started its session (its owner is then the asker's tenant)."""
    live: LiveRun | None = None
    """The run's record as it goes (:mod:`master.runs.store`)."""
    coordinated: bool = False
    """The coordinator of roles runs it (:mod:`master.query.roles`)."""
    resume_from: RunState | None = None
    """What a coordinated run a budget stopped resumes from."""


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
        self._windows = windows
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
        self._collaboration = collaboration
        self._rag = rag
        self._spawner = spawner

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
        new_files = self._decode_attachments(request)
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
                self._check_known(unoffered, scope, auto_mode=request.auto_mode)

        results = extras.tool_results
        session_hint = request.session_id
        if results is not None and session_hint is None:
            session_hint = await self._session_of_calls(results)
        new_id = extras.new_session_id
        if extras.thread_id is not None and session_hint is None:
            session_hint, new_id = await self._thread_session(extras.thread_id, scope)
        session_id, turns = await self._load_session(session_hint, scope, new_id)
        logs.set_session(session_id)
        tracing.set_current_attribute("openagent.session_id", session_id)
        paused = await self._paused(session_id, results) if results is not None else None
        if extras.resume_approvals:
            paused = await self._held_state(session_id, scope)
        if extras.resume_run is not None:
            paused = extras.resume_run.checkpoint.model_copy(deep=True)
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
        extra_tools = self._collaboration_hook(
            hooks,
            toolbox,
            session_id,
            query_id,
            Scope.of(principal),
            lambda: self._owner(principal, session_id, new_session),
        )
        extra_tools += self._spawn_hook(hooks, request, principal)
        if may_wait or hooks.spawn is not None:  # else every call of the run runs: no word to ask
            hooks.approval = approval
        extra_tools += self._client_tools(hooks, toolbox, extra_tools, extras.client_tools)
        rag = await self._rag_query(  # the last check (its cap), storing the files it accepts
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
        run = _Run(
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
                run.turns = await self._store_history(session_id, extras.history, principal.tenant)
            held: list[Approval] | None = None
            if paused is not None and paused.roles is not None:
                outcome, held = await run_roles(self, run, extra_tools, paused)
            elif paused is not None and extras.resume_run is not None:
                outcome = (
                    await self._resume_held(run, extra_tools, paused, taken=True)
                    if isinstance(paused.pending, ApprovalPending)
                    else await self._resume_halted(run, extra_tools, paused)
                )
            elif paused is not None and extras.resume_approvals:
                outcome = await self._resume_held(run, extra_tools, paused)
            elif paused is not None and results is not None:
                outcome = await self._continue(run, extra_tools, paused, results)
            elif request.roles is not None:
                outcome, held = await run_roles(self, run, extra_tools)
            elif request.auto_require_plan_approval and request.auto_plan_execute is None:
                outcome = await self._propose_plan(run)
            else:
                outcome = await self._execute(run, extra_tools)
            if outcome.status == "awaiting_tool_results":
                await self._pause(run, outcome)
            if live is not None:
                live.stopped_by = outcome.stopped_by
                if run.coordinated:  # resumable from the coordinator's state, or not at all
                    live.checkpoint, live.checkpoint_calls = run.resume_from, len(live.completed)
                elif outcome.status == "stopped" and recorder.plan_id is None and run.messages is not None:
                    live.checkpoint = _halt_checkpoint(run, outcome, live)
                    live.checkpoint_calls = len(live.completed)
                else:  # answered, or paused again (its session keeps it)
                    live.checkpoint = None
            approvals = await self._hold(run, outcome) if outcome.held else held
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
            raise QueryRejected("session_store_unavailable", f"answered, but not stored: {exc}") from None
        finally:
            if rag is not None:
                await self._finish_rag(rag, outcome.tool_runs if outcome is not None else [])
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

    async def _hold(self, run: _Run, outcome: Outcome) -> list[Approval]:
        """Pause a run whose calls wait for a person: one approval per held call, and the run's
        state (as a paused run of its session) to resume once every one is decided."""
        recorder = run.recorder
        owner = await self._owner(run.principal, recorder.session_id, run.new_session)
        calls: list[tuple[PendingToolCall, str, AgentTool]] = []
        for call in outcome.held:
            target = run.toolbox.resolve(call.name)
            assert target is not None  # held calls were resolved and validated
            agent, tool = target
            calls.append((call, agent.agent_id, tool))
        state = RunState(
            query=recorder.query,
            query_id=recorder.query_id,
            messages=run.messages or [],
            steps=outcome.steps,
            request=run.request.model_dump(mode="json", exclude={"attachments", "stream"}),
            pending=ApprovalPending(),
            **_run_part(run),
        )
        approvals = await self._keep_held(recorder.session_id, owner, run.principal, calls, state)
        for approval in approvals:
            run.hooks.emit("approval_required", approval.model_dump(mode="json"))
        return approvals

    async def hold_direct(
        self,
        agent_id: str,
        tool: AgentTool,
        arguments: dict[str, Any],
        *,
        query_id: str,
        principal: Principal,
    ) -> QueryResponse:
        """Keep a door's direct call that :attr:`policy` holds, as the orchestrator keeps its held
        calls: one approval, in a new session owned by the asker's tenant (its first turn says
        what waits), and a paused run of kind ``direct`` that the approval desk resumes once the
        approval is decided, through any door or by the expiry sweep: the call then runs once (or
        not at all: rejected, expired), without the model (:meth:`master.query.entry.QueryEntry._resume_direct`).
        Answers as a held query does (``status: "awaiting_approval"``, the approval)."""
        session_id = self._sessions.new_session_id()
        call = PendingToolCall(
            id=f"call-{uuid.uuid4().hex}",
            name=function_name(agent_id, tool.schema.name),
            arguments=json.dumps(arguments),
        )
        query = f"a direct call of {agent_id}.{tool.schema.name}"
        turn = {
            "query": query,
            "query_id": query_id,
            "decision": "awaiting_approval",
            "calls": [call.model_dump()],
            "ts": time.time(),
        }
        state = RunState(
            query=query, query_id=query_id, request={"query": query}, pending=ApprovalPending(direct=True)
        )
        try:
            await self._sessions.append(session_id, [turn], owner=principal.tenant)
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        approvals = await self._keep_held(
            session_id, principal.tenant, principal, [(call, agent_id, tool)], state
        )
        return QueryResponse(
            query_id=query_id,
            session_id=session_id,
            success=True,
            status="awaiting_approval",
            answer=waiting_for(approvals),
            approvals=approvals,
        )

    async def _keep_held(
        self,
        session_id: str,
        owner: str,
        asker: Principal,
        calls: Sequence[tuple[PendingToolCall, str, AgentTool]],
        state: RunState,
    ) -> list[Approval]:
        """One approval per held call ``(call, agent_id, tool)``, owned by ``owner``, and the
        paused run (``state`` with its held calls and its asker in its pending item: an
        approval's unless ``state`` names another held kind) of ``session_id``, kept for as long
        as the approvals' records."""
        store = self.approvals
        assert store is not None
        now = time.time()
        approvals: list[Approval] = []
        extra: dict[str, dict[str, Any]] = {}
        held: list[HeldCall] = []
        for call, agent_id, tool in calls:
            approval = Approval(
                approval_id=f"appr-{uuid.uuid4().hex}",
                session_id=session_id,
                agent_id=agent_id,
                tool_name=tool.schema.name,
                arguments=json.loads(call.arguments or "{}"),
                created_at=now,
                expires_at=now + store.ttl_seconds,
            )
            approvals.append(approval)
            extra[approval.approval_id] = {
                "call_id": call.id,
                "parameters": tool.schema.parameters,
                "asker_key": asker.key_id,  # never the decider once the tool has approvers
                **({"tenant": owner} if owner != DEFAULT_TENANT else {}),
            }
            held.append(HeldCall(**call.model_dump(), approval_id=approval.approval_id))
        who = Asker(key=asker.key_id, name=asker.name, tenant=asker.tenant, admin=asker.is_admin)
        pending = state.held or ApprovalPending()
        paused = state.model_copy(
            update={
                "pending": pending.model_copy(update={"held": held, "asker": who}),
                "status": "awaiting_approval",
            }
        )
        try:
            await store.create(approvals, extra)
            await self._sessions.pause(session_id, paused.dump(), [], ttl=store.keep_seconds)
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        return approvals

    async def take_direct(self, session_id: str) -> RunState:
        """Take the paused direct call of ``session_id`` to run it (of two resumes, one gets it:
        the other is refused ``invalid_query``, "resumed already")."""
        try:
            state = read_state(await self._sessions.take_paused(session_id), where=f"session {session_id}")
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        if state is None or not state.direct:
            raise QueryRejected("invalid_query", "the paused run was resumed already")
        return state

    async def record_direct(self, session_id: str, run: ToolRun, owner: str) -> None:
        """Store how a held direct call ended in its session (a ``call_tool`` turn)."""
        turn = tool_turn({"query": f"a direct call of {run.label}", "ts": time.time()}, run)
        try:
            await self._sessions.append(session_id, [turn], owner=owner)
        except SessionStoreUnavailable as exc:
            logger.error("could not store the end of the direct call in session %s: %s", session_id, exc)

    async def held_run(self, session_id: str, scope: Scope) -> tuple[RunState | None, list[Approval]]:
        """The session's run paused for approvals (``None`` when there is none, or when ``scope``
        does not see the session: another tenant's) and the approvals of its round that
        ``scope`` sees, as they stand. Raises :class:`SessionStoreUnavailable`."""
        if not await self._sessions.visible(session_id, scope):
            return None, []
        state = read_state(await self._sessions.paused(session_id), where=f"session {session_id}")
        if state is None or state.held is None or self.approvals is None:
            return None, []
        found = [await self.approvals.get(call.approval_id, scope) for call in state.held.held]
        return state, [a for a in found if a is not None]

    async def _held_state(self, session_id: str, scope: Scope) -> RunState:
        try:
            state, approvals = await self.held_run(session_id, scope)
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        if state is None:
            raise QueryRejected(
                "invalid_query", f"no run of session {session_id!r} waits for approvals (resumed already?)"
            )
        waiting = [a.approval_id for a in approvals if a.status == "pending"]
        if waiting:
            raise QueryRejected(
                "invalid_query", f"approvals {', '.join(map(repr, waiting))} are not decided yet"
            )
        return state

    async def _resume_held(
        self, run: _Run, tools: list[dict[str, Any]], state: RunState, *, taken: bool = False
    ) -> Outcome:
        """Go on with a run paused for approvals: the approved calls run (with the edited
        arguments), the model is told of refusals and expiries, then the next rounds. The paused
        state is taken first (of two resumes, one runs the calls) and put back, with the calls
        done so far, if the resume fails: a decision is never lost to a failure. Before an
        approved call is sent, the run's record and checkpoint hold it in flight: a resume after
        a failure (or after its master was lost) reports it as unknown and never sends it again.

        ``taken``: ``state`` is a lost run's checkpoint, claimed already (``POST /runs/.../resume``)."""
        store = self.approvals
        assert store is not None
        session_id = run.recorder.session_id
        if not taken:
            try:
                if await self._sessions.take_paused(session_id) is None:
                    raise QueryRejected("invalid_query", "the paused run was resumed already")
            except SessionStoreUnavailable as exc:
                raise QueryRejected("session_store_unavailable", str(exc)) from None
        pending = state.held
        assert pending is not None  # a run paused for approvals
        messages: list[Any] = list(state.messages)
        remaining = list(pending.held)
        for call in state.unknown:  # sent before a failure: never sent again
            messages.append({"role": "tool", "tool_call_id": call.id, "content": UNKNOWN_CALL})
            if run.live is not None:
                run.live.add_unknown(call.ref())
        decided_runs: list[ToolRun] = []
        offered = [*run.toolbox.openai_tools(), *tools] if run.extras.offer_tools else []
        sending: HeldCall | None = None
        try:
            while remaining:
                held = remaining[0]
                record = await store.record(held.approval_id, Scope.of(run.principal)) or {
                    "status": "expired"
                }
                if record.get("status") == "approved":
                    await self._before_held_call(run, state, messages, remaining[1:], held)
                    sending = remaining.pop(0)
                    messages.append(await self._decided_message(run, held, record, offered, decided_runs))
                    sending = None
                else:
                    messages.append(await self._decided_message(run, held, record, offered, decided_runs))
                    remaining.pop(0)
            if run.live is not None:
                run.live.checkpoint = None  # every held call answered: nothing to resume from
            run.messages = messages
            outcome = await run.orchestrator.run(
                messages=messages,
                tools=offered,
                toolbox=run.toolbox,
                model=run.model,
                auto_mode=run.request.auto_mode,
                budget=run.budget,
                hooks=run.hooks,
                steps_done=state.steps,
            )
            outcome.tool_runs[:0] = decided_runs
            return outcome
        except BaseException:
            restored = state.model_copy(
                update={
                    **_run_part(run),
                    "messages": messages,
                    "pending": pending.model_copy(update={"held": remaining}),
                    "unknown": [sending] if sending is not None else [],
                }
            )
            if run.live is not None:
                run.live.checkpoint = None  # resumable through its approvals only, not twice
            try:
                await self._sessions.pause(session_id, restored.dump(), [], ttl=store.keep_seconds)
            except SessionStoreUnavailable as exc:
                logger.error("could not keep the paused run of session %s: %s", session_id, exc)
            raise

    async def _before_held_call(
        self,
        run: _Run,
        state: RunState,
        messages: list[Any],
        remaining: list[HeldCall],
        held: HeldCall,
    ) -> None:
        """Record an approved call in flight, with what the run resumes from without it, before
        it is sent (awaited: a lost master must not leave it to be sent twice)."""
        live = run.live
        if live is None or self.runs is None:
            return
        live.sending([held.as_sent()])
        pending = state.held
        assert pending is not None
        checkpoint = state.model_copy(
            update={
                **_run_part(run),
                "session_id": run.recorder.session_id,
                "messages": list(messages),
                "pending": pending.model_copy(update={"held": remaining}),
                "unknown": [held],
            }
        )
        try:
            await self.runs.save(live, checkpoint)
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None

    async def _resume_halted(self, run: _Run, tools: list[dict[str, Any]], state: RunState) -> Outcome:
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

    async def _decided_message(
        self,
        run: _Run,
        held: HeldCall,
        record: dict[str, Any],
        tools: list[dict[str, Any]],
        done: list[ToolRun],
    ) -> dict[str, Any]:
        """The tool message that answers a held call, as a person decided it."""
        status = record.get("status")
        call_id = held.id
        if status == "approved":
            edited = record.get("edited_arguments")
            arguments = json.dumps(edited) if edited is not None else str(held.arguments)
            call = ToolCallRequest(call_id, held.name, arguments)
            tool_run = await run.orchestrator.run_held(run.toolbox, call, run.hooks, tools)
            await (run.hooks.on_step or run.recorder.steps)([tool_run])
            done.append(tool_run)
            message = dict(tool_run.as_tool_message(call_id))
            if edited is not None:
                message["content"] = (
                    f"A person approved this call with edited arguments {arguments} "
                    f"(you asked for {held.arguments}). Result: {message['content']}"
                )
            return message
        if status == "rejected":
            reason = record.get("message") or "no reason given"
            content = f"A person refused this call; it was not run. Their reason: {reason}"
        else:
            content = (
                "No one decided on this call in time (its approval expired); it was not run. "
                "Say so in your answer."
            )
        return {"role": "tool", "tool_call_id": call_id, "content": content}

    def _client_tools(
        self,
        hooks: RunHooks,
        toolbox: Toolbox,
        extra_tools: list[dict[str, Any]],
        client_tools: Sequence[dict[str, Any]],
    ) -> list[dict[str, Any]]:
        """The asker's own tools, offered beside the agents'; a name one of those has is refused."""
        if not client_tools:
            return []
        taken = {tool["function"]["name"] for tool in [*toolbox.openai_tools(), *extra_tools]}
        names = [str(tool["function"]["name"]) for tool in client_tools]
        clash = sorted(taken.intersection(names))
        if clash:
            raise QueryRejected(
                "invalid_query",
                f"tool name(s) {', '.join(map(repr, clash))} belong to the hub's own tools; rename yours",
            )
        hooks.external = frozenset(names)
        return list(client_tools)

    async def _session_of_calls(self, results: Mapping[str, str]) -> str:
        """The session whose paused run waits for the results' calls."""
        first = next(iter(results), None)
        try:
            session_id = await self._sessions.paused_session(first) if first is not None else None
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
            state = read_state(await self._sessions.paused(session_id), where=f"session {session_id}")
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        if state is None:
            raise QueryRejected("invalid_query", f"no run of session {session_id!r} waits for tool results")
        pending = state.pending
        waiting = [call.id for call in pending.calls] if isinstance(pending, ClientToolResultPending) else []
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

    async def _store_history(self, session_id: str, history: Sequence[Any], owner: str) -> list[Turn]:
        """A stateless asker's earlier messages, stored as the new session's first turns."""
        turns = turns_from_messages(history)
        try:
            await self._sessions.append(session_id, turns, owner=owner)
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        return turns

    async def _continue(
        self, run: _Run, tools: list[dict[str, Any]], state: RunState, results: Mapping[str, str]
    ) -> Outcome:
        """Go on with a paused run: its messages, the results it waited for, the next rounds."""
        try:
            if await self._sessions.take_paused(run.recorder.session_id) is None:
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

    async def _pause(self, run: _Run, outcome: Outcome) -> None:
        """Keep a run that waits for its asker's tool results, to go on with the next request."""
        recorder = run.recorder
        state = RunState(
            query=recorder.query,
            query_id=recorder.query_id,
            messages=run.messages or [],
            steps=outcome.steps,
            status="awaiting_tool_results",
            pending=ClientToolResultPending(calls=[CallRef(**call.model_dump()) for call in outcome.pending]),
            **_run_part(run),
        )
        try:
            await self._sessions.pause(
                recorder.session_id, state.dump(), [call.id for call in outcome.pending]
            )
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None

    async def _context(
        self, run: _Run, system: str, tools: list[dict[str, Any]], tool_costs: list[int] | None = None
    ) -> Context:
        """The bounded context. A summary is made under the session's summary lock and stored at once,
        so that concurrent queries on the session wait for it and reuse it instead of making their own."""
        budget = (
            await self._windows.budget(run.model)
            if self._windows is not None
            else self._settings.orchestrator_context_max_tokens
        )
        builder = ContextBuilder(
            run.orchestrator.llm,
            max_tokens=budget,
            recent_turns=self._settings.orchestrator_recent_turns,
            summarizer_model=self._catalog.summarizer_model,
        )
        if tool_costs is None:
            tool_costs = [count_tool(tool) for tool in tools]
        query = run.request.query
        if not run.turns or not builder.wants_summary(
            system=system, turns=run.turns, query=query, tool_costs=tool_costs
        ):
            context, spent = await builder.build(
                system=system, turns=run.turns, query=query, tools=tools, tool_costs=tool_costs
            )
            run.budget.add_tokens(spent)
            return context
        session_id = run.recorder.session_id
        async with self._sessions.summary_lock(session_id):
            run.turns = (
                await self._sessions.load(session_id, Scope.of(run.principal)) or run.turns
            )  # with the summary another query made
            context, spent = await builder.build(
                system=system, turns=run.turns, query=query, tools=tools, tool_costs=tool_costs
            )
            if context.summary_turn is not None:
                seen = sum(1 for turn in run.turns if turn.get("decision") == "summary")
                if not await self._sessions.append_summary(session_id, context.summary_turn, seen):
                    logger.info(
                        "session %s: a summary of this span was stored first; this one is not", session_id
                    )
        run.budget.add_tokens(spent)
        return context

    async def _execute(self, run: _Run, extra_tools: list[dict[str, Any]]) -> Outcome:
        request = run.request
        system = _with_note(system_prompt(request.orchestrator_prompt_profile), run.system_note)
        costs = [*run.toolbox.token_costs(count_tool), *map(count_tool, extra_tools)]
        context = await self._context(run, system, [*run.toolbox.openai_tools(), *extra_tools], costs)
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
            claimed = await self._sessions.claim_plan(
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

    async def _propose_plan(self, run: _Run) -> Outcome:
        if not len(run.toolbox):  # no model could plan with no tool: refuse before asking one
            raise QueryRejected(
                "invalid_query",
                "no linked agent offers a tool, so there is nothing to plan; connect an action agent "
                "or check allowed_agent_ids",
            )
        system = (
            _with_note(system_prompt(run.request.orchestrator_prompt_profile), run.system_note)
            + "\n\n"
            + planning_prompt(run.toolbox)
        )
        context = await self._context(run, system, [SUBMIT_PLAN])
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

    async def _owner(self, principal: Principal, session_id: str, new_session: bool) -> str:
        """The tenant that owns the session, and so what a run makes in it (approvals,
        collaborations): the asker's, unless an administrator continues another tenant's session
        (then one Redis read, on these rare paths only)."""
        if new_session or not principal.is_admin:
            return principal.tenant
        try:
            return await self._sessions.owner(session_id)
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None

    def _collaboration_hook(
        self,
        hooks: RunHooks,
        toolbox: Toolbox,
        session_id: str,
        query_id: str,
        scope: Scope,
        owner: Callable[[], Awaitable[str]],
    ) -> list[dict[str, Any]]:
        """Offer ``start_collaboration`` when two or more linked agents support it (the model may
        name any agent: the manager refuses one not offered to the asker's ``scope``)."""
        manager = self._collaboration
        if manager is None:
            return []
        eligible = manager.eligible(agent.agent_id for agent, _ in toolbox.entries())  # it drops repeats
        if len(eligible) < 2:
            return []

        async def collaborate(agents: list[str], task: str) -> dict[str, Any]:
            outcome = await manager.run(
                parent_session_id=session_id,
                agent_ids=agents,
                task=task,
                scope=scope,
                query_id=query_id,
                tenant=await owner(),
            )
            return {
                "collab_session_id": outcome.collab_session_id,
                "agents": outcome.agents,
                "completed": outcome.completed,
                "reason": outcome.reason,
                "summary": outcome.summary,
                "message_count": outcome.message_count,
            }

        hooks.collaborate = collaborate
        return [collaboration_tool(eligible)]

    def _decode_attachments(self, request: QueryRequest) -> list[NewFile]:
        """The query's files, checked against the limits before anything runs or is stored."""
        if not request.attachments:
            return []
        if self._rag is None:
            raise QueryRejected(
                "not_implemented", "this master stores no attachments (no RAG link configured)"
            )
        return decode_attachments(
            request.attachments,
            max_count=self._settings.rag_max_attachments,
            max_bytes=self._settings.rag_max_attachment_bytes,
        )

    async def _rag_query(
        self,
        session_id: str,
        toolbox: Toolbox,
        new_files: list[NewFile],
        seconds: float,
        *,
        new_session: bool,
        principal: Principal,
    ) -> RagQuery | None:
        # A session whose id was made for this query has no files but the ones it brings: no
        # Redis round trip to find that out.
        if self._rag is None or (new_session and not new_files):
            return None
        try:
            owner = await self._owner(principal, session_id, new_session) if new_files else principal.tenant
            return await self._rag.prepare(
                session_id, toolbox, new_files, Scope.of(principal), owner=owner, seconds=seconds
            )
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None

    async def _finish_rag(self, rag: RagQuery, runs: list[ToolRun]) -> None:
        assert self._rag is not None
        try:
            await self._rag.finish(rag, runs)
        except SessionStoreUnavailable as exc:
            logger.warning("could not record the indexing state of session %s: %s", rag.session_id, exc)

    def _spawn_hook(
        self, hooks: RunHooks, request: QueryRequest, principal: Principal
    ) -> list[dict[str, Any]]:
        """Offer ``spawn_agent`` in auto mode when saved agents are not running (sandbox on; an
        administrator's queries only: the agents it starts belong to tenant ``default``)."""
        spawner = self._spawner
        if (
            spawner is None
            or not request.auto_mode
            or request.auto_plan_execute is not None
            or not principal.is_admin
        ):
            return []
        candidates = spawner.candidates(request.allowed_agent_ids)
        if not candidates:
            return []
        hooks.spawn = functools.partial(spawner.spawn, tenant=principal.tenant)
        return [spawn_tool(candidates)]

    async def _thread_session(self, thread_id: str, scope: Scope) -> tuple[str | None, str | None]:
        """``(session_id, new_session_id)`` of a client's thread (:attr:`RunExtras.thread_id`): its
        session when ``scope`` sees it, else a new session of that id when the id is free; another
        tenant's is unknown, as everywhere."""
        try:
            if await self._sessions.load(thread_id, scope) is not None:
                return thread_id, None
            taken = await self._sessions.taken(thread_id)
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        if taken:
            raise QueryRejected(
                "unknown_session",
                f"unknown or expired session {thread_id!r}; start a new thread (a new threadId)",
            )
        return None, thread_id

    async def _load_session(
        self, session_id: str | None, scope: Scope, new_id: str | None = None
    ) -> tuple[str, list[Turn]]:
        """The session's turns; either way Redis has answered (for a new session: within
        :data:`CHECK_FRESH_SECONDS`, over a connection still open), so no LLM or tool call runs
        for an answer that could not be stored (tools may have side effects). A session
        ``scope`` does not see (another tenant's) is unknown."""
        try:
            if session_id is None:
                await self._sessions.check(fresh_within=CHECK_FRESH_SECONDS)
                return new_id or self._sessions.new_session_id(), []
            loaded = await self._sessions.load(session_id, scope)
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        if loaded is None:
            raise QueryRejected(
                "unknown_session",
                f"unknown or expired session {session_id!r}; omit session_id to start a new session",
            )
        return session_id, loaded

    async def _store_quietly(self, recorder: TurnRecorder) -> None:
        """After a failure, keep what the run already did (summary, steps)."""
        try:
            await recorder.flush()
        except SessionStoreUnavailable as exc:
            logger.error("could not store the turns of a failed query: %s", exc)

    def _check_known(self, allowed: list[str], scope: Scope, *, auto_mode: bool) -> None:
        """Refuse (``unknown_agent``) ``allowed_agent_ids`` naming an agent no source knows: not
        connected here or to another master, not registered for HTTP invocation (down or not), and
        in auto mode not a saved agent that could be started. The refusal names the unknown ids
        and up to :data:`MAX_KNOWN_LISTED` known ones."""
        found = self._agents.known_ids(scope, allowed)
        unknown = [agent_id for agent_id in dict.fromkeys(allowed) if agent_id not in found]
        if unknown and auto_mode and self._spawner is not None and scope.every_tenant:
            startable = set(self._spawner.candidates(unknown))
            unknown = [agent_id for agent_id in unknown if agent_id not in startable]
        if not unknown:
            return
        listed = sorted(self._agents.known_ids(scope))
        some = ", ".join(repr(agent_id) for agent_id in listed[:MAX_KNOWN_LISTED])
        more = f" and {len(listed) - MAX_KNOWN_LISTED} more" if len(listed) > MAX_KNOWN_LISTED else ""
        raise QueryRejected(
            "unknown_agent",
            f"allowed_agent_ids names unknown agent(s) {', '.join(map(repr, unknown))}; "
            + (f"known agents: {some}{more}" if listed else "no agent is connected or registered"),
        )

    def tool_agents(self, allowed: list[str] | None, scope: Scope) -> list[Target]:
        """Connected WebSocket agents, then invocation agents not known to be DOWN (a live
        WebSocket agent shadows an invocation agent with the same id); those offered to ``scope``."""
        return self._agents.tool_targets(scope, allowed)


def _run_part(run: _Run) -> dict[str, Any]:
    """What a paused run's state keeps of its record: its id and the calls it completed."""
    live = run.live
    if live is None:
        return {}
    return {"run_id": live.run_id, "completed": live.completed, "created_at": live.created_at}


def _halt_checkpoint(run: _Run, outcome: Outcome, live: LiveRun) -> RunState:
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


def _with_note(system: str, note: str) -> str:
    return f"{system}\n\n{note}" if note else system


def waiting_for(approvals: Sequence[Approval]) -> str:
    """The answer of a run whose calls wait: what waits, and the approval that decides each."""
    return "Waiting for a person to decide: " + ", ".join(
        f"{a.agent_id}.{a.tool_name} (approval {a.approval_id})" for a in approvals
    )


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
