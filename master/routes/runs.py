"""``/runs``: every query's run, as recorded in Redis, and the resume of a halted one.

``DELETE /runs/{run_id}`` cancels a run, running on whichever master holds it or paused
(:mod:`master.runs.cancel`, the verb every door's cancel comes to).
``GET /runs/{run_id}`` reads a run's record (:mod:`master.runs.store`): its state, the
master holding it, the tool calls it completed, the ones in flight and the ones whose outcome is
unknown. ``POST /runs/{run_id}/resume`` continues a run a budget or auto mode's step limit
stopped (or one whose master was lost after it recorded what it resumes from) with a larger
budget, without repeating its completed calls; the answer is the run's, as ``POST /query``
would give it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from master.auth import Principal
from master.deps import PrincipalDep, ServicesDep
from master.errors.responses import ApiError
from master.openapi import error
from master.orchestration.roles import CoordinatorState
from master.query.entry import CancelRefused
from master.query.verbs import RunRefused, RunVerbs
from master.routes.query import _json, sse_response
from master.runs.decisions import RaiseBudget
from protocol import Budget, QueryResponse

router = APIRouter(tags=["runs"])

RunId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{1,128}$", description="A run_id from a query's answer")]
_STORE_DOWN = error("Redis unavailable (session_store_unavailable)")
_UNKNOWN = error("No such run (unknown_run)")


class RunCall(BaseModel):
    """A tool call of a run."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    agent_id: str | None = None
    tool_name: str | None = None
    arguments: Any = None
    success: bool | None = None
    """Completed calls: whether the tool succeeded (``result`` or ``error`` beside it)."""


class UnsettledCall(BaseModel):
    """A call sent and not answered (in flight), or whose outcome is unknown."""

    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)

    id: str | None = None
    """The model's id of the call."""
    name: str | None = None
    """The function name (``<agent_id>__<tool>``)."""
    arguments: Any = None


class RunRecord(BaseModel):
    """``GET /runs/{run_id}``: a run's record."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    run_id: str
    state: Literal[
        "running", "awaiting_approval", "awaiting_tool_results", "stopped", "completed", "failed", "cancelled"
    ]
    """``running``; paused (``awaiting_approval``, ``awaiting_tool_results``); ``stopped`` by a
    budget or the step limit (resumable); ``completed``; ``failed`` (``reason`` says why, e.g. the
    master holding it was lost); ``cancelled`` (``DELETE /runs/{run_id}`` or any door's cancel)."""
    holder: str | None = None
    """The id of the master that holds (or last held) the run."""
    session_id: str | None = None
    tenant: str | None = None
    query_id: str | None = None
    reason: str | None = None
    """Why the run stopped or failed."""
    stopped_by: str | None = None
    """``max_tool_calls``, ``max_tokens``, ``max_seconds``, ``max_steps`` or ``llm_error`` (a stopped run)."""
    resumable: bool = False
    """``POST /runs/{run_id}/resume`` continues it."""
    created_at: float | None = None
    updated_at: float | None = None
    completed: list[RunCall] = Field(default_factory=list)
    """The tool calls that came back, in order (never run again on a resume)."""
    in_flight: list[UnsettledCall] = Field(default_factory=list)
    """Calls sent and not answered yet (as of the holder's last write)."""
    unknown: list[UnsettledCall] = Field(default_factory=list)
    """Calls that were in flight when the run stopped or its master was lost: their outcome is
    unknown, and they are never sent again."""
    roles: CoordinatorState | None = None
    """A run with ``roles``: the coordinator's phase, the plan's sub-tasks (each with its status,
    attempts, last output and verdicts), why it is blocked, or the disagreement a person decides."""


class ResumeBody(BaseModel):
    """The body of ``POST /runs/{run_id}/resume``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    budget: Budget = Field(default_factory=Budget)
    """The run's new limits, for the whole run (what it spent counts): each one given must not be
    smaller than before, and the one that stopped the run must be larger. Omitted ones stay."""
    stream: bool = False
    """Answer with Server-Sent Events, as ``POST /query`` does."""


async def _record(services: ServicesDep, run_id: str, principal: Principal) -> dict[str, Any]:
    try:
        record, _ = await RunVerbs(services.entry).record(run_id, principal)
    except RunRefused as exc:
        raise ApiError(exc.code, exc.detail) from None
    return record


@router.get("/runs/{run_id}", response_model=RunRecord, responses={404: _UNKNOWN, 503: _STORE_DOWN})
async def read_run(run_id: RunId, services: ServicesDep, principal: PrincipalDep) -> dict[str, Any]:
    """A run's record. A run held by a master that was lost reads ``failed`` (marked now, if no
    master's sweep has yet). Another tenant's run is unknown (404) to a tenant's key."""
    return await _record(services, run_id, principal)


@router.delete(
    "/runs/{run_id}",
    response_model=RunRecord,
    responses={
        404: _UNKNOWN,
        409: error("The run finished: completed or failed (run_not_running); the message names its state"),
        503: _STORE_DOWN,
    },
)
async def cancel_run(run_id: RunId, services: ServicesDep, principal: PrincipalDep) -> dict[str, Any]:
    """Cancel a run, running on whichever master holds it or paused (every door's one cancel).
    A running one is stopped by its master and recorded ``cancelled``; its calls in flight are
    listed ``unknown`` (they may have taken effect, and are never sent again); its asker's answer
    is ``run_cancelled``. The answer is the run's record once its holder stopped it (or, after
    10 s without that, as it stands). A paused one (``awaiting_approval``,
    ``awaiting_tool_results``, ``stopped``) is cancelled at once: its pending approvals are
    withdrawn and it can no longer resume. A cancelled one answers its record again (a finished
    one: 409). Another tenant's run is unknown (404)."""
    try:
        record = await services.entry.cancel(run_id, principal=principal, door="http")
    except CancelRefused as exc:
        raise ApiError(exc.code, exc.message) from None
    record["resumable"] = False
    return record


@router.post(
    "/runs/{run_id}/resume",
    response_model=QueryResponse,
    responses={
        404: _UNKNOWN,
        409: error("The run is not in a state that resumes (run_not_resumable); the message names it"),
        422: error("A budget not larger than the one that stopped the run (budget_not_larger)"),
        503: _STORE_DOWN,
    },
)
async def resume_run(
    run_id: RunId, body: ResumeBody, services: ServicesDep, principal: PrincipalDep
) -> Response:
    """Continue a run a budget or the step limit stopped, with a larger budget: from where it
    stopped, its completed tool calls not repeated (calls in flight when it stopped are told to
    the model as unknown, never sent again). The answer is the run's, as ``POST /query`` gives it."""
    verbs = RunVerbs(services.entry, services.approvals)
    try:
        run = await verbs.resume(
            run_id,
            [RaiseBudget(budget=body.budget)],
            principal,
            door="sse" if body.stream else "http",
            stream=body.stream,
        )
    except RunRefused as exc:
        raise ApiError(exc.code, exc.detail) from None
    if isinstance(run, QueryResponse):  # not admitted
        return _json(run)
    if body.stream:
        return sse_response(run)
    return _json(await run.result())
