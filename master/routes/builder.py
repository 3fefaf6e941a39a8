"""The agent builder: ``POST /generate-agent``, ``GET /generate-agent/models``, ``POST /save-agent``,
``GET /agent-source`` and ``GET /agents/discover`` (administrators only: roles decide who may).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from master.access import AuditAction, Permission, audit
from master.auth import principal_of
from master.builder.generator import GenerationRequest
from master.deps import ServicesDep, needs
from master.errors import AgentFileNotFound, AgentFileRefused, GenerationFailed, LLMError
from master.errors.responses import ApiError
from master.openapi import error
from protocol import ErrorCode, ToolSchema

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


class GeneratorModels(BaseModel):
    """``GET /generate-agent/models``."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    default_model: str
    """``AGENT_GENERATOR_MODEL``: the model used when a request names none."""
    allowed_models: list[str]
    """The models a request may name."""
    available: bool
    """Whether an LLM is configured to generate with."""


class Check(BaseModel):
    """One check of generated code."""

    name: str
    passed: bool
    detail: str = ""


class GeneratedAgent(BaseModel):
    """``POST /generate-agent``: code that passed every check."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    module: str
    """The module name to save it under (``POST /save-agent``)."""
    agent_id: str
    source: str
    """The module's Python source."""
    transport: str
    tools: list[ToolSchema]
    """The tools the code defines."""
    checks: list[Check]
    model: str
    """The model that wrote it."""
    attempts: int
    """1, or 2 when the first code failed its checks and the model fixed it."""


class SavedAgent(BaseModel):
    """``POST /save-agent``."""

    saved: bool
    module: str
    file: str
    """The file written, e.g. ``agents/unit_converter.py``."""
    handler: str
    """The handler to run it with, e.g. ``agents.unit_converter``."""


class AgentSource(BaseModel):
    """``GET /agent-source``."""

    handler: str
    module: str
    file: str
    source: str


class DiscoveredAgent(BaseModel):
    """An agent found in a module (read, not imported)."""

    agent_id: str
    transport: str
    tools: list[ToolSchema]
    module: str
    handler: str
    file: str
    supports_collaboration: bool = False


class DiscoveryProblem(BaseModel):
    """A file that could not be analysed, or a duplicate agent id."""

    file: str
    error: str
    module: str | None = None
    agent_id: str | None = None


class Discovery(BaseModel):
    """``GET /agents/discover``."""

    agents: list[DiscoveredAgent]
    errors: list[DiscoveryProblem]


def _refused(exc: AgentFileRefused | AgentFileNotFound) -> ApiError:
    return ApiError(exc.code, {"code": exc.code.value, "message": exc.message})


@router.get(
    "/generate-agent/models",
    dependencies=needs(Permission.ADMIN),
    response_model=GeneratorModels,
)
async def generator_models(services: ServicesDep) -> dict[str, Any]:
    """The models the generator may use, and its default (``AGENT_GENERATOR_MODEL``)."""
    return {
        "default_model": services.catalog.generator_model,
        "allowed_models": list(services.catalog.allowed_models),
        "available": services.builder.generator is not None,
    }


@router.post(
    "/generate-agent",
    dependencies=needs(Permission.ADMIN),
    response_model=GeneratedAgent,
    response_model_exclude_unset=True,
    responses={
        400: error(
            "Model not in the global list (invalid_model), or collaboration asked of an invocation agent"
        ),
        422: error(
            "The code failed its checks after one retry (checks_failed), the model answered with prose "
            "(no_code), or a query agent was asked for (unsupported_agent_type)"
        ),
        502: error("The LLM timed out or failed (llm_*)"),
        503: error("No LLM configured (llm_not_configured)"),
    },
)
async def generate_agent(body: GenerateAgentBody, services: ServicesDep) -> dict[str, Any]:
    """Write an agent module with the master's LLM, check it, and return it with its checks."""
    model = body.model or services.catalog.generator_model
    if model not in services.catalog.allowed_models:
        raise ApiError(
            ErrorCode.INVALID_MODEL,
            f"model {model!r} is not allowed; allowed models: {', '.join(services.catalog.allowed_models)}",
        )
    if body.agent_type == "query":
        raise ApiError(
            ErrorCode.UNSUPPORTED_AGENT_TYPE,
            {
                "code": ErrorCode.UNSUPPORTED_AGENT_TYPE.value,
                "message": "only action agents are generated; a query agent is a few lines of QueryClient",
            },
        )
    if body.requires_collaboration and body.transport != "websocket":
        raise ApiError(
            ErrorCode.INVALID_REQUEST, "collaboration needs transport 'websocket' (peer messages go over WS)"
        )
    generator = services.builder.generator
    if generator is None:
        raise ApiError(ErrorCode.LLM_NOT_CONFIGURED, services.builder.unavailable_reason)
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
        # 502 for every provider failure (llm_not_configured does not reach here: generator is None).
        raise ApiError(exc.code, {"code": exc.code.value, "message": str(exc)}) from None
    except GenerationFailed as exc:
        detail = {
            "code": exc.code.value,
            "message": exc.message,
            "module": exc.module,
            "source": exc.source,
            "checks": exc.checks,
        }
        raise ApiError(exc.code, detail) from None
    return generated.as_dict()


@router.post(
    "/save-agent",
    dependencies=needs(Permission.ADMIN),
    response_model=SavedAgent,
    responses={
        400: error("invalid_module, path_refused or file_exists"),
        413: error("The source is over its size cap (too_large)"),
    },
)
async def save_agent(body: SaveAgentBody, request: Request, services: ServicesDep) -> dict[str, Any]:
    """Write ``agents/<module>.py``. Never restarts the master."""
    try:
        path = await asyncio.to_thread(
            services.builder.files.save, body.module, body.source, overwrite=body.overwrite
        )
    except AgentFileRefused as exc:
        raise _refused(exc) from None
    audit(services.metrics, principal_of(request.scope), AuditAction.MODULE_SAVED, module=body.module)
    return {
        "saved": True,
        "module": body.module,
        "file": f"agents/{path.name}",
        "handler": f"agents.{body.module}",
    }


@router.get(
    "/agent-source",
    dependencies=needs(Permission.ADMIN),
    response_model=AgentSource,
    responses={
        400: error("The handler names a path outside the agent folders (path_refused)"),
        404: error("No such module (not_found)"),
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


@router.get(
    "/agents/discover",
    dependencies=needs(Permission.READ),
    response_model=Discovery,
    response_model_exclude_unset=True,
)
async def discover_agents(services: ServicesDep) -> dict[str, Any]:
    """``system_agents/*.py`` then ``agents/*.py``, read without importing; per-file errors listed."""
    found = await asyncio.to_thread(services.builder.discovery.discover)
    return found.as_dict()
