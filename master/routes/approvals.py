"""``/approvals``: the tool calls that wait for a person, and their decisions.

A query whose model wants a call needing approval pauses (``status: "awaiting_approval"``, the
calls in ``approvals``). ``GET /approvals?session_id=`` and ``GET /approvals/{approval_id}`` read
them; ``POST /approvals/{approval_id}`` decides one, exactly once (a second decider gets 409 with
the decision that won). Another tenant's approvals are unknown (404, and left out of the list)
to a key that is not an administrator's. When the last pending call of the round is decided, the run resumes
through the query entry and the POST answers with its result, as ``POST /query`` would.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from master.agents.registry import AgentTool
from master.auth import Principal
from master.deps import PrincipalDep, ServicesDep
from master.error_responses import ApiError
from master.errors import InvalidToolSchema, SessionStoreUnavailable
from master.openapi import error
from master.query.entry import QueryRefused
from master.query.extras import RunExtras
from master.query.service import rejected_response
from master.routes.query import _json
from protocol import Approval, ErrorCode, QueryRequest, QueryResponse, ToolSchema

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
        tenant = principal.tenant_filter
        if session_id is None:
            return {"approvals": await store.pending(tenant=tenant)}
        return {"approvals": await store.of_session(session_id, tenant=tenant)}
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
    """Approve (optionally with edited arguments) or reject one call. Once every call of the
    paused round is decided, the run resumes and the answer is its result (a ``QueryResponse``);
    before that, the answer lists the round's approvals (``status: "awaiting_approval"``)."""
    store = services.queries.approvals
    record = await _record(services, approval_id, principal)
    if record["status"] == "expired" and record.get("decided_at") is None:
        await _decide(services, approval_id, "expired", None, None)
        await _resume_if_decided(services, str(record["session_id"]), principal)
        record["decided_at"] = record["expires_at"]
        raise ApiError(
            ErrorCode.APPROVAL_DECIDED,
            {
                "message": f"approval {approval_id!r} expired before anyone decided it",
                "approval": Approval.model_validate(record).model_dump(mode="json"),
            },
        )
    if record["status"] != "pending":
        raise ApiError(ErrorCode.APPROVAL_DECIDED, _decided(approval_id, record))
    assert store is not None
    if body.arguments is not None and body.decision == "approve":
        _check_arguments(record, body.arguments)
    status: Literal["approved", "rejected"] = "approved" if body.decision == "approve" else "rejected"
    await _decide(
        services, approval_id, status, body.message, body.arguments if status == "approved" else None
    )
    response = await _resume_if_decided(services, str(record["session_id"]), principal)
    return _json(response)


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
    record = await _record(services, approval_id, principal)
    return _json(await _resume_if_decided(services, str(record["session_id"]), principal))


async def _record(services: ServicesDep, approval_id: str, principal: Principal) -> dict[str, Any]:
    store = services.queries.approvals
    tenant = principal.tenant_filter
    try:
        record = await store.record(approval_id, tenant=tenant) if store is not None else None
    except SessionStoreUnavailable as exc:
        raise ApiError(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
    if record is None:
        raise ApiError(
            ErrorCode.UNKNOWN_APPROVAL, f"no approval {approval_id!r} (never made, or expired long ago)"
        )
    return record


def _decided(approval_id: str, record: dict[str, Any]) -> dict[str, Any]:
    approval = Approval.model_validate(record).model_dump(mode="json")
    return {
        "message": f"approval {approval_id!r} was already decided: {record['status']}",
        "approval": approval,
    }


async def _decide(
    services: ServicesDep,
    approval_id: str,
    status: Literal["approved", "rejected", "expired"],
    message: str | None,
    arguments: dict[str, Any] | None,
) -> None:
    store = services.queries.approvals
    assert store is not None
    try:
        won, decision = await store.decide(approval_id, status, message=message, arguments=arguments)
        record = await store.record(approval_id)
    except SessionStoreUnavailable as exc:
        raise ApiError(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
    if not won:
        raise ApiError(ErrorCode.APPROVAL_DECIDED, _decided(approval_id, record or decision))
    outcome = "edited" if arguments is not None else status
    services.metrics.approvals.labels(outcome).inc()


def _check_arguments(record: dict[str, Any], arguments: dict[str, Any]) -> None:
    """Edited arguments must fit the tool's schema (as it was when the run paused)."""
    try:
        tool = AgentTool.compile(
            str(record["agent_id"]),
            ToolSchema(name=str(record["tool_name"]), parameters=record.get("parameters") or {}),
        )
    except InvalidToolSchema as exc:
        raise ApiError(ErrorCode.VALIDATION_ERROR, str(exc)) from None
    problems = tool.validate(arguments)
    if problems:
        raise ApiError(
            ErrorCode.VALIDATION_ERROR,
            f"edited arguments for {record['tool_name']!r} do not fit its schema: " + "; ".join(problems),
        )


async def _resume_if_decided(services: ServicesDep, session_id: str, principal: Principal) -> QueryResponse:
    """The run's result when every approval of its round is decided (it resumes now), else the
    round's approvals as they stand."""
    try:
        state, approvals = await services.queries.held_run(session_id)
    except SessionStoreUnavailable as exc:
        raise ApiError(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
    if state is None:
        return _resumed_elsewhere(session_id)
    if any(a.status == "pending" for a in approvals):
        return QueryResponse(
            query_id=str(state.get("query_id") or ""),
            session_id=session_id,
            success=True,
            status="awaiting_approval",
            approvals=approvals,
        )
    request = QueryRequest.model_validate({**state["request"], "session_id": session_id})
    try:
        run = services.entry.submit(
            request, door="http", extras=RunExtras(resume_approvals=True), principal=principal
        )
    except QueryRefused as exc:
        return rejected_response(request, "", exc)
    response = await run.result()
    if (
        response.error_code == ErrorCode.INVALID_QUERY
        and response.error
        and "resumed already" in response.error
    ):
        return _resumed_elsewhere(session_id)  # the other decision of the round won the resume
    return response


def _resumed_elsewhere(session_id: str) -> QueryResponse:
    return QueryResponse(
        query_id="",
        session_id=session_id,
        success=True,
        status="completed",
        answer="the run was resumed by another decision of its round; read the session for its answer",
    )
