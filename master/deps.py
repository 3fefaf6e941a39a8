"""Dependencies of the HTTP routes: the long-lived objects built in the lifespan."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.routing import RouteContext
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from master.agents.catalog import ToolCatalog
from master.agents.directory import AgentDirectory
from master.agents.dispatch import Dispatcher
from master.agents.invocation import InvocationAgents
from master.agents.registry import Registry
from master.attachments import AttachmentStore
from master.auth import UNAUTHORIZED_DETAIL, Principal, authorized, principal_of
from master.builder.service import AgentBuilder
from master.cluster.directory import ClusterDirectory
from master.cluster.router import ClusterRouter
from master.collaboration import CollaborationManager
from master.conversation.store import SessionStore
from master.doors.a2a import A2ADoor
from master.doors.mcp import McpDoor
from master.doors.openai import OpenAIDoor
from master.drain import Drain
from master.gateway.hub import Hub
from master.observability.metrics import Metrics
from master.orchestration.model_catalog import ModelCatalog
from master.query.approvals import ApprovalDesk
from master.query.entry import QueryEntry
from master.query.service import QueryService
from master.sandbox import Sandbox
from master.settings import Settings


@dataclass
class Services:
    """Everything the routes need, built once per app in its lifespan."""

    settings: Settings
    catalog: ModelCatalog
    registry: Registry
    invocation: InvocationAgents
    dispatcher: Dispatcher
    sessions: SessionStore
    queries: QueryService
    hub: Hub
    collaboration: CollaborationManager
    entry: QueryEntry
    """The one way into a query, for every door."""
    builder: AgentBuilder
    tool_catalog: ToolCatalog
    sandbox: Sandbox
    agents: AgentDirectory
    """Every agent the master can reach (registry, invocation agents, other masters')."""
    mcp: McpDoor
    """The MCP server at ``/mcp``."""
    a2a: A2ADoor
    """The hub and its agents as A2A agents (``/a2a``)."""
    attachments: AttachmentStore | None = None
    metrics: Metrics = field(default_factory=Metrics)
    cluster: ClusterDirectory | None = None
    cluster_router: ClusterRouter | None = None
    drain: Drain | None = None
    openai: OpenAIDoor | None = None
    """The OpenAI-compatible API (built by the lifespan)."""
    approvals: ApprovalDesk | None = None
    """Decides approvals and sweeps the expired ones (built by the lifespan)."""


async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


async def get_settings(request: Request) -> Settings:
    services: Services = request.app.state.services
    return services.settings


_BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="OPENAGENT_API_KEY",
    description="The master's OPENAGENT_API_KEY, sent as 'Authorization: Bearer <key>' (when one is set).",
)
"""Declares the bearer scheme in the OpenAPI document, so /docs offers "Authorize"; the check is ours."""


async def require_api_key(
    request: Request, _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)]
) -> None:
    """401 unless the request carries the master's API key (when one is set).

    Dependencies are ``async def`` so FastAPI runs them in the event loop, not the threadpool.
    """
    services: Services = request.app.state.services
    if not authorized(request.scope, services.settings.api_key):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            detail=UNAUTHORIZED_DETAIL,
            headers={"WWW-Authenticate": "Bearer"},
        )


def needs_api_key(route: RouteContext) -> bool:
    """Whether ``route`` (from :func:`fastapi.routing.iter_route_contexts`) depends on :func:`require_api_key`,
    or is a plain Starlette route marked ``needs_api_key`` (the A2A door's, :mod:`master.routes.a2a`)."""
    if getattr(route, "needs_api_key", False) is True:
        return True
    return any(getattr(d, "dependency", None) is require_api_key for d in getattr(route, "dependencies", ()))


def get_principal(request: Request) -> Principal:
    """Who asks (:func:`master.auth.principal_of`: the bootstrap admin until keys resolve one)."""
    return principal_of(request.scope)


ServicesDep = Annotated[Services, Depends(get_services)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
