"""``/approvals``: the tool calls that wait for a person, and their decisions.

A query whose model wants a call needing approval pauses (``status: "awaiting_approval"``, the
calls in ``approvals``). ``GET /approvals?session_id=`` and ``GET /approvals/{approval_id}`` read
them; ``POST /approvals/{approval_id}`` decides one, exactly once (a second decider gets 409 with
the decision that won). When the last pending call of the round is decided, the run resumes
through the query entry and the POST answers with its result, as ``POST /query`` would. The
deciding itself is :class:`master.query.approvals.ApprovalDesk`'s, shared with the other doors.
Another tenant's approvals are unknown (404, and left out of the lists) to a key that is not an
administrator's.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from master.auth import Principal, Scope
from master.deps import PrincipalDep, ServicesDep
from master.errors import SessionStoreUnavailable
from master.errors.responses import ApiError
from master.openapi import error
from master.query.approvals import ApprovalDesk, ApprovalRefused, settled
from master.query.verbs import RunRefused, RunVerbs
from master.routes.query import _json
from master.runs.decisions import Approve, Reject
from protocol import Approval, ErrorCode, QueryResponse

router = APIRouter(tags=["approvals"])

ApprovalId = Annotated[
    str, Path(pattern=r"^[A-Za-z0-9_-]{1,128}$", description="An approval_id from a query")
]
_STORE_DOWN = error("Redis unavailable (session_store_unavailable)")


class ApprovalList(BaseModel):
    """``GET /approvals``: a session's approvals, or the pending ones of every session, oldest first."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    approvals: list[Approval]


class ApprovalDecision(BaseModel):
    """The body of ``POST /approvals/{approval_id}``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    decision: Literal["approve", "reject"]
    message: Annotated[str, Field(max_length=4000)] | None = None
    """Why (a rejection's reason is told to the model)."""
    arguments: dict[str, Any] | None = None
    """Approve with these arguments instead of the model's (checked against the tool's schema:
    422 naming each offending field)."""
    remember: Literal["session"] | None = None
    """``"session"``: approve this tool (this agent's) for the rest of the session: its later calls
    in the session run without waiting, and so do the round's other pending calls of it."""

    @model_validator(mode="after")
    def _remember_approves(self) -> ApprovalDecision:
        if self.remember is not None and self.decision != "approve":
            raise ValueError("'remember' goes with decision 'approve' only")
        return self


@router.get("/approvals", response_model=ApprovalList, responses={503: _STORE_DOWN})
async def list_approvals(
    services: ServicesDep,
    principal: PrincipalDep,
    session_id: Annotated[
        str | None,
        Query(
            pattern=r"^[A-Za-z0-9_-]{1,128}$",
            description="The session; without it, the pending approvals of every session",
        ),
    ] = None,
) -> dict[str, Any]:
    """The session's approvals (pending, approved, rejected or expired), oldest first; without
    ``session_id``, the approvals of every session still waiting for a decision. A tenant's key
    gets its tenant's only."""
    store = services.queries.approvals
    if store is None:
        return {"approvals": []}
    try:
        scope = Scope.of(principal)
        if session_id is None:
            return {"approvals": await store.pending(scope)}
        return {"approvals": await store.of_session(session_id, scope)}
    except SessionStoreUnavailable as exc:
        raise ApiError(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None


@router.get(
    "/approvals/{approval_id}",
    response_model=Approval,
    responses={404: error("No such approval (unknown_approval)"), 503: _STORE_DOWN},
)
async def read_approval(approval_id: ApprovalId, services: ServicesDep, principal: PrincipalDep) -> Approval:
    """One approval, with its decision once made."""
    return Approval.model_validate(await _record(services, approval_id, principal))


@router.post(
    "/approvals/{approval_id}",
    response_model=QueryResponse,
    responses={
        404: error("No such approval (unknown_approval)"),
        409: error("Decided already, or expired (approval_decided): the detail has the decision that stands"),
        422: error("Edited arguments that do not fit the tool's schema (validation_error)"),
        503: _STORE_DOWN,
    },
)
async def decide_approval(
    approval_id: ApprovalId, body: ApprovalDecision, services: ServicesDep, principal: PrincipalDep
) -> Response:
    """Approve (optionally with edited arguments, optionally for the rest of the session) or
    reject one call. Once every call of the paused round is decided, the run resumes and the
    answer is its result (a ``QueryResponse``); before that, the answer lists the round's
    approvals (``status: "awaiting_approval"``)."""
    decision: Approve | Reject = (
        Approve(
            approval_id=approval_id, arguments=body.arguments, message=body.message, remember=body.remember
        )
        if body.decision == "approve"
        else Reject(approval_id=approval_id, reason=body.message)
    )
    return await _resume(services, approval_id, [decision], principal)


@router.post(
    "/approvals/{approval_id}/resume",
    response_model=QueryResponse,
    responses={404: error("No such approval (unknown_approval)"), 503: _STORE_DOWN},
)
async def resume_approval(
    approval_id: ApprovalId, services: ServicesDep, principal: PrincipalDep
) -> Response:
    """Resume the run of a decided approval again, after a resume that failed (an agent gone,
    the LLM down): the decisions stand and the calls already run are not run again."""
    desk = _desk(services)
    try:
        record = await desk.record(approval_id, Scope.of(principal))
        return _json(await desk.resume(str(record["session_id"]), Scope.of(principal)))
    except ApprovalRefused as exc:
        raise ApiError(exc.code, exc.detail) from None


async def _resume(
    services: ServicesDep, approval_id: str, decisions: list[Approve | Reject], principal: Principal
) -> Response:
    """The approval's run resumed with ``decisions`` (:meth:`RunVerbs.resume`), its answer awaited."""
    verbs = RunVerbs(services.entry, _desk(services))
    try:
        run_id = await verbs.run_of(approval_id, principal)
        started = await verbs.resume(run_id, decisions, principal)
    except RunRefused as exc:
        raise ApiError(exc.code, exc.detail) from None
    if isinstance(started, QueryResponse):
        return _json(started)
    response = await started.result()
    return _json(settled(response.session_id or "", response))


def _desk(services: ServicesDep) -> ApprovalDesk:
    return services.approvals or ApprovalDesk(services.entry, keys=services.keys, metrics=services.metrics)


async def _record(services: ServicesDep, approval_id: str, principal: Principal) -> dict[str, Any]:
    try:
        return await _desk(services).record(approval_id, Scope.of(principal))
    except ApprovalRefused as exc:
        raise ApiError(exc.code, exc.detail) from None
