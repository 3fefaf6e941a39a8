"""YAML workspaces: ``POST /internal/yaml-agents/start`` and ``/stop``, ``POST /internal/workspace/restore``,
``GET /internal/workspace/export`` and ``GET /workspace/schema``.

``OPENAGENT_YAML_RUNNER=0`` (this master runs no agent code of its own) turns start and stop into 403s.
A YAML that cannot be used answers 400 (413 over the size cap) with each problem's line and field.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from master.access import AuditAction, Permission, audit
from master.auth import principal_of
from master.deps import ServicesDep, needs
from master.errors import SessionStoreUnavailable
from master.errors.responses import ApiError
from master.openapi import error
from openagent.errors import WorkspaceError
from openagent.workspace import Workspace, json_schema, load_workspace
from protocol import ErrorCode

router = APIRouter(tags=["workspaces"])


class YamlBody(BaseModel):
    """A workspace YAML."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    yaml: str
    """The workspace, as exported (``GET /internal/workspace/export``) or written by hand."""


class RestoreBody(YamlBody):
    register_http: bool = True
    """Register the workspace's HTTP invocation agents and MCP servers (like ``POST /register``)."""
    secrets: Annotated[
        dict[
            Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")],
            Annotated[str, Field(max_length=8192)],
        ],
        Field(max_length=64),
    ] = {}
    """Values of the ``${NAME}`` references in MCP agents' ``mcp_headers`` (``openagent workspace
    restore`` sends those set in its environment). Used for the registration only, never shown."""


