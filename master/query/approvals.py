"""Deciding the tool calls that wait for a person, whichever door the decision comes through.

``POST /approvals/{approval_id}`` (:mod:`master.routes.approvals`), a message on an A2A task that
waits (:mod:`master.doors.a2a`), an MCP client's answer to the ``ask`` tool's question
(:mod:`master.doors.mcp`), an AG-UI ``resume`` and a Responses ``mcp_approval_response`` are the
run's verb (:meth:`master.query.verbs.RunVerbs.resume` with ``Approve``/``Reject`` decisions),
which decides and resumes here; it and the expiry sweep all go through one :class:`ApprovalDesk`:

- **deciding** (:meth:`ApprovalDesk.decide`): once per approval (SET NX in
  :class:`~master.conversation.approvals.ApprovalStore`), by whom may decide it (below), edited
  arguments checked against the tool's schema, counted by outcome with the time it took
  (``GET /metrics``);
  ``remember="session"`` approves the tool for the rest of the session, the round's other
  pending calls of that tool included;
- **resuming** (:meth:`ApprovalDesk.resume`): once every call of the paused round is decided, the
  run goes on through the query entry (a door's direct call held for approval, made by
  :meth:`~master.query.entry.QueryEntry.call_tool`, runs then, once, and ends with the call); whoever started it, the desk's listeners hear how it ended
  (the A2A door moves a waiting task to its end that way). It goes on as it was asked: with the
  asker's tenant and view of the agents (:func:`resumer`), whoever decided;
- **the expiry sweep** (:meth:`ApprovalDesk.sweep`, every ``OPENAGENT_APPROVAL_SWEEP_SECONDS``):
  the approvals whose ``expires_at`` has passed become ``expired`` (on a cluster, one master wins
  each, by the same SET NX as deciding) and their runs end with the answer that says no one
  decided in time, without anyone reading them.

**Who approves.** A key may carry ``approves`` patterns of tool names (``bank__*``). Once any key
of a tenant has one matching a tool, only those keys decide that tool's approvals in the tenant,
and never the key whose query asked for the call (``forbidden``, naming the rule), whichever door
the decision comes through: every door's decision passes :meth:`ApprovalDesk.decide` with the
deciding principal. Without such keys, any key that sees the approval decides it: approvals then
guard against the model, not against the asker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from master.access.keys import KeyStore
from master.agents.registry import AgentTool
from master.agents.toolbox import function_name
from master.auth import DEFAULT_TENANT, SYSTEM, Principal, Role, Scope
from master.conversation.approvals import ApprovalStore
from master.errors import InvalidToolSchema, SessionStoreUnavailable
from master.observability.metrics import Metrics
from master.query.entry import DirectOutcome, Door, QueryEntry, QueryRefused, QueryRun
from master.query.service import rejected_response
from master.runs.extras import RunExtras
from master.runs.state import Asker, RunState
from protocol import Approval, ErrorCode, QueryRequest, QueryResponse, ToolSchema

logger = logging.getLogger("master.query.approvals")

Outcome = Literal["approved", "edited", "rejected", "expired"]
"""How an approval ended, as the metrics count it (``edited``: approved with other arguments)."""

Resumed = Callable[[str, QueryResponse, DirectOutcome | None], Awaitable[None]]
"""Hears the end of a run a decision resumed: ``(session_id, response, direct)``; ``direct`` is
how a door's direct call held for approval ended (``None``: a query's run)."""

_TRY_AGAIN = frozenset({ErrorCode.TOO_MANY_QUERIES, ErrorCode.DRAINING})
"""Refusals of a resume the sweep tries again at its next pass."""

RESUMED_ELSEWHERE = (
    "the run was resumed by another decision of its round, or cancelled; read the session for its answer"
)


class ApprovalRefused(Exception):
    """A decision that was not taken: ``unknown_approval``, ``approval_decided`` (the detail has
    the decision that stands), ``validation_error`` or ``session_store_unavailable``."""

    def __init__(self, code: ErrorCode, detail: str | dict[str, Any]) -> None:
        super().__init__(detail if isinstance(detail, str) else detail.get("message", ""))
        self.code = code
        self.detail = detail


class ApprovalDesk:
    """Decides approvals, resumes their runs and sweeps the expired ones (module docstring)."""

    def __init__(self, entry: QueryEntry, *, keys: KeyStore | None, metrics: Metrics | None = None) -> None:
        self._entry = entry
        self._metrics = metrics
        self._keys = keys
        """The stored keys, whose ``approves`` patterns say who decides (required, so that wiring
        cannot drop the rule; ``None`` only where no key is stored: auth off, anyone decides)."""
        self.listeners: list[Resumed] = []
        """Called with each resumed run's outcome (a failing listener is logged, not raised)."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._sweeping: asyncio.Task[None] | None = None
        self._unresumed: set[str] = set()
        """Sessions whose approvals this master's sweep expired but whose run it could not resume
        yet (the master was full or draining)."""

    @property
    def store(self) -> ApprovalStore | None:
        return self._entry.queries.approvals

    # Reading.

    async def record(self, approval_id: str, scope: Scope) -> dict[str, Any]:
        """The approval as it stands (:meth:`ApprovalStore.record`); refuses an unknown one, and
        one ``scope`` does not see (another tenant's, as unknown)."""
        store = self.store
        try:
            record = await store.record(approval_id, scope) if store is not None else None
        except SessionStoreUnavailable as exc:
            raise ApprovalRefused(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
        if record is None:
            raise ApprovalRefused(
                ErrorCode.UNKNOWN_APPROVAL, f"no approval {approval_id!r} (never made, or expired long ago)"
            )
        return record

    async def pending(self, session_id: str, scope: Scope) -> list[Approval]:
        """The approvals of the session's paused round still waiting for a decision (``scope``'s)."""
        try:
            _, approvals = await self._entry.queries.held_run(session_id, scope)
        except SessionStoreUnavailable as exc:
            raise ApprovalRefused(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
        return [a for a in approvals if a.status == "pending"]

    async def paused(self, session_id: str, scope: Scope) -> bool:
        """Whether the session has a run paused for approvals (decided or not)."""
        try:
            state, _ = await self._entry.queries.held_run(session_id, scope)
        except SessionStoreUnavailable as exc:
            raise ApprovalRefused(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
        return state is not None

    # Deciding.

    async def decide(
        self,
        approval_id: str,
        decision: Literal["approve", "reject"],
        *,
        message: str | None = None,
        arguments: dict[str, Any] | None = None,
        remember: Literal["session"] | None = None,
        principal: Principal,
    ) -> dict[str, Any]:
        """Decide one pending approval as ``principal``; returns its record, decided. Does not
        resume the run (:meth:`resume`). An approval found expired is recorded ``expired``, its run
        resumed (the model is told no one decided in time), and the decision refused
        (``approval_decided``). An approval ``principal``'s scope does not see (another tenant's)
        is unknown. A principal the tool's approvers exclude is refused (``forbidden``: module
        docstring)."""
        scope = Scope.of(principal)
        record = await self.record(approval_id, scope)
        store = self.store
        assert store is not None
        if record["status"] == "expired" and record.get("decided_at") is None:
            await self._decide(store, approval_id, record, "expired")
            await self.resume(str(record["session_id"]), scope)
            record["decided_at"] = record["expires_at"]
            raise ApprovalRefused(
                ErrorCode.APPROVAL_DECIDED,
                {
                    "message": f"approval {approval_id!r} expired before anyone decided it",
                    "approval": Approval.model_validate(record).model_dump(mode="json"),
                },
            )
        if record["status"] != "pending":
            raise ApprovalRefused(ErrorCode.APPROVAL_DECIDED, _decided(approval_id, record))
        await self._check_decider(approval_id, record, principal)
        if arguments is not None and decision == "approve":
            check_arguments(record, arguments)
        status: Literal["approved", "rejected"] = "approved" if decision == "approve" else "rejected"
        edited = arguments if status == "approved" else None
        outcome = await self._decide(store, approval_id, record, status, message=message, arguments=edited)
        record.update(outcome)
        if remember == "session" and status == "approved":
            await self._remember(store, record)
        return record

    async def check_decider(self, approval_id: str, principal: Principal) -> None:
        """Refuse ``principal`` as :meth:`decide` would (who approves), without deciding: a door
        that must refuse before it changes anything (an A2A message on a waiting task)."""
        await self._check_decider(approval_id, await self.record(approval_id, Scope.of(principal)), principal)

    async def _check_decider(self, approval_id: str, record: dict[str, Any], principal: Principal) -> None:
        """Refuse ``principal`` when keys of the approval's tenant approve its tool and it is not
        one of them, or it is the key that asked (module docstring: who approves)."""
        if self._keys is None:
            return
        tenant = str(record.get("tenant") or DEFAULT_TENANT)
        tool = function_name(str(record["agent_id"]), str(record["tool_name"]))
        try:
            approvers = await self._keys.approvers(tenant, tool)
        except SessionStoreUnavailable as exc:
            raise ApprovalRefused(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
        if not approvers:
            return
        if principal.key_id not in {key.key_id for key in approvers}:
            raise ApprovalRefused(
                ErrorCode.FORBIDDEN,
                f"only keys whose 'approves' patterns match {tool!r} decide its approvals in tenant "
                f"{tenant!r}; key {principal.name!r} approves {list(principal.approves)}",
            )
        if principal.key_id == record.get("asker_key"):
            raise ApprovalRefused(
                ErrorCode.FORBIDDEN,
                f"approval {approval_id!r} of {tool!r} was asked for with key {principal.name!r}: the key "
                f"that asked never decides it, as keys of tenant {tenant!r} approve {tool!r}",
            )

    async def _decide(
        self,
        store: ApprovalStore,
        approval_id: str,
        record: dict[str, Any],
        status: Literal["approved", "rejected", "expired"],
        *,
        message: str | None = None,
        arguments: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        try:
            won, decision = await store.decide(approval_id, status, message=message, arguments=arguments)
            if not won:
                record = await store.record(approval_id, Scope.for_tenant(record.get("tenant"))) or {
                    **record,
                    **decision,
                }
        except SessionStoreUnavailable as exc:
            raise ApprovalRefused(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
        if not won:
            raise ApprovalRefused(ErrorCode.APPROVAL_DECIDED, _decided(approval_id, record))
        self._count("edited" if arguments is not None else status, record, float(decision["decided_at"]))
        return decision

    async def _remember(self, store: ApprovalStore, record: dict[str, Any]) -> None:
        """Approve the tool for the rest of the session, and the round's other calls of it now."""
        session_id, agent_id, tool_name = (str(record[k]) for k in ("session_id", "agent_id", "tool_name"))
        try:
            await store.remember(session_id, agent_id, tool_name)
        except SessionStoreUnavailable as exc:
            raise ApprovalRefused(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
        for other in await self.pending(session_id, Scope.for_tenant(record.get("tenant"))):
            if (other.agent_id, other.tool_name) != (agent_id, tool_name):
                continue
            try:
                won, decision = await store.decide(
                    other.approval_id, "approved", message="approved for the rest of the session"
                )
            except SessionStoreUnavailable as exc:
                raise ApprovalRefused(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
            if won:
                self._count("approved", other.model_dump(), float(decision["decided_at"]))

    def _count(self, outcome: Outcome, record: dict[str, Any], decided_at: float) -> None:
        """``openagent_approvals_total`` and the time to decision (an expired one's: its TTL)."""
        if self._metrics is None:
            return
        created, expires = float(record["created_at"]), float(record["expires_at"])
        end = min(decided_at, expires) if outcome == "expired" else decided_at
        self._metrics.approvals.labels(outcome).inc()
        self._metrics.approval_seconds.labels(outcome).observe(max(0.0, end - created))

    # Resuming.

    async def start_resume(
        self, session_id: str, scope: Scope, *, door: Door = "http", stream: bool = False, tell: bool = True
    ) -> QueryRun | QueryResponse:
        """Start the session's paused run again when every approval of its round is decided: the
        run (its outcome goes to :attr:`listeners` too, unless not ``tell``: a door that follows
        the run itself). Else an answer without a run: the round's approvals as they stand
        (``awaiting_approval``), or that another decision resumed it. Raises :class:`QueryRefused`
        when the master does not admit the run (``too_many_queries``, ``draining``) only if
        ``stream``; otherwise that is the answer. ``scope``: the decider's (the sweep's: every
        tenant's), which must see the round's approvals."""
        try:
            state, approvals = await self._entry.queries.held_run(session_id, scope)
        except SessionStoreUnavailable as exc:
            raise ApprovalRefused(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
        if state is None:
            return _resumed_elsewhere(session_id)
        if any(a.status == "pending" for a in approvals):
            return QueryResponse(
                query_id=state.query_id,
                session_id=session_id,
                success=True,
                status="awaiting_approval",
                approvals=approvals,
                run_id=state.run_id,
            )
        request = QueryRequest.model_validate({**state.request, "session_id": session_id})
        try:
            extras = RunExtras(resume_approvals=True, run_id=state.run_id, direct=state.direct)
            run = self._entry.submit(
                request, door=door, stream=stream, extras=extras, principal=resumer(state)
            )
        except QueryRefused as exc:
            if stream:
                raise
            return rejected_response(request, "", exc)
        if tell and self.listeners:
            task = asyncio.create_task(self._tell(session_id, run), name=f"approvals: resumed {session_id}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return run

    async def resume(self, session_id: str, scope: Scope) -> QueryResponse:
        """:meth:`start_resume`, waiting for the run's outcome."""
        started = await self.start_resume(session_id, scope)
        if isinstance(started, QueryResponse):
            return started
        return settled(session_id, await started.result())

    async def _tell(self, session_id: str, run: QueryRun) -> None:
        response = await run.result()
        if _lost_the_resume(response):
            return
        for listener in list(self.listeners):
            try:
                await listener(session_id, response, run.direct)
            except Exception:
                logger.exception("approvals: a listener failed on the resumed run of session %s", session_id)

    # The expiry sweep.

    async def sweep(self) -> int:
        """Mark the approvals whose time has passed ``expired`` and resume their runs (in the
        background: the model is told no one decided in time). Returns how many this master marked."""
        store = self.store
        if store is None:
            return 0
        expired = 0
        sessions: list[str] = []
        try:
            overdue = await store.overdue()
        except SessionStoreUnavailable as exc:
            raise ApprovalRefused(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
        for approval_id in overdue:
            try:
                record = await store.record(approval_id, Scope.of(SYSTEM))
                if record is None or record.get("decided_at") is not None:
                    await store.forget_overdue(approval_id)
                    continue
                won, decision = await store.decide(approval_id, "expired")
                if not won:  # a person or another master was first
                    await store.forget_overdue(approval_id)
                    continue
            except SessionStoreUnavailable as exc:
                raise ApprovalRefused(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
            self._count("expired", record, float(decision["decided_at"]))
            expired += 1
            if record["session_id"] not in sessions:
                sessions.append(str(record["session_id"]))
        for session_id in sessions:
            logger.info("approvals of session %s expired: its run resumes without them", session_id)
        for session_id in [*sessions, *(s for s in self._unresumed if s not in sessions)]:
            started = await self.start_resume(session_id, Scope.of(SYSTEM))
            if isinstance(started, QueryResponse) and started.error_code in _TRY_AGAIN:
                self._unresumed.add(session_id)  # not admitted now: the next pass tries again
            else:
                self._unresumed.discard(session_id)
        return expired

    def start(self, interval_seconds: float) -> None:
        """Sweep every ``interval_seconds`` until :meth:`aclose` (0: never)."""
        if interval_seconds > 0:
            self._sweeping = asyncio.create_task(self._sweep_every(interval_seconds), name="approvals-sweep")

    async def _sweep_every(self, interval: float) -> None:
        current = asyncio.current_task()
        while True:
            await asyncio.sleep(interval)
            try:
                await self.sweep()
            except ApprovalRefused as exc:
                logger.warning("approvals sweep: %s; trying again in %.0f s", exc, interval)
            except Exception:
                logger.exception("approvals sweep failed; trying again in %.0f s", interval)
            if current is not None and current.cancelling():
                # Cancelled (aclose) just as a Redis call's own timeout fired: the call failed
                # with the timeout instead of the cancellation, which must still stop the loop.
                raise asyncio.CancelledError

    async def aclose(self) -> None:
        """Stop sweeping and stop waiting for resumed runs (their runs are the entry's to end)."""
        tasks = [*self._tasks, *([self._sweeping] if self._sweeping is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def resumer(state: RunState) -> Principal:
    """Who a paused run goes on as: its asker, by the key that asked (so that the next round's
    approvals still know it: who approves), with its tenant, and an administrator's view of the
    agents only when an administrator asked. A run paused without its asker (before tenants)
    goes on as a client of the default tenant, never as an administrator."""
    held = state.held
    asker = (held.asker if held is not None else None) or Asker()
    tenant = asker.tenant or DEFAULT_TENANT
    admin = asker.admin
    key = asker.key or "approvals"
    name = asker.name or f"a resumed run of tenant {tenant}"
    return Principal(key_id=key, name=name, role=Role.ADMIN if admin else Role.CLIENT, tenant=tenant)


def settled(session_id: str, response: QueryResponse) -> QueryResponse:
    """A resume's outcome, or "resumed by another decision" when the other one won the resume."""
    return _resumed_elsewhere(session_id) if _lost_the_resume(response) else response


def _lost_the_resume(response: QueryResponse) -> bool:
    return bool(
        response.error_code == ErrorCode.INVALID_QUERY
        and response.error
        and "resumed already" in response.error
    )


def _resumed_elsewhere(session_id: str) -> QueryResponse:
    return QueryResponse(
        query_id="", session_id=session_id, success=True, status="completed", answer=RESUMED_ELSEWHERE
    )


def _decided(approval_id: str, record: dict[str, Any]) -> dict[str, Any]:
    approval = Approval.model_validate(record).model_dump(mode="json")
    return {
        "message": f"approval {approval_id!r} was already decided: {record['status']}",
        "approval": approval,
    }


def check_arguments(record: dict[str, Any], arguments: dict[str, Any]) -> None:
    """Edited arguments must fit the tool's schema (as it was when the run paused)."""
    try:
        tool = AgentTool.compile(
            str(record["agent_id"]),
            ToolSchema(name=str(record["tool_name"]), parameters=record.get("parameters") or {}),
        )
    except InvalidToolSchema as exc:
        raise ApprovalRefused(ErrorCode.VALIDATION_ERROR, str(exc)) from None
    problems = tool.validate(arguments)
    if problems:
        raise ApprovalRefused(
            ErrorCode.VALIDATION_ERROR,
            f"edited arguments for {record['tool_name']!r} do not fit its schema: " + "; ".join(problems),
        )


__all__ = ["ApprovalDesk", "ApprovalRefused", "Outcome", "Resumed", "check_arguments", "settled"]
