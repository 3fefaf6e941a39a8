"""``GET /health`` (liveness) and ``GET /ready`` (readiness); neither needs the API key.

``/health`` answers 200 while the process serves HTTP, whatever its dependencies do: a
liveness probe that restarts the master when Redis is down would not bring Redis back.
``/ready`` answers 503 naming the failing dependency while Redis does not answer (within
:data:`READY_TIMEOUT` seconds), so that a load balancer or Kubernetes stops sending traffic,
and 503 ``draining`` from the moment the master is told to stop (SIGTERM, :mod:`master.drain`).
Neither needs a key, so neither says more than a load balancer needs: why Redis failed (its
address, the error) goes to the log, not to the answer.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from master.deps import ServicesDep
from master.errors import SessionStoreUnavailable

router = APIRouter(tags=["health"])
logger = logging.getLogger("master.health")

READY_TIMEOUT = 2.0


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    """``ready``; ``unavailable`` with the failing dependency and why; or ``draining`` (stopping)."""

    status: Literal["ready", "unavailable", "draining"]
    failing: list[Literal["redis"]] = []
    detail: str | None = None


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
async def ready(services: ServicesDep) -> Response:
    """The master can serve queries: Redis answers, and it is not stopping (readiness)."""
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
    return JSONResponse(Readiness(status="ready").model_dump())
