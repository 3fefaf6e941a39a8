"""``GET /metrics``: the master's Prometheus series (needs ``OPENAGENT_API_KEY`` when one is set).

Prometheus sends the key with ``authorization: {credentials: <key>}`` (type ``Bearer``) in
its scrape config. The series are listed in :mod:`master.observability.metrics`.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from master.deps import ServicesDep
from master.observability.metrics import CONTENT_TYPE

router = APIRouter(tags=["operations"])


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "description": "The Prometheus text exposition format",
            "content": {CONTENT_TYPE: {"schema": {"type": "string"}}},
        }
    },
)
async def metrics(services: ServicesDep) -> Response:
    """Prometheus text exposition of queries, tool calls, LLM calls, agents, Redis errors, collaborations."""
    return Response(services.metrics.render(), media_type=CONTENT_TYPE)
