"""The run's two verbs for the routes and doors: start a run, or resume one by its id.

:meth:`RunVerbs.start` is :meth:`master.query.entry.QueryEntry.submit`. :meth:`RunVerbs.resume`
takes a run's id and one decision per item it waits for (:mod:`master.runs.decisions`):

- a raised budget for a halted run (or one whose master was lost after it recorded where it
  was), claimed so that of two resumes one runs it;
- a person's decisions on a run paused for approvals (``POST /approvals/{id}`` and every door's
  approval dialogue: MCP, A2A, AG-UI, Responses; :meth:`RunVerbs.run_of` names an approval's
  run), decided through the approval desk (who decides, exactly once), the run going on once its
  round is decided (a door's direct call held for approval then runs, once, without the model);
- a client's results of the tool calls the run handed it (an OpenAI client's ``role: tool``
  messages, ``function_call_output`` items, AG-UI tool messages: :func:`start_or_bring`), carried
  by the client's request.

Either way the run itself goes on in :meth:`master.runs.engine.RunEngine.resume`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

from master.auth import Principal, Scope
from master.errors import QueryRejected, SessionStoreUnavailable
from master.query.approvals import ApprovalDesk, ApprovalRefused
from master.query.entry import Door, QueryEntry, QueryRun
from master.query.events import QueryRefused
from master.query.service import rejected_response
from master.runs.decisions import Approve, Decision, RaiseBudget, Reject, ToolResult
from master.runs.extras import ClaimedRun, RunExtras
from master.runs.state import RunState, read_state
from master.runs.store import RESUMABLE
from protocol import Budget, ErrorCode, QueryRequest, QueryResponse

logger = logging.getLogger("master.query.verbs")

Asked = tuple[QueryRequest, RunExtras, str | None]
"""A client's request that brings tool results: the query, the door's extras, the query id."""

BUDGET_FIELDS = ("max_tool_calls", "max_tokens", "max_seconds")


class RunRefused(Exception):
    """A resume refused: ``code`` (its HTTP status is ``code.status``) and what to do instead."""

    def __init__(self, code: ErrorCode, detail: str | dict[str, Any]) -> None:
        super().__init__(detail if isinstance(detail, str) else str(detail.get("message", detail)))
        self.code = code
        self.detail = detail


class RunVerbs:
    """Starts and resumes runs by id (module docstring)."""

    def __init__(self, entry: QueryEntry, desk: ApprovalDesk | None = None) -> None:
        self._entry = entry
        self._desk = desk

    def start(
        self,
        request: QueryRequest,
        principal: Principal,
        *,
        door: Door = "http",
        stream: bool = False,
        extras: RunExtras | None = None,
        query_id: str | None = None,
    ) -> QueryRun:
        """Start a run for ``request`` (:meth:`master.query.entry.QueryEntry.submit`)."""
        return self._entry.submit(
            request, door=door, query_id=query_id, stream=stream, extras=extras, principal=principal
        )

    async def record(self, run_id: str, principal: Principal) -> tuple[dict[str, Any], RunState | None]:
        """The run's record (with ``resumable``) and what it resumes from. Raises
        :class:`RunRefused` (``unknown_run``: another tenant's run too)."""
        runs = self._entry.runs
        try:
            scope = Scope.of(principal)
            record = await runs.get(run_id, scope) if runs is not None else None
            checkpoint = (
                await runs.checkpoint(run_id, scope) if runs is not None and record is not None else None
            )
        except SessionStoreUnavailable as exc:
            raise RunRefused(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
        if record is None:
            raise RunRefused(ErrorCode.UNKNOWN_RUN, f"no run {run_id!r} (never started, or expired)")
        record["resumable"] = record["state"] in RESUMABLE and checkpoint is not None
        return record, checkpoint

    async def resume(
        self,
        run_id: str,
        decisions: Sequence[Decision],
        principal: Principal,
        *,
        door: Door = "http",
        stream: bool = False,
        tell: bool = True,
        decided_stands: bool = False,
        asked: Asked | None = None,
    ) -> QueryRun | QueryResponse:
        """Go on with run ``run_id`` with ``decisions`` (module docstring): the run, or an answer
        without one (its approvals still wait, another decision resumed it, or the master did not
        admit it). Raises :class:`RunRefused` for decisions that do not fit what the run waits for.
        ``tell``: the approval desk's listeners hear how a run resumed by decisions ended (not
        when the door follows the run itself). ``decided_stands``: an approval decided already
        (a door's replay, a decision taken meanwhile, an expiry) keeps its decision and the run
        goes on, instead of the refusal (``approval_decided``). ``asked``: what a client that
        brings :class:`ToolResult` decisions sent with them (an OpenAI client's whole request)."""
        decided = [d for d in decisions if isinstance(d, Approve | Reject)]
        budgets = [d for d in decisions if isinstance(d, RaiseBudget)]
        results = [d for d in decisions if isinstance(d, ToolResult)]
        if sum(1 for kind in (decided, budgets, results) if kind) > 1:
            raise RunRefused(
                ErrorCode.VALIDATION_ERROR,
                "a resume decides approvals, raises the budget or brings tool results: one of them",
            )
        if decided:
            return await self._decide(
                run_id, decided, principal, door=door, stream=stream, tell=tell, decided_stands=decided_stands
            )
        if results:
            return await self._bring(run_id, results, principal, door=door, stream=stream, asked=asked)
        record, checkpoint = await self.record(run_id, principal)
        state = str(record["state"])
        if state == "awaiting_approval" and not budgets:  # nothing decided now: on once all are
            return await self._go_on(str(record.get("session_id") or ""), principal, door, stream, tell)
        if len(budgets) > 1:
            raise RunRefused(ErrorCode.VALIDATION_ERROR, "a resume raises the budget once")
        if state not in RESUMABLE or checkpoint is None:
            raise RunRefused(
                ErrorCode.RUN_NOT_RESUMABLE, _not_resumable(run_id, state, checkpoint is not None)
            )
        budget = budgets[0].budget if budgets else Budget()
        limits = _check_budget(checkpoint, budget, record.get("stopped_by"))
        return await self._claim(run_id, record, checkpoint, limits, principal, door=door, stream=stream)

    async def run_of_calls(self, call_ids: Sequence[str]) -> str | None:
        """The id of the run paused for the client's results of ``call_ids`` (``None``: no run
        waits for them, or it kept no id; the run a request then starts says why)."""
        engine = self._entry.queries.engine
        try:
            session_id = await engine.session_of_calls(dict.fromkeys(call_ids, ""))
            state = read_state(await engine.sessions.paused(session_id), where=f"session {session_id}")
        except (QueryRejected, SessionStoreUnavailable):
            return None
        return state.run_id if state is not None else None

    async def _bring(
        self,
        run_id: str,
        results: Sequence[ToolResult],
        principal: Principal,
        *,
        door: Door,
        stream: bool,
        asked: Asked | None,
    ) -> QueryRun:
        """The run paused for its client's tool calls goes on with their results: the client's
        request (``asked``: its conversation, tools and options) carries them; the run checks
        they answer exactly the calls it waits for. Raises :class:`RunRefused` when the results
        are of another run (``validation_error``), and :class:`QueryRefused` when the master does
        not admit the run."""
        if len({result.call_id for result in results}) != len(results):
            raise RunRefused(ErrorCode.VALIDATION_ERROR, "a resume brings each tool call's result once")
        if await self.run_of_calls([result.call_id for result in results]) != run_id:
            raise RunRefused(
                ErrorCode.VALIDATION_ERROR, f"the results are not of the calls run {run_id!r} waits for"
            )
        request, extras, query_id = asked or (QueryRequest(query="(tool results)"), RunExtras(), None)
        extras = dataclasses.replace(extras, tool_results={r.call_id: r.content for r in results})
        return self._entry.submit(
            request, door=door, query_id=query_id, stream=stream, extras=extras, principal=principal
        )

    async def run_of(self, approval_id: str, principal: Principal) -> str:
        """The id of the run ``approval_id`` holds (what a door's decision resumes). Raises
        :class:`RunRefused` (``unknown_approval``: also another tenant's)."""
        desk = self._approval_desk()
        try:
            record = await desk.record(approval_id, Scope.of(principal))
        except ApprovalRefused as exc:
            raise RunRefused(exc.code, exc.detail) from None
        return await self._run_of(record, Scope.of(principal))

    async def _run_of(self, record: dict[str, Any], scope: Scope) -> str:
        """The approval's run: kept on its record; for a record made before runs were kept on it,
        the run its session holds (none: a name no run has)."""
        if record.get("run_id"):
            return str(record["run_id"])
        try:
            state, _ = await self._entry.queries.held_run(str(record["session_id"]), scope)
        except SessionStoreUnavailable as exc:
            raise RunRefused(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
        return (state.run_id if state is not None else None) or f"session:{record['session_id']}"

    def _approval_desk(self) -> ApprovalDesk:
        if self._desk is None:
            raise RunRefused(ErrorCode.NOT_IMPLEMENTED, "approvals are not kept on this master")
        return self._desk

    async def _claim(
        self,
        run_id: str,
        record: dict[str, Any],
        checkpoint: RunState,
        limits: dict[str, Any],
        principal: Principal,
        *,
        door: Door,
        stream: bool,
    ) -> QueryRun | QueryResponse:
        """Claim the halted run (of two resumes one wins) and run it from its checkpoint."""
        runs = self._entry.runs
        assert runs is not None
        state = str(record["state"])
        try:
            won, now = await runs.claim(run_id, RESUMABLE)
        except SessionStoreUnavailable as exc:
            raise RunRefused(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
        if not won:
            raise RunRefused(ErrorCode.RUN_NOT_RESUMABLE, _not_resumable(run_id, now or state, True))
        stored = dict(checkpoint.request or {"query": checkpoint.query})
        request = QueryRequest.model_validate(
            {**stored, "session_id": checkpoint.session_id, "budget": limits, "stream": stream}
        )
        extras = RunExtras(run_id=run_id, resume_run=ClaimedRun(record, checkpoint))
        try:
            return self._entry.submit(request, door=door, stream=stream, extras=extras, principal=principal)
        except QueryRefused as exc:  # not admitted: the run goes back to the state it had
            try:
                await runs.release(run_id, state)
            except SessionStoreUnavailable:
                pass
            return rejected_response(request, "", exc)

    async def _decide(
        self,
        run_id: str,
        decisions: Sequence[Approve | Reject],
        principal: Principal,
        *,
        door: Door,
        stream: bool,
        tell: bool,
        decided_stands: bool,
    ) -> QueryRun | QueryResponse:
        """Decide the run's approvals through the desk (who decides, exactly once; each recorded
        on its approval), then go on once its round is decided."""
        desk = self._approval_desk()
        scope = Scope.of(principal)
        session_id = ""
        try:
            for decision in decisions:  # every one of this run's before any is taken
                record = await desk.record(decision.approval_id, scope)
                if await self._run_of(record, scope) != run_id:
                    raise RunRefused(
                        ErrorCode.VALIDATION_ERROR,
                        f"approval {decision.approval_id!r} is not of run {run_id!r}",
                    )
                session_id = str(record["session_id"])
            for decision in decisions:
                try:
                    await _take(desk, decision, principal)
                except ApprovalRefused as exc:
                    if not decided_stands or exc.code != ErrorCode.APPROVAL_DECIDED:
                        raise
                    logger.info("decision on %s not taken: %s", decision.approval_id, exc)
        except ApprovalRefused as exc:
            raise RunRefused(exc.code, exc.detail) from None
        return await self._go_on(session_id, principal, door, stream, tell)

    async def _go_on(
        self, session_id: str, principal: Principal, door: Door, stream: bool, tell: bool
    ) -> QueryRun | QueryResponse:
        """The run paused for approvals goes on once its round is decided (else the round as it stands)."""
        desk = self._approval_desk()
        try:
            return await desk.start_resume(
                session_id, Scope.of(principal), door=door, stream=stream, tell=tell
            )
        except ApprovalRefused as exc:
            raise RunRefused(exc.code, exc.detail) from None


async def _take(desk: ApprovalDesk, decision: Approve | Reject, principal: Principal) -> None:
    if isinstance(decision, Approve):
        await desk.decide(
            decision.approval_id,
            "approve",
            message=decision.message,
            arguments=decision.arguments,
            remember=decision.remember,
            principal=principal,
        )
    else:
        await desk.decide(decision.approval_id, "reject", message=decision.reason, principal=principal)


async def start_or_bring(
    verbs: RunVerbs, asked: Asked, principal: Principal, *, door: Door, stream: bool
) -> QueryRun:
    """An OpenAI client's request: the results of the tool calls a paused run handed it go to
    that run (:meth:`RunVerbs.resume` with :class:`ToolResult` decisions); any other request, or
    results no run waits for (the run it starts says why), starts a run (:meth:`RunVerbs.start`).
    Raises :class:`QueryRefused` when the master does not admit it."""
    request, extras, query_id = asked
    results = extras.tool_results
    run_id = await verbs.run_of_calls(list(results)) if results else None
    if results and run_id is not None:
        decisions = [ToolResult(call_id=call_id, content=content) for call_id, content in results.items()]
        try:
            run = await verbs.resume(run_id, decisions, principal, door=door, stream=stream, asked=asked)
        except RunRefused:
            pass  # not that run's calls after all: the run the request starts says why
        else:
            assert isinstance(run, QueryRun)
            return run
    return verbs.start(request, principal, door=door, stream=stream, extras=extras, query_id=query_id)


def _not_resumable(run_id: str, state: str, has_checkpoint: bool) -> str:
    if state == "awaiting_approval":
        return (
            f"run {run_id!r} is awaiting_approval: decide its approvals with POST /approvals/{{approval_id}}"
        )
    if state == "awaiting_tool_results":
        return f"run {run_id!r} is awaiting_tool_results: send the results of its tool calls"
    if state in RESUMABLE and not has_checkpoint:
        return f"run {run_id!r} is {state} and kept nothing to resume from"
    return f"run {run_id!r} is {state}; only a stopped run (or a failed one that kept where it was) resumes"


def _check_budget(checkpoint: RunState, budget: Budget, stopped_by: str | None) -> dict[str, Any]:
    """The run's new limits: the old ones with ``budget``'s; refused (``budget_not_larger``) when
    one is smaller, or the one that stopped the run is not larger."""
    old: dict[str, Any] = {
        name: value
        for name, value in (
            checkpoint.budget.model_dump()
            if checkpoint.budget is not None
            else checkpoint.request.get("budget") or {}
        ).items()
        if value is not None
    }
    wanted = budget.model_dump(exclude_none=True)
    for name, value in wanted.items():
        if name in old and value < old[name]:
            raise RunRefused(
                ErrorCode.BUDGET_NOT_LARGER,
                f"budget.{name} {value:g} is smaller than the run's {old[name]:g}; a resume only raises limits",
            )
    if stopped_by in BUDGET_FIELDS and stopped_by in old:
        new = wanted.get(stopped_by, old[stopped_by])
        if new <= old[stopped_by]:
            raise RunRefused(
                ErrorCode.BUDGET_NOT_LARGER,
                f"the run was stopped by {stopped_by} {old[stopped_by]:g}: budget.{stopped_by} must be "
                f"larger than that (got {new:g})",
            )
    return {**old, **wanted}
