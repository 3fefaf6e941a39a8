"""``GET /agents``: the agents the master knows."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from master.deps import ServicesDep

router = APIRouter(tags=["agents"])


@router.get("/agents")
async def list_agents(services: ServicesDep) -> dict[str, Any]:
    """Connected WebSocket agents, then invocation agents from Redis with their last health check."""
    rows = [agent.describe() for agent in services.registry.all()]
    live = {row["agent_id"] for row in rows}
    rows += [agent.describe() for agent in services.invocation.all() if agent.agent_id not in live]
    return {"agents": rows}
