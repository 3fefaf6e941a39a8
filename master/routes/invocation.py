"""Invocation agents: ``POST /register``, ``POST /unregister``, ``GET /refresh``, and the
callback routes ``POST /tool_callback``, ``POST /tool_progress``, ``GET /tool_progress/{call_id}``.

The callback routes do not take the master's API key: each call's ``callback_url``
carries a per-call token, and only that token is accepted.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Discriminator, Field, RootModel, Tag

from master.access import Permission
from master.agents.call_records import DeliveryStatus
from master.agents.connectors import transport_of
from master.agents.identity import Claim
from master.agents.invocation import InvocationAgent
from master.agents.registrations import A2ARegistration, Health, InvocationRegistration, McpRegistration
from master.auth import Principal, principal_of
from master.deps import ServicesDep, needs
from master.errors import InvalidToolSchema, RegistrationRefused, SessionStoreUnavailable
from master.errors.responses import ApiError
from master.openapi import error
from protocol import AGENT_ID_PATTERN, ErrorCode, ToolProgress, ToolResult

router = APIRouter(tags=["invocation agents"])
callbacks = APIRouter(tags=["invocation callbacks"], dependencies=needs(Permission.CALL_TOKEN))


class Unregistration(BaseModel):
    agent_id: str = Field(min_length=1)


class CallbackBody(BaseModel):
    """Body of ``POST /tool_callback``."""

    call_id: str
    success: bool
    result: Any = None
    error: str | None = None


class ProgressBody(BaseModel):
    """Body of ``POST /tool_progress``."""

    call_id: str
    message: str = ""
    progress: Annotated[float, Field(ge=0.0, le=1.0)] | None = None


def _call_token(
    token: Annotated[
        str | None,
        Query(description="The per-call token from callback_url (required: 401 without it)"),
    ] = None,
) -> str:
    """The call token; 401 when it is missing or empty, before the body is validated (as the API key)."""
    if not token:
        raise ApiError(ErrorCode.UNAUTHORIZED, "missing call token: post to the callback_url the call gave")
    return token


Token = Annotated[str, Depends(_call_token)]
_NO_TOKEN = error("The token parameter is missing or empty (unauthorized)")


class Registered(BaseModel):
    """``POST /register``."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    registered: bool
    agent_id: str
    status: Health
    """The first health check's outcome: ``UP``, ``DOWN`` or ``UNKNOWN``."""


class Unregistered(BaseModel):
    """``POST /unregister``."""

    unregistered: bool
    agent_id: str


class AgentHealth(BaseModel):
    """An invocation agent's health after ``GET /refresh``."""

    agent_id: str
    status: Health
    last_check: float | None
    last_error: str | None


class Refreshed(BaseModel):
    """``GET /refresh``."""

    agents: list[AgentHealth]


class CallProgress(BaseModel):
    """``GET /tool_progress/{call_id}``."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    call_id: str
    running: bool
    message: str | None
    """The latest progress message (``null`` before any)."""
    progress: float | None
    """The latest fraction done, 0..1, when known."""


class CallbackAnswer(BaseModel):
    """``POST /tool_callback`` and ``POST /tool_progress``."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    call_id: str
    status: Literal["accepted", "duplicate", "forwarded", "recorded"]
    session_id: str | None = None
    """``recorded``: the session the result was appended to."""


def _invalid_tools(code: ErrorCode, message: str, field: str = "tools") -> ApiError:
    """422 with FastAPI's validation-error shape (the one the document declares for 422)."""
    return ApiError(code, [{"loc": ["body", field], "msg": message, "type": "value_error"}])


def _registration_kind(body: Any) -> str:
    if isinstance(body, dict):
        return transport_of(body)
    return (
        "mcp"
        if isinstance(body, McpRegistration)
        else "a2a"
        if isinstance(body, A2ARegistration)
        else "invocation"
    )