class StopBody(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    agent_ids: Annotated[list[str], Field(max_length=1000)] | None = None
    """The agents to stop; every agent the YAML runner started when omitted."""


class AgentOutcome(BaseModel):
    """What happened to one agent of a start, stop or restore request."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    agent_id: str
    status: Literal[
        "started",
        "already_running",
        "failed",
        "skipped",
        "stopped",
        "not_running",
        "registered",
        "unreachable",
        "invalid",
    ]
    """Start: ``started``, ``already_running``, ``failed``, ``skipped``; stop: ``stopped``,
    ``not_running``; restore: ``registered``, ``unreachable``, ``invalid``, ``skipped``."""
    reason: str | None = None
    """Why it failed or was skipped."""
    handler: str | None = None
    """The handler module of a started agent."""


class AgentOutcomes(BaseModel):
    """Per-agent outcomes of a start, stop or restore request."""

    agents: list[AgentOutcome]


class RunningYamlAgent(BaseModel):
    agent_id: str
    handler: str


class RunningYamlAgents(BaseModel):
    """``GET /internal/yaml-agents``."""

    agents: list[RunningYamlAgent]


class WorkspaceSchema(BaseModel):
    """The workspace's JSON Schema (draft 2020-12), as a JSON Schema document."""

    model_config = ConfigDict(extra="allow")

    title: str | None = None
    type: str | None = None
    properties: dict[str, Any] | None = None


_YAML_ERRORS: dict[int | str, dict[str, Any]] = {
    400: error("The YAML cannot be used (invalid, yaml_syntax, yaml_bomb, too_deep): each problem's line"),
    403: error("The YAML agent runner is off (OPENAGENT_YAML_RUNNER=0, feature_disabled)"),
    413: error("The YAML is over its size cap (too_large)"),
}


def _require(enabled: bool, what: str, setting: str) -> None:
    if not enabled:
        raise ApiError(ErrorCode.FEATURE_DISABLED, f"{what} is disabled ({setting}=0)")


async def _load(text: str) -> Workspace:
    try:
        return await asyncio.to_thread(load_workspace, text)
    except WorkspaceError as exc:
        raise ApiError(
            ErrorCode.of(exc.code),
            {
                "code": exc.code,
                "message": str(exc),
                "problems": [
                    {"line": problem.line, "field": problem.field, "message": problem.message}
                    for problem in exc.problems
                ],
            },
        ) from None


@router.post(
    "/internal/yaml-agents/start",
    dependencies=needs(Permission.ADMIN),
    response_model=AgentOutcomes,
    response_model_exclude_unset=True,
    responses=_YAML_ERRORS,
)
async def start_yaml_agents(body: YamlBody, request: Request, services: ServicesDep) -> dict[str, Any]:
    """Run the YAML's WebSocket agents, each in a supervised child process with a key of its own
    (role ``agent``, its id, the caller's tenant); idempotent, per-agent outcomes."""
    _require(services.settings.openagent_yaml_runner, "the YAML agent runner", "OPENAGENT_YAML_RUNNER")
    workspace = await _load(body.yaml)
    server = request.scope.get("server")
    port = int(server[1]) if server and server[1] else None
    principal = principal_of(request.scope)
    outcomes = await services.builder.workspaces.start(workspace, port, principal.tenant)
    audit(
        services.metrics,
        principal,
        AuditAction.YAML_AGENTS_STARTED,
        agents=[outcome.agent_id for outcome in outcomes],
    )
    return {"agents": [outcome.as_dict() for outcome in outcomes]}


@router.post(
    "/internal/yaml-agents/stop",
    dependencies=needs(Permission.ADMIN),
    response_model=AgentOutcomes,
    response_model_exclude_unset=True,
    responses={403: _YAML_ERRORS[403]},
)
async def stop_yaml_agents(body: StopBody, request: Request, services: ServicesDep) -> dict[str, Any]:
    """Stop agents the YAML runner started."""
    _require(services.settings.openagent_yaml_runner, "the YAML agent runner", "OPENAGENT_YAML_RUNNER")
    outcomes = await services.builder.workspaces.stop(body.agent_ids)
    audit(
        services.metrics,
        principal_of(request.scope),
        AuditAction.YAML_AGENTS_STOPPED,
        agents=[outcome.agent_id for outcome in outcomes],
    )
    return {"agents": [outcome.as_dict() for outcome in outcomes]}


@router.get("/internal/yaml-agents", dependencies=needs(Permission.READ), response_model=RunningYamlAgents)
async def yaml_agents(services: ServicesDep) -> dict[str, Any]:
    """The agents the YAML runner runs, with their handler modules."""
    running = services.builder.workspaces.runner.running()
    return {"agents": [{"agent_id": agent_id, "handler": handler} for agent_id, handler in running.items()]}


@router.post(
    "/internal/workspace/restore",
    dependencies=needs(Permission.ADMIN),
    response_model=AgentOutcomes,
    response_model_exclude_unset=True,
    responses={
        400: _YAML_ERRORS[400],
        413: _YAML_ERRORS[413],
        503: error("Redis unavailable (session_store_unavailable)"),
    },
)
async def restore_workspace(body: RestoreBody, request: Request, services: ServicesDep) -> dict[str, Any]:
    """Re-register the YAML's HTTP invocation agents; per agent registered, unreachable, invalid or skipped."""
    workspace = await _load(body.yaml)
    try:
        outcomes = await services.builder.workspaces.restore(
            workspace,
            principal=principal_of(request.scope),
            register_http=body.register_http,
            secrets=body.secrets,
        )
    except SessionStoreUnavailable as exc:
        raise ApiError(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
    audit(
        services.metrics,
        principal_of(request.scope),
        AuditAction.WORKSPACE_RESTORED,
        agents=[outcome.agent_id for outcome in outcomes],
    )
    return {"agents": [outcome.as_dict() for outcome in outcomes]}


@router.get(
    "/internal/workspace/export",
    dependencies=needs(Permission.ADMIN),
    response_class=Response,
    responses={
        200: {
            "description": "The workspace YAML, as a file download",
            "content": {"application/yaml": {"schema": {"type": "string"}}},
        }
    },
)
async def export_workspace(services: ServicesDep) -> Response:
    """The master's workspace as YAML: stable, secret-free, without the built-in query client."""
    text = services.builder.workspaces.export()
    return Response(
        text,
        media_type="application/yaml",
        headers={"Content-Disposition": 'attachment; filename="workspace.yaml"'},
    )


@router.get(
    "/workspace/schema",
    dependencies=needs(Permission.READ),
    response_model=WorkspaceSchema,
    response_model_exclude_unset=True,
)
async def workspace_schema() -> dict[str, Any]:
    """The workspace's JSON Schema (also ``docs/workspace.schema.json``)."""
    return json_schema()
