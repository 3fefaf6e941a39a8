"""The Kubernetes sandbox endpoints (``master/sandbox/``).

With ``OPENAGENT_K8S_SANDBOX=0`` every route but the status answers 403 naming the setting; with
no reachable cluster, 503 saying why. ``GET /internal/sandbox/status`` always answers.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from master.access import AuditAction, Permission, audit
from master.auth import principal_of
from master.deps import ServicesDep, needs
from master.errors import (
    SandboxDisabled,
    SandboxError,
    SandboxRejected,
    SandboxUnavailable,
    SessionStoreUnavailable,
)
from master.errors.responses import ApiError
from master.openapi import error
from protocol import ErrorCode

router = APIRouter(tags=["sandbox"])

_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: error("A request that cannot run as given (invalid_request)"),
    403: error("OPENAGENT_K8S_SANDBOX=0 (feature_disabled)"),
    404: error("unknown_module, not_deployed, not_found or unknown_pool_pod"),
    409: error("No ready pool runner (no_pool), or it refused the agent (pool_refused)"),
    503: error(
        "No cluster configured or reachable, a pool runner did not answer (sandbox_unavailable), "
        "or Redis is down (session_store_unavailable)"
    ),
}


def _http_error(exc: SandboxError | SessionStoreUnavailable) -> ApiError:
    if isinstance(exc, SandboxDisabled):
        return ApiError(ErrorCode.FEATURE_DISABLED, str(exc))
    if isinstance(exc, SandboxRejected):
        return ApiError(exc.code, {"code": exc.code.value, "message": exc.message})
    if isinstance(exc, SandboxUnavailable):
        return ApiError(ErrorCode.SANDBOX_UNAVAILABLE, str(exc))
    if isinstance(exc, SessionStoreUnavailable):
        return ApiError(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc))
    return ApiError(ErrorCode.INTERNAL_ERROR, str(exc))


class _Open(BaseModel):
    """A sandbox answer: the fields below, and what the cluster or pool runner adds."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)


class SandboxStatus(_Open):
    """``GET /internal/sandbox/status``."""

    enabled: bool
    """``OPENAGENT_K8S_SANDBOX``."""
    namespace: str
    master_ws: str | None = None
    """``OPENAGENT_K8S_MASTER_WS``: the URL deployed agents connect to."""
    master_ws_hint: str | None = None
    images: dict[str, Any] = {}
    """``agent``, ``agent_pull_policy`` and ``pool_runner``."""
    pool_label_selector: str | None = None
    pool_runner_port: int | None = None
    runtime_class: str | None = None
    cluster: dict[str, Any] = {}
    """``reachable``, and ``server`` with ``version``, or the ``reason`` it is not."""


class SandboxStarted(_Open):
    """``POST /internal/sandbox-agent/start``: where the agent was deployed."""

    agent_id: str
    placement: Literal["new_pod", "pool"]
    namespace: str | None = None
    pod_name: str | None = None
    replaced: dict[str, Any] | None = None
    """What a previous deployment of that id left behind and was removed (``pods``, ``config_maps``)."""


class SandboxStopped(_Open):
    """``POST /internal/sandbox-agent/stop``."""

    agent_id: str
    stopped: bool
    removed: dict[str, Any]
    """What was removed: ``pods``, ``config_maps`` (and ``pool_pod``)."""


class SandboxLogs(_Open):
    """``GET /internal/sandbox-agent/logs``."""

    agent_id: str
    placement: Literal["new_pod", "pool"]
    pod_name: str | None = None
    tail_lines: int
    lines: list[str]


class SandboxPools(BaseModel):
    """``GET /internal/k8s/pools``: pool runner Pods and the agents each runs (or why it did not answer)."""

    pools: list[dict[str, Any]]


class SandboxWorkloads(_Open):
    """``GET /internal/k8s/workloads``."""

    namespace: str
    agent_pods: list[dict[str, Any]]
    pools: list[dict[str, Any]]


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


@router.get(
    "/internal/sandbox/status",
    dependencies=needs(Permission.READ),
    response_model=SandboxStatus,
    response_model_exclude_unset=True,
)
async def sandbox_status(services: ServicesDep) -> dict[str, Any]:
    """Whether the sandbox is on, its namespace, whether the cluster answers (and why not), images."""
    return await services.sandbox.status()


@router.post(
    "/internal/sandbox-agent/start",
    dependencies=needs(Permission.ADMIN),
    status_code=201,
    response_model=SandboxStarted,
    response_model_exclude_unset=True,
    responses=_RESPONSES,
)
async def start_agent(body: SandboxStartRequest, request: Request, services: ServicesDep) -> dict[str, Any]:
    """Deploy agent code in a Pod of its own (``new_pod``) or in a pool runner (``pool``); replaces a deployed one."""
    try:
        started = await services.sandbox.start(
            body.agent_id,
            tenant=principal_of(request.scope).tenant,  # the agent's key is its deployer's tenant's
            placement=body.placement,
            module=body.module,
            source=body.source,
            pool_pod_name=body.pool_pod_name,
            master_ws=body.master_ws,
            env=body.env,
        )
    except (SandboxError, SessionStoreUnavailable) as exc:
        raise _http_error(exc) from exc
    audit(
        services.metrics,
        principal_of(request.scope),
        AuditAction.POD_DEPLOYED,
        agent_id=body.agent_id,
        placement=body.placement,
    )
    return started


@router.post(
    "/internal/sandbox-agent/stop",
    dependencies=needs(Permission.ADMIN),
    response_model=SandboxStopped,
    response_model_exclude_unset=True,
    responses=_RESPONSES,
)
async def stop_agent(body: SandboxStopRequest, request: Request, services: ServicesDep) -> dict[str, Any]:
    """Tear down the agent's Pod and ConfigMap, or stop it in its pool runner."""
    try:
        stopped = await services.sandbox.stop(body.agent_id)
    except (SandboxError, SessionStoreUnavailable) as exc:
        raise _http_error(exc) from exc
    audit(services.metrics, principal_of(request.scope), AuditAction.POD_STOPPED, agent_id=body.agent_id)
    return stopped


@router.get(
    "/internal/sandbox-agent/logs",
    dependencies=needs(Permission.ADMIN),
    response_model=SandboxLogs,
    response_model_exclude_unset=True,
    responses=_RESPONSES,
)
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


@router.get(
    "/internal/k8s/pools",
    dependencies=needs(Permission.ADMIN),
    response_model=SandboxPools,
    responses=_RESPONSES,
)
async def pools(services: ServicesDep) -> dict[str, Any]:
    """Pool runner Pods and the agents each runs."""
    try:
        return {"pools": await services.sandbox.pools()}
    except SandboxError as exc:
        raise _http_error(exc) from exc


@router.get(
    "/internal/k8s/workloads",
    dependencies=needs(Permission.ADMIN),
    response_model=SandboxWorkloads,
    response_model_exclude_unset=True,
    responses=_RESPONSES,
)
async def workloads(services: ServicesDep) -> dict[str, Any]:
    """Dedicated agent Pods and pool Pods."""
    try:
        return await services.sandbox.workloads()
    except SandboxError as exc:
        raise _http_error(exc) from exc