class Registration(
    RootModel[
        Annotated[
            Annotated[InvocationRegistration, Tag("invocation")]
            | Annotated[McpRegistration, Tag("mcp")]
            | Annotated[A2ARegistration, Tag("a2a")],
            Discriminator(_registration_kind),
        ]
    ]
):
    """Body of ``POST /register``: an HTTP invocation agent (``invocation_base_url`` and
    ``tools``), an MCP server (``mcp_url``) or an A2A agent (``a2a_url``); the key present says which."""


@router.post(
    "/register",
    dependencies=needs(Permission.AGENT),
    response_model=Registered,
    responses={
        400: error(
            "An MCP server or A2A agent could not be listed (the message says why; never a header value)"
        ),
        409: error("The agent id is a live WebSocket agent's, or a function name is another agent's"),
        503: error("Redis unavailable"),
    },
)
async def register(
    registration: Registration,
    request: Request,
    services: ServicesDep,
    tenant: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=128,
            description="Offer the agent to this tenant's queries only (an administrator's "
            "registration; without it, the agent is shared with every tenant)",
        ),
    ] = None,
) -> dict[str, Any]:
    """Store an agent the master calls (an HTTP invocation agent, an MCP server, an A2A agent) in
    Redis and health-check it once. An MCP server or A2A agent is asked for its tools first.

    A URL the agent URL policy refuses (a link-local or cloud-metadata address, a name resolving to
    one, an entry of ``OPENAGENT_AGENT_URL_DENY``) is a 422 naming the field and the rule.
    An ``agent`` key may register only the agent ids its ``agent_ids`` patterns match (403).
    An agent registered with a tenant's key serves that tenant's queries only; one registered with
    an administrator's key is shared with every tenant, unless ``?tenant=`` names one."""
    body = registration.root
    principal = principal_of(request.scope)
    owner = _owner_tenant(principal, tenant)
    claimed: list[Claim] = []
    try:
        if isinstance(body, InvocationRegistration):
            services.tool_catalog.check(body.agent_id, body.tools, invocation=True, metadata=body.metadata)
            claimed.append(await services.agents.ids.claim(principal, body.agent_id, "action", tenant=owner))
            agent = await services.invocation.register(body, registrant=principal, tenant=owner)
        else:
            agent = await _register_remote(body, services, principal, owner, claimed)
    except (RegistrationRefused, InvalidToolSchema, SessionStoreUnavailable) as exc:
        for claim in claimed:  # a refused registration leaves nothing behind, its claim included
            await services.agents.ids.undo(claim)
        raise _refusal(exc) from None
    services.mcp.tools_changed()  # MCP clients hear of its tools now, not at the next check
    return {"registered": True, "agent_id": agent.agent_id, "status": agent.status}


def _refusal(exc: RegistrationRefused | InvalidToolSchema | SessionStoreUnavailable) -> ApiError:
    """The HTTP error of a refused registration."""
    if isinstance(exc, RegistrationRefused):  # a refused URL too: its field is the URL's
        if exc.code in (ErrorCode.AGENT_CONFLICT, ErrorCode.INVALID_REQUEST, ErrorCode.FORBIDDEN):
            return ApiError(exc.code, exc.message)
        return _invalid_tools(exc.code, exc.message, exc.field)
    if isinstance(exc, InvalidToolSchema):
        return _invalid_tools(ErrorCode.VALIDATION_ERROR, str(exc))
    return ApiError(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc))


def _owner_tenant(principal: Principal, requested: str | None) -> str | None:
    """The tenant a registration is for: the one an administrator names (``None``: shared), or
    the registering key's own."""
    if principal.is_admin:
        return requested
    if requested is not None and requested != principal.tenant:
        raise ApiError(
            ErrorCode.VALIDATION_ERROR,
            [
                {
                    "loc": ["query", "tenant"],
                    "msg": f"a key of tenant {principal.tenant!r} registers agents for its own tenant only",
                    "type": "value_error",
                }
            ],
        )
    return principal.tenant


