"""Dependencies of the HTTP routes: the long-lived objects built in the lifespan."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request, params
from fastapi.security import HTTPBearer

from master.access import Authenticator, KeyStore, Permission, requires
from master.access.permissions import KEYLESS, permission_of
from master.agents.catalog import ToolCatalog
from master.agents.directory import AgentDirectory
from master.agents.dispatch import Dispatcher
from master.agents.invocation import InvocationAgents
from master.agents.registry import Registry
from master.attachments import AttachmentStore
from master.auth import Principal, Scope, principal_of
from master.builder.service import AgentBuilder
from master.cluster.directory import ClusterDirectory
from master.cluster.router import ClusterRouter
from master.collaboration import CollaborationManager
from master.conversation.store import SessionStore
from master.doors.a2a import A2ADoor
from master.doors.agui import AgUiDoor
from master.doors.mcp import McpDoor
from master.doors.openai import OpenAIDoor
from master.doors.openai.responses import ResponsesDoor
from master.gateway.drain import Drain
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
    agui: AgUiDoor | None = None
    """The AG-UI door for agent front ends (``/ag-ui``; built by the lifespan)."""
    responses: ResponsesDoor | None = None
    """The OpenAI Responses API (``/v1/responses``; built by the lifespan)."""
    approvals: ApprovalDesk | None = None
    """Decides approvals and sweeps the expired ones (built by the lifespan)."""
    access: Authenticator | None = None
    """Resolves each caller's principal (bootstrap key, stored keys, JWTs); built by the lifespan."""
    keys: KeyStore | None = None
    """The stored API keys (``/keys``)."""


async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


async def get_settings(request: Request) -> Settings:
    services: Services = request.app.state.services
    return services.settings


_BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="OPENAGENT_API_KEY",
    description=(
        "The master's OPENAGENT_API_KEY, a key made with POST /keys, or (with OIDC) a JWT, sent as "
        "'Authorization: Bearer <key>'."
    ),
)
"""Declares the bearer scheme in the OpenAPI document, so /docs offers "Authorize"; the check is ours."""


def needs(permission: Permission) -> list[params.Depends]:
    """The dependencies of a route or router that needs ``permission`` (with the bearer scheme
    in the OpenAPI document when it needs a key); the check is :class:`master.access.middleware.AccessMiddleware`'s."""
    own: list[params.Depends] = [Depends(requires(permission))]
    if permission not in KEYLESS:
        own.append(Depends(_BEARER))
    return own


def needs_api_key(route: object) -> bool:
    """Whether ``route`` needs a key (its permission is neither open nor a call's token)."""
    permission = permission_of(route)
    return permission is not None and permission not in KEYLESS


def get_principal(request: Request) -> Principal:
    """Who asks (:func:`master.auth.principal_of`: resolved by the access middleware)."""
    return principal_of(request.scope)


def get_scope(request: Request) -> Scope:
    """What the caller may read of the tenant-owned stores (:meth:`master.auth.Scope.of` its principal)."""
    return Scope.of(principal_of(request.scope))


ServicesDep = Annotated[Services, Depends(get_services)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
ScopeDep = Annotated[Scope, Depends(get_scope)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
