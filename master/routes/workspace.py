"""YAML workspaces: ``POST /internal/yaml-agents/start`` and ``/stop``, ``POST /internal/workspace/restore``,
``GET /internal/workspace/export`` and ``GET /workspace/schema``.

``OPENAGENT_YAML_RUNNER=0`` turns start and stop into 403s, ``OPENAGENT_WORKSPACE_RESTORE=0`` restore.
A YAML that cannot be used answers 400 (413 over the size cap) with each problem's line and field.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Request, status
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from master.deps import ServicesDep
from master.errors import SessionStoreUnavailable
from openagent.errors import WorkspaceError
from openagent.workspace import Workspace, json_schema, load_workspace

router = APIRouter(tags=["workspaces"])


class YamlBody(BaseModel):
    """A workspace YAML."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    yaml: str
    """The workspace, as exported (``GET /internal/workspace/export``) or written by hand."""


class RestoreBody(YamlBody):
    register_http: bool = True
    """Register the workspace's HTTP invocation agents (health-checked like ``POST /register``)."""


class StopBody(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    agent_ids: Annotated[list[str], Field(max_length=1000)] | None = None
    """The agents to stop; every agent the YAML runner started when omitted."""


def _require(enabled: bool, what: str, setting: str) -> None:
    if not enabled:
        raise HTTPException(status.HTTP_403_FORBIDDEN, detail=f"{what} is disabled ({setting}=0)")


async def _load(text: str) -> Workspace:
    try:
        return await asyncio.to_thread(load_workspace, text)
    except WorkspaceError as exc:
        code = status.HTTP_413_CONTENT_TOO_LARGE if exc.code == "too_large" else status.HTTP_400_BAD_REQUEST
        raise HTTPException(
            code,
            detail={
                "code": exc.code,
                "message": str(exc),
                "problems": [
                    {"line": problem.line, "field": problem.field, "message": problem.message}
                    for problem in exc.problems
                ],
            },
        ) from None


@router.post("/internal/yaml-agents/start")
async def start_yaml_agents(body: YamlBody, request: Request, services: ServicesDep) -> dict[str, Any]:
    """Run the YAML's WebSocket agents, each in a supervised child process (idempotent; per-agent outcomes)."""
    _require(services.settings.openagent_yaml_runner, "the YAML agent runner", "OPENAGENT_YAML_RUNNER")
    workspace = await _load(body.yaml)
    server = request.scope.get("server")
    port = int(server[1]) if server and server[1] else None
    outcomes = await services.builder.workspaces.start(workspace, port)
    return {"agents": [outcome.as_dict() for outcome in outcomes]}


@router.post("/internal/yaml-agents/stop")
async def stop_yaml_agents(body: StopBody, services: ServicesDep) -> dict[str, Any]:
    """Stop agents the YAML runner started."""
    _require(services.settings.openagent_yaml_runner, "the YAML agent runner", "OPENAGENT_YAML_RUNNER")
    outcomes = await services.builder.workspaces.stop(body.agent_ids)
    return {"agents": [outcome.as_dict() for outcome in outcomes]}


@router.get("/internal/yaml-agents")
async def yaml_agents(services: ServicesDep) -> dict[str, Any]:
    """The agents the YAML runner runs, with their handler modules."""
    running = services.builder.workspaces.runner.running()
    return {"agents": [{"agent_id": agent_id, "handler": handler} for agent_id, handler in running.items()]}


@router.post("/internal/workspace/restore")
async def restore_workspace(body: RestoreBody, services: ServicesDep) -> dict[str, Any]:
    """Re-register the YAML's HTTP invocation agents; per agent registered, unreachable, invalid or skipped."""
    _require(
        services.settings.openagent_workspace_restore, "workspace restore", "OPENAGENT_WORKSPACE_RESTORE"
    )
    workspace = await _load(body.yaml)
    try:
        outcomes = await services.builder.workspaces.restore(workspace, register_http=body.register_http)
    except SessionStoreUnavailable as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail=str(exc)) from None
    return {"agents": [outcome.as_dict() for outcome in outcomes]}


@router.get("/internal/workspace/export", response_class=Response)
async def export_workspace(services: ServicesDep) -> Response:
    """The master's workspace as YAML: stable, secret-free, without the built-in query client."""
    text = services.builder.workspaces.export()
    return Response(
        text,
        media_type="application/yaml",
        headers={"Content-Disposition": 'attachment; filename="workspace.yaml"'},
    )


@router.get("/workspace/schema")
async def workspace_schema() -> dict[str, Any]:
    """The workspace's JSON Schema (also ``docs/workspace.schema.json``)."""
    return json_schema()