async def _register_remote(
    body: McpRegistration | A2ARegistration,
    services: Any,
    principal: Principal,
    tenant: str | None,
    claimed: list[Claim],
) -> InvocationAgent:
    """List a remote agent's tools through its connector, check them like any agent's, store it
    (the id claimed in ``claimed``, for the caller to undo when this fails)."""
    agent_id: str | None
    if isinstance(body, McpRegistration):
        transport: Literal["mcp", "a2a"] = "mcp"
        url, headers, agent_id = body.mcp_url, body.mcp_headers, body.agent_id
    else:
        transport, url, headers, agent_id = "a2a", body.a2a_url, body.a2a_headers, body.agent_id
    ids = services.agents.ids
    if agent_id is not None:  # refused before the remote agent is asked anything
        await ids.check(principal, agent_id, "action", tenant=tenant)
    found = await services.invocation.discover(
        transport, url, headers, services.settings.openagent_remote_discovery_timeout, registrant=principal
    )
    agent_id = agent_id or found.agent_id
    if not agent_id or not re.fullmatch(AGENT_ID_PATTERN, agent_id):
        raise RegistrationRefused(
            ErrorCode.INVALID_REQUEST, f"the {transport} agent at {url} gave no usable name: send an agent_id"
        )
    services.tool_catalog.check(agent_id, found.tools, invocation=True, metadata=found.metadata)
    claimed.append(await ids.claim(principal, agent_id, "action", tenant=tenant))
    agent: InvocationAgent = await services.invocation.register_remote(
        transport, agent_id, url, headers, found, tenant=tenant
    )
    return agent


