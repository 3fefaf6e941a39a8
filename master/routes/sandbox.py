"""The Kubernetes sandbox endpoints (``master/sandbox/``).

With ``OPENAGENT_K8S_SANDBOX=0`` every route but the status answers 403 naming the setting; with
no reachable cluster, 503 saying why. ``GET /internal/sandbox/status`` always answers.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, Field

from master.deps import ServicesDep
from master.errors import (
    SandboxDisabled,
    SandboxError,
    SandboxRejected,
    SandboxUnavailable,
    SessionStoreUnavailable,
)

router = APIRouter(tags=["sandbox"])

_STATUS_BY_CODE = {
    "invalid_request": 400,
    "unknown_module": 404,
    "not_deployed": 404,
    "not_found": 404,
    "unknown_pool_pod": 404,
    "no_pool": 409,
    "pool_refused": 409,
}
_RESPONSES: dict[int | str, dict[str, Any]] = {
    403: {"description": "OPENAGENT_K8S_SANDBOX=0"},
    503: {
        "description": "No cluster configured or reachable, a pool runner did not answer, or Redis is down"
    },
}


def _http_error(exc: SandboxError | SessionStoreUnavailable) -> HTTPException:
    if isinstance(exc, SandboxDisabled):
        return HTTPException(403, detail=str(exc))
    if isinstance(exc, SandboxRejected):
        return HTTPException(
            _STATUS_BY_CODE.get(exc.code, 400), detail={"code": exc.code, "message": exc.message}
        )
    if isinstance(exc, SandboxUnavailable | SessionStoreUnavailable):
        return HTTPException(503, detail=str(exc))
    return HTTPException(500, detail=str(exc))


class SandboxStartRequest(BaseModel):
    """``POST /internal/sandbox-agent/start``: exactly one of ``module`` and ``source``."""

    agent_id: str = Field(min_length=1, max_length=128)
    module: str | None = None
    """A module of ``agents/`` or ``system_agents/``, e.g. ``agents.weather_bot``."""
    source: str | None = None
    """The agent script's text."""
    placement: Literal["new_pod", "pool"] = "new_pod"
    pool_pod_name: str | None = None
    """With ``pool``: this pool runner Pod; otherwise the least loaded one."""
    master_ws: str | None = None
    """Default ``OPENAGENT_K8S_MASTER_WS``."""
    env: dict[str, str] = Field(default_factory=dict)


class SandboxStopRequest(BaseModel):
    agent_id: str = Field(min_length=1, max_length=128)


@router.get("/internal/sandbox/status")
async def sandbox_status(services: ServicesDep) -> dict[str, Any]:
    """Whether the sandbox is on, its namespace, whether the cluster answers (and why not), images."""
    return await services.sandbox.status()


@router.post("/internal/sandbox-agent/start", status_code=201, responses=_RESPONSES)
async def start_agent(body: SandboxStartRequest, services: ServicesDep) -> dict[str, Any]:
    """Deploy agent code in a Pod of its own (``new_pod``) or in a pool runner (``pool``); replaces a deployed one."""
    try:
        return await services.sandbox.start(
            body.agent_id,
            placement=body.placement,
            module=body.module,
            source=body.source,
            pool_pod_name=body.pool_pod_name,
            master_ws=body.master_ws,
            env=body.env,
        )
    except (SandboxError, SessionStoreUnavailable) as exc:
        raise _http_error(exc) from exc


@router.post("/internal/sandbox-agent/stop", responses=_RESPONSES)
async def stop_agent(body: SandboxStopRequest, services: ServicesDep) -> dict[str, Any]:
    """Tear down the agent's Pod and ConfigMap, or stop it in its pool runner."""
    try:
        return await services.sandbox.stop(body.agent_id)
    except (SandboxError, SessionStoreUnavailable) as exc:
        raise _http_error(exc) from exc


@router.get("/internal/sandbox-agent/logs", responses=_RESPONSES)
async def agent_logs(
    services: ServicesDep,
    agent_id: Annotated[str, Query(min_length=1)],
    tail_lines: Annotated[int, Query(ge=1, le=10_000)] = 200,
) -> dict[str, Any]:
    """The agent container's log (the previous run's when it is crash-looping) or its pool log."""
    try:
        return await services.sandbox.logs(agent_id, tail_lines)
    except (SandboxError, SessionStoreUnavailable) as exc:
        raise _http_error(exc) from exc


@router.get("/internal/k8s/pools", responses=_RESPONSES)
async def pools(services: ServicesDep) -> dict[str, Any]:
    """Pool runner Pods and the agents each runs."""
    try:
        return {"pools": await services.sandbox.pools()}
    except SandboxError as exc:
        raise _http_error(exc) from exc


@router.get("/internal/k8s/workloads", responses=_RESPONSES)
async def workloads(services: ServicesDep) -> dict[str, Any]:
    """Dedicated agent Pods and pool Pods."""
    try:
        return await services.sandbox.workloads()
    except SandboxError as exc:
        raise _http_error(exc) from exc
