"""``GET /agents``: the agents the master knows."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from master.deps import ServicesDep

router = APIRouter(tags=["agents"])


@router.get("/agents")
async def list_agents(services: ServicesDep) -> dict[str, Any]:
    """Connected WebSocket agents, then invocation agents from Redis with their last health check.

    With the sandbox on, every row has a ``sandbox`` field (``null`` for agents not deployed by it),
    and sandboxed agents that are not connected follow as rows of their own.
    """
    rows = services.agents.rows()
    if services.sandbox.enabled:
        # Sandbox metadata and live Pod status; deployed agents not (yet) connected get a row too.
        fields = await services.sandbox.agent_fields()
        for row in rows:
            row["sandbox"] = fields.pop(row["agent_id"], None)
        rows += [
            {
                "agent_id": agent_id,
                "role": "action",
                "connection_type": "sandbox",
                "status": "unhealthy" if field.get("unhealthy") else "starting",
                "tools": [],
                "sandbox": field,
            }
            for agent_id, field in sorted(fields.items())
        ]
    return {"agents": rows}
