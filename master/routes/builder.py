"""The agent builder: ``POST /generate-agent``, ``GET /generate-agent/models``, ``POST /save-agent``,
``GET /agent-source`` and ``GET /agents/discover``.

``OPENAGENT_AGENT_GENERATOR=0`` turns the two generator endpoints into 403s.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, status
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from master.builder.generator import GenerationRequest
from master.deps import ServicesDep
from master.errors import AgentFileNotFound, AgentFileRefused, GenerationFailed, LLMError
from master.openapi import ErrorBody

router = APIRouter(tags=["agent builder"])


class GenerateAgentBody(BaseModel):
    """The body of ``POST /generate-agent``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: Annotated[str, Field(min_length=1, max_length=100)]
    """The agent's name, e.g. ``Unit converter``; the module name and agent id derive from it."""
    description: Annotated[str, Field(min_length=1, max_length=8000)]
    """What the agent should do."""
    agent_type: Literal["action", "query"] = "action"
    """Only ``action`` agents (tools) are generated; ``query`` gets 422."""
    transport: Literal["websocket", "invocation"] = "websocket"
    model: str | None = None
    """One of ``GET /generate-agent/models``; ``AGENT_GENERATOR_MODEL`` when omitted."""
    tools: Annotated[list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]], Field(max_length=20)] = []
    """Tool names the agent must offer (hints for the model, checked afterwards)."""
    requires_collaboration: bool = False
    """Use the collaboration-aware template with a real ``handle_collaboration``."""


class SaveAgentBody(BaseModel):
    """The body of ``POST /save-agent``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    module: Annotated[str, Field(max_length=300)]
    """Module name: a Python identifier; the file is ``agents/<module>.py``."""
    source: str
    """The module's Python source."""
    overwrite: bool = False
    """Replace an existing ``agents/<module>.py``."""


def _generator_enabled(services: ServicesDep) -> None:
    if not services.settings.openagent_agent_generator:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, detail="the agent generator is disabled (OPENAGENT_AGENT_GENERATOR=0)"
        )


def _refused(exc: AgentFileRefused | AgentFileNotFound) -> HTTPException:
    code = status.HTTP_404_NOT_FOUND if isinstance(exc, AgentFileNotFound) else status.HTTP_400_BAD_REQUEST
    return HTTPException(code, detail={"code": exc.code, "message": exc.message})


@router.get("/generate-agent/models")
async def generator_models(services: ServicesDep) -> dict[str, Any]:
    """The models the generator may use, and its default (``AGENT_GENERATOR_MODEL``)."""
    _generator_enabled(services)
    return {
        "default_model": services.catalog.generator_model,
        "allowed_models": list(services.catalog.allowed_models),
        "available": services.builder.generator is not None,
    }


@router.post(
    "/generate-agent",
    responses={
        400: {"description": "Model not in the global list, or collaboration asked of an invocation agent"},
        403: {"description": "OPENAGENT_AGENT_GENERATOR=0"},
        422: {"description": "The code failed its checks after one retry, or the model answered with prose"},
        502: {"description": "The LLM timed out or failed"},
        503: {"description": "No LLM configured"},
    },
)
async def generate_agent(body: GenerateAgentBody, services: ServicesDep) -> Any:
    """Write an agent module with the master's LLM, check it, and return it with its checks."""
    _generator_enabled(services)
    model = body.model or services.catalog.generator_model
    if model not in services.catalog.allowed_models:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST,
            detail=f"model {model!r} is not allowed; allowed models: {', '.join(services.catalog.allowed_models)}",
        )
    if body.agent_type == "query":
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_ENTITY,
            detail={
                "code": "unsupported_agent_type",
                "message": "only action agents are generated; a query agent is a few lines of QueryClient",
            },
        )
    if body.requires_collaboration and body.transport != "websocket":
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST,
            detail="collaboration needs transport 'websocket' (peer messages go over WS)",
        )
    generator = services.builder.generator
    if generator is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail=services.builder.unavailable_reason)
    request = GenerationRequest(
        name=body.name,
        description=body.description,
        agent_type=body.agent_type,
        transport=body.transport,
        model=model,
        tools=tuple(body.tools),
        requires_collaboration=body.requires_collaboration,
    )
    try:
        generated = await generator.generate(request)
    except LLMError as exc:
        raise HTTPException(
            status.HTTP_502_BAD_GATEWAY, detail={"code": exc.code, "message": str(exc)}
        ) from None
    except GenerationFailed as exc:
        return JSONResponse(
            status_code=status.HTTP_422_UNPROCESSABLE_ENTITY,
            content={
                "detail": {
                    "code": exc.code,
                    "message": exc.message,
                    "module": exc.module,
                    "source": exc.source,
                    "checks": exc.checks,
                }
            },
        )
    return generated.as_dict()


@router.post("/save-agent")
async def save_agent(body: SaveAgentBody, services: ServicesDep) -> dict[str, Any]:
    """Write ``agents/<module>.py``. Never restarts the master."""
    try:
        path = await asyncio.to_thread(
            services.builder.files.save, body.module, body.source, overwrite=body.overwrite
        )
    except AgentFileRefused as exc:
        raise _refused(exc) from None
    return {
        "saved": True,
        "module": body.module,
        "file": f"agents/{path.name}",
        "handler": f"agents.{body.module}",
    }


@router.get(
    "/agent-source",
    responses={
        400: {"model": ErrorBody, "description": "The handler names a path outside the agent folders"},
        404: {"model": ErrorBody, "description": "No such module"},
    },
)
async def agent_source(
    services: ServicesDep,
    handler: Annotated[str, Query(max_length=300, description="agents.x, agents.x:function or agents/x.py")],
) -> dict[str, Any]:
    """The source of a handler module under ``agents/``, ``system_agents/`` or ``sample_agents/``."""
    try:
        ref, source = await asyncio.to_thread(services.builder.files.read, handler)
    except (AgentFileRefused, AgentFileNotFound) as exc:
        raise _refused(exc) from None
    return {
        "handler": ref.handler,
        "module": ref.module,
        "file": "/".join((ref.folder, *ref.parts)) + ".py",
        "source": source,
    }


@router.get("/agents/discover")
async def discover_agents(services: ServicesDep) -> dict[str, Any]:
    """``system_agents/*.py`` then ``agents/*.py``, read without importing; per-file errors listed."""
    found = await asyncio.to_thread(services.builder.discovery.discover)
    return found.as_dict()
