"""``GET /health`` (liveness) and ``GET /ready`` (readiness); neither needs the API key.

``/health`` answers 200 while the process serves HTTP, whatever its dependencies do: a
liveness probe that restarts the master when Redis is down would not bring Redis back.
``/ready`` answers 503 naming the failing dependency while Redis does not answer (within
:data:`READY_TIMEOUT` seconds), so that a load balancer or Kubernetes stops sending traffic,
and 503 ``draining`` from the moment the master is told to stop (SIGTERM, :mod:`master.gateway.drain`).
Neither needs a key, so neither says more than a load balancer needs: why Redis failed (its
address, the error) goes to the log, not to the answer. An administrator's key sent with
``/ready`` adds ``isolation``: which layers stand between agent code and the master's secrets
on this master (docs: "What agent code can reach"); anyone else sees no such detail.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Literal
from urllib.parse import urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from master.deps import Services, ServicesDep
from master.errors import SessionStoreUnavailable

router = APIRouter(tags=["health"])
logger = logging.getLogger("master.health")

READY_TIMEOUT = 2.0


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Layer(BaseModel):
    """One layer between agent code and the master's secrets."""

    active: bool
    detail: str


class Readiness(BaseModel):
    """``ready``; ``unavailable`` with the failing dependency and why; or ``draining`` (stopping)."""

    status: Literal["ready", "unavailable", "draining"]
    failing: list[Literal["redis"]] = []
    detail: str | None = None
    isolation: dict[str, Layer] | None = None
    """For an administrator's key only: the isolation layers of agent code on this master."""


def isolation_layers(services: Services) -> dict[str, Layer]:
    """The layers this master applies to the agent code it starts (YAML workspaces, the
    builder's agents; sandbox Pods get their key the same way)."""
    settings = services.settings
    users = services.builder.workspaces.runner.users
    isolation = users.isolation
    if users.isolated:
        user = Layer(
            active=True,
            detail=f"one uid per agent from {isolation.uid_base} ({isolation.uid_count} uids), "
            f"group of {isolation.user!r}",
        )
    elif users.refusal is not None:
        user = Layer(active=False, detail=f"agent code is refused: {users.refusal}")
    else:
        user = Layer(
            active=False,
            detail="unisolated: agents run as the master's own user and could read its secrets "
            "(OPENAGENT_ALLOW_UNISOLATED_AGENTS=1)",
        )
    limits = isolation.limits
    linux = sys.platform.startswith("linux")
    return {
        "own_key": Layer(
            active=True,
            detail="each agent gets a key of role agent for its own id and tenant, revoked at stop; "
            "never the master's",
        ),
        "own_user": user,
        "mount_namespace": Layer(
            active=users.isolated and linux,
            detail="an agent's process takes a mount namespace of its own where Python lies below a "
            "folder other users cannot enter"
            if users.isolated and linux
            else "needs root on Linux",
        ),
        "non_dumpable": Layer(
            active=linux,
            detail="agent processes are non-dumpable: others of their user cannot read their /proc",
        ),
        "limits": Layer(
            active=any((limits.memory_mb, limits.cpu_seconds, limits.open_files, limits.processes)),
            detail=f"per agent: {limits.memory_mb} MiB address space, {limits.cpu_seconds} s CPU, "
            f"{limits.open_files} open files, {limits.processes} processes (0: none)",
        ),
        "redis_password": Layer(
            active=bool(urlsplit(settings.redis_url).password),
            detail="REDIS_URL carries a password"
            if urlsplit(settings.redis_url).password
            else "REDIS_URL has no password: agent code that reaches Redis can use it",
        ),
        "network_namespace": Layer(
            active=False,
            detail="not applied: agent code reaches the network as the master's host does",
        ),
    }


async def _is_admin(request: Request, services: Services) -> bool:
    """Whether the request carries an administrator's key (``/ready`` itself needs none)."""
    if services.access is None:
        return False
    try:
        async with asyncio.timeout(READY_TIMEOUT):
            principal = await services.access.resolve(request.scope)
    except (SessionStoreUnavailable, TimeoutError):
        return False
    return principal is not None and principal.is_admin


@router.get("/health")
async def health() -> Health:
    """The master is up (liveness)."""
    return Health()


@router.get(
    "/ready",
    response_model=Readiness,
    responses={
        503: {
            "model": Readiness,
            "description": "A dependency (Redis) does not answer, or the master is stopping (draining)",
        }
    },
)
async def ready(request: Request, services: ServicesDep) -> Response:
    """The master can serve queries: Redis answers, and it is not stopping (readiness); with an
    administrator's key, also the isolation layers of agent code."""
    if services.drain is not None and services.drain.draining:
        body = Readiness(
            status="draining", detail="the master is shutting down: it finishes its work in flight"
        )
        return JSONResponse(body.model_dump(), status_code=503)
    try:
        async with asyncio.timeout(READY_TIMEOUT):
            await services.sessions.check()
    except (SessionStoreUnavailable, TimeoutError) as exc:
        cause = str(exc) or f"Redis did not answer within {READY_TIMEOUT:g} s"
        logger.warning("not ready: %s", cause)
        body = Readiness(
            status="unavailable",
            failing=["redis"],
            detail="the session store (Redis) is unavailable; the master's log says why",
        )
        return JSONResponse(body.model_dump(), status_code=503)
    body = Readiness(status="ready")
    if await _is_admin(request, services):
        body.isolation = isolation_layers(services)
    answer = body.model_dump()
    if answer["isolation"] is None:
        del answer["isolation"]  # not even its name for anyone else
    return JSONResponse(answer)
