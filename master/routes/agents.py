"""``GET /agents``: the agents the master knows."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from master.deps import ServicesDep

router = APIRouter(tags=["agents"])


@router.get("/agents")
async def list_agents(services: ServicesDep) -> dict[str, Any]:
    """Connected WebSocket agents, with role, status, metadata and tools."""
    return {"agents": [agent.describe() for agent in services.registry.all()]}