@router.post(
    "/unregister",
    dependencies=needs(Permission.AGENT),
    response_model=Unregistered,
    responses={
        403: error("The key's agent_ids do not match, or an administrator registered the agent"),
        404: error("Unknown invocation agent (not_found)"),
        503: error("Redis unavailable"),
    },
)
async def unregister(body: Unregistration, request: Request, services: ServicesDep) -> dict[str, Any]:
    """Forget a cached HTTP agent and free its id (an ``agent`` key: one its ``agent_ids``
    patterns match; another tenant's is unknown to a tenant's key, and one an administrator
    registered is removed by an administrator only: 403). The id is released only when an agent
    was removed: a refused request (a WebSocket agent's id, say) leaves its owner as it was."""
    principal = principal_of(request.scope)
    ids = services.agents.ids
    try:
        await ids.check_release(principal, body.agent_id)
        removed = await services.invocation.unregister(body.agent_id)
        if removed:
            await ids.release(principal, body.agent_id)
    except RegistrationRefused as exc:
        if exc.code == ErrorCode.NOT_FOUND:
            raise ApiError(ErrorCode.NOT_FOUND, f"unknown invocation agent {body.agent_id!r}") from None
        raise ApiError(exc.code, exc.message) from None
    except SessionStoreUnavailable as exc:
        raise ApiError(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
    if not removed:
        raise ApiError(ErrorCode.NOT_FOUND, f"unknown invocation agent {body.agent_id!r}")
    services.mcp.tools_changed()
    return {"unregistered": True, "agent_id": body.agent_id}


@router.get(
    "/refresh",
    response_model=Refreshed,
    responses={503: error("Redis unavailable")},
    dependencies=needs(Permission.ADMIN),
)
async def refresh(services: ServicesDep) -> dict[str, Any]:
    """Re-read the invocation agents from Redis and health-check each one (UP/DOWN)."""
    try:
        await services.invocation.reload()
    except SessionStoreUnavailable as exc:
        raise ApiError(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
    await services.invocation.check_all()
    return {
        "agents": [
            {
                "agent_id": a.agent_id,
                "status": a.status,
                "last_check": a.last_check,
                "last_error": a.last_error,
            }
            for a in services.invocation.all()
        ]
    }


@router.get(
    "/tool_progress/{call_id}",
    response_model=CallProgress,
    responses={404: error("Unknown call")},
    dependencies=needs(Permission.READ),
)
async def get_progress(call_id: str, services: ServicesDep) -> dict[str, Any]:
    """The latest progress of a call (WebSocket or HTTP)."""
    known = services.dispatcher.latest_progress(call_id)
    if known is None:
        raise ApiError(ErrorCode.UNKNOWN_CALL, f"unknown call {call_id!r}")
    latest, running = known
    return {
        "call_id": call_id,
        "running": running,
        "message": latest.message if latest else None,
        "progress": latest.progress if latest else None,
    }


@callbacks.post(
    "/tool_callback",
    response_model=CallbackAnswer,
    response_model_exclude_unset=True,
    responses={
        401: _NO_TOKEN,
        404: error("Unknown or expired call, or not this call's token"),
        409: error("The result was already recorded in the session (a repeated callback)"),
        410: error("The call already finished (timed out or failed, its query stored the outcome)"),
        503: error("Redis unavailable, or the master holding the call did not answer: retry"),
    },
)
async def tool_callback(body: CallbackBody, token: Token, services: ServicesDep) -> dict[str, Any]:
    """An invocation agent posts a call's result to the ``callback_url`` it was given.

    ``status`` of the answer: ``accepted`` (the query waiting for it has it), ``duplicate`` (it
    already had it), ``forwarded`` (sent to the master waiting for it), or ``recorded``: the query
    is gone (its master restarted or was killed), so the result was appended to ``session_id``.
    """
    result = ToolResult(call_id=body.call_id, success=body.success, result=body.result, error=body.error)
    outcome = services.dispatcher.resolve_callback(token, result)
    if outcome == "accepted" or outcome == "duplicate":
        return {"call_id": body.call_id, "status": outcome}
    if outcome == "finished":
        raise ApiError(
            ErrorCode.CALL_FINISHED, f"call {body.call_id!r} already finished (timed out or failed)"
        )
    records, router = services.dispatcher.records, services.cluster_router
    if records is None:
        raise ApiError(ErrorCode.UNKNOWN_CALL, _unknown(body.call_id))

    async def forward(holder: str) -> DeliveryStatus | None:
        assert router is not None
        return await router.forward_result(holder, body.call_id, token, body.model_dump())

    try:
        delivery = await records.deliver(token, result, forward if router is not None else None)
    except SessionStoreUnavailable as exc:
        raise ApiError(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
    if delivery.status == "forwarded":
        return {"call_id": body.call_id, "status": "forwarded"}
    if delivery.status == "recorded":
        return {"call_id": body.call_id, "status": "recorded", "session_id": delivery.session_id}
    if delivery.status == "unanswered":
        raise ApiError(
            ErrorCode.CALL_HOLDER_UNAVAILABLE,
            f"the master holding call {body.call_id!r} did not answer (it may have just stopped): retry",
        )
    if delivery.status == "already_recorded":
        raise ApiError(
            ErrorCode.ALREADY_RECORDED,
            f"the result of call {body.call_id!r} was already recorded"
            + (f" in session {delivery.session_id!r}" if delivery.session_id else ""),
        )
    if delivery.status == "finished":
        raise ApiError(
            ErrorCode.CALL_FINISHED,
            f"call {body.call_id!r} already finished: its query stored the outcome (timed out or failed)",
        )
    if delivery.status == "no_session":
        raise ApiError(
            ErrorCode.CALL_FINISHED,
            f"call {body.call_id!r} belonged to no session and its query is gone: result dropped",
        )
    raise ApiError(ErrorCode.UNKNOWN_CALL, _unknown(body.call_id))


def _unknown(call_id: str) -> str:
    return f"unknown or expired call {call_id!r}, or invalid token"


@callbacks.post(
    "/tool_progress",
    response_model=CallbackAnswer,
    response_model_exclude_unset=True,
    responses={401: _NO_TOKEN, 404: error("No running call for this token")},
)
async def tool_progress(body: ProgressBody, token: Token, services: ServicesDep) -> dict[str, Any]:
    """An invocation agent reports progress of a running call."""
    progress = ToolProgress(call_id=body.call_id, message=body.message, progress=body.progress)
    if not services.dispatcher.progress_callback(token, progress):
        router = services.cluster_router
        if router is not None and await router.forward_callback(
            "progress", body.call_id, token, body.model_dump()
        ):
            return {"call_id": body.call_id, "status": "forwarded"}
        raise ApiError(ErrorCode.UNKNOWN_CALL, f"no running call {body.call_id!r} for this token")
    return {"call_id": body.call_id, "status": "recorded"}
