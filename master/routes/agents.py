"""``GET /agents``: the agents the master knows."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from master.auth import Scope
from master.deps import PrincipalDep, ServicesDep
from protocol import Role, ToolSchema

router = APIRouter(tags=["agents"])


class SandboxField(BaseModel):
    """The ``sandbox`` field of a ``GET /agents`` row: where the agent is deployed and how it runs."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    placement: Literal["new_pod", "pool"]
    namespace: str | None = None
    pod: str | None = None
    """The agent's own Pod, or the pool runner Pod it runs in."""
    code: str | None = None
    """``module:agents.weather_bot`` or ``source``."""
    phase: str | None = None
    """The Pod phase; ``Missing`` when the Pod is gone, ``Unknown`` when the cluster did not answer."""
    ready: bool | None = None
    restarts: int | None = None
    reason: str | None = None
    """The container's waiting or terminated reason (``CrashLoopBackOff``), or the pool runner's."""
    unhealthy: bool | None = None
    log_tail: list[str] | None = None
    """The last log lines of an unhealthy agent."""
    error: str | None = None
    """Why the cluster could not be asked."""
    pool_status: str | None = None


class Replica(BaseModel):
    """One connection serving a WebSocket agent (:class:`AgentRow.replicas`)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    instance: str | None = None
    """Its ``instance`` name (``null``: it registered without one)."""
    connected_at: float
    """When it registered (Unix time)."""
    in_flight: int
    """Calls sent to it and not answered yet."""


class AgentRow(BaseModel):
    """One agent of ``GET /agents``; which fields it has depends on ``connection_type``."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    agent_id: str
    role: Role
    connection_type: Literal["websocket", "invocation", "mcp", "a2a", "sandbox"]
    """``websocket`` (connected), ``invocation`` (HTTP, from Redis), ``mcp`` (an MCP server, from
    Redis), ``a2a`` (an A2A agent, from Redis) or ``sandbox`` (deployed, not connected)."""
    status: str
    """``online`` (WebSocket), ``UP``/``DOWN``/``UNKNOWN`` (invocation), ``starting``/``unhealthy`` (sandbox)."""
    tools: list[ToolSchema]
    metadata: dict[str, Any] = {}
    connected_at: float | None = None
    """WebSocket agents: when the connection registered (Unix time)."""
    master_id: str | None = None
    """Several masters: the master holding the connection."""
    replicas: list[Replica] | None = None
    """WebSocket agents on this master: every connection serving the agent id (its replicas;
    calls go to the one with the fewest in flight)."""
    last_check: float | None = None
    """Invocation agents: the last health check (Unix time)."""
    last_error: str | None = None
    """Invocation agents: why the last health check failed."""
    invocation_base_url: str | None = None
    replica_urls: list[str] | None = None
    """Invocation agents served by several copies: their further base URLs (calls balanced over all)."""
    mcp_url: str | None = None
    """MCP servers: the endpoint the master calls (the headers it sends are never shown)."""
    a2a_url: str | None = None
    """A2A agents: where their card is (the headers the master sends are never shown)."""
    registered_at: float | None = None
    tenant: str | None = None
    """The only tenant whose queries it serves (registered with that tenant's key); absent:
    shared with every tenant."""
    sandbox: SandboxField | None = None
    """With the sandbox on: the agent's Pod or pool placement and its health (``null`` when not deployed by it)."""


class AgentList(BaseModel):
    """``GET /agents``."""

    agents: list[AgentRow]


@router.get("/agents", response_model=AgentList, response_model_exclude_unset=True)
async def list_agents(services: ServicesDep, principal: PrincipalDep) -> dict[str, Any]:
    """Connected WebSocket agents, then invocation agents from Redis with their last health check.

    A tenant's key sees the agents shared with every tenant and its own tenant's.
    With the sandbox on, every row has a ``sandbox`` field (``null`` for agents not deployed by it),
    and sandboxed agents that are not connected follow as rows of their own.
    """
    rows = services.agents.rows(Scope.of(principal))
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
