"""The OpenAI-compatible API under ``/v1`` (:mod:`master.doors.openai` answers it): chat
completions and the Responses API (:mod:`master.doors.openai.responses`).

Its errors have OpenAI's body (``{"error": {"message", "type", "param", "code"}}``, with the
master's ``error_code`` beside it), a 401 or 403 included (:func:`refusal`, used by
:class:`master.access.middleware.AccessMiddleware`), so that OpenAI clients raise their usual exceptions.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict
from starlette.types import Scope, Send

from master.asgi import LeanRequest, send_response
from master.auth import principal_of
from master.deps import Services, ServicesDep
from master.doors.openai import SESSION_HEADER, error_response
from master.doors.openai.responses import ResponsesDoor
from protocol import ErrorCode

router = APIRouter(prefix="/v1", tags=["openai"])

PREFIX = "/v1/"


class OpenAIErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class OpenAIError(BaseModel):
    """An error of the OpenAI-compatible API, in OpenAI's shape."""

    error: OpenAIErrorDetail
    error_code: ErrorCode
    """The master's error code (also in ``error.code``)."""


class Model(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(BaseModel):
    """``GET /v1/models``: ``openagent``, then ``openagent/<agent_id>`` per agent with tools."""

    object: Literal["list"] = "list"
    data: list[Model]


class ChatMessageOut(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    refusal: str | None = None


class Choice(BaseModel):
    index: int
    message: ChatMessageOut
    finish_reason: Literal["stop", "tool_calls"]
    logprobs: None = None


class CompletionUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class OpenAgentExtras(BaseModel):
    """The hub's own fields of an answer (OpenAI clients ignore them)."""

    session_id: str | None
    query_id: str
    agents_used: list[dict[str, Any]]
    steps: int
    status: str | None = None
    stopped_by: str | None = None


class ChatCompletion(BaseModel):
    """``POST /v1/chat/completions``: a ``chat.completion`` (or, streamed, its chunks)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    """The model the request named."""
    choices: list[Choice]
    usage: CompletionUsage
    """LLM tokens summed over the orchestrator's rounds."""
    system_fingerprint: str | None = None
    openagent: OpenAgentExtras


class ResponseUsage(BaseModel):
    input_tokens: int
    input_tokens_details: dict[str, int]
    output_tokens: int
    output_tokens_details: dict[str, int]
    total_tokens: int


class ResponseObject(BaseModel):
    """``POST /v1/responses`` and ``GET /v1/responses/{response_id}``: a ``response`` object (or,
    streamed, the Responses events ending with ``response.completed``)."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: Literal["queued", "in_progress", "completed", "incomplete", "failed", "cancelled"]
    """``in_progress`` (a background response running), ``completed`` (the output may end with
    ``function_call`` items the client runs, or ``mcp_approval_request`` items a person decides),
    ``incomplete`` (a budget stopped the run), ``failed`` (``error`` says why), ``cancelled``."""
    background: bool = False
    error: dict[str, Any] | None = None
    incomplete_details: dict[str, Any] | None = None
    model: str | None = None
    output: list[dict[str, Any]]
    """``message``, ``function_call`` and ``mcp_approval_request`` items."""
    previous_response_id: str | None = None
    usage: ResponseUsage | None = None
    """LLM tokens summed over the orchestrator's rounds (once the run has ended)."""
    openagent: OpenAgentExtras | None = None
    """The hub's own fields (once the run has ended)."""


class ResponseDeleted(BaseModel):
    """``DELETE /v1/responses/{response_id}``."""

    id: str
    object: Literal["response.deleted"] = "response.deleted"
    deleted: bool


ResponseId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{1,128}$", description="A response's id")]


def _error(description: str) -> dict[str, Any]:
    return {"model": OpenAIError, "description": description}


def refusal(scope: Scope, code: ErrorCode, message: str) -> Response | None:
    """A 401, 403 or 503 of a ``/v1`` path before its route runs, in OpenAI's shape (``None``:
    another path, the usual body); used by :class:`master.access.middleware.AccessMiddleware`."""
    if not str(scope.get("path", "")).startswith(PREFIX):
        return None
    response = error_response(code, message, code.status)
    if code is ErrorCode.UNAUTHORIZED:
        response.headers["WWW-Authenticate"] = "Bearer"
    return response


def _disabled() -> Response:
    return error_response(
        ErrorCode.FEATURE_DISABLED, "the OpenAI-compatible API is not set up on this master", 403
    )


@router.get(
    "/models",
    response_model=ModelList,
    responses={401: _error("Missing or wrong API key"), 403: _error("A key whose role may not query")},
)
async def list_models(request: Request, services: ServicesDep) -> Any:
    """The models a client may name: ``openagent`` (the orchestrator with every agent) and
    ``openagent/<agent_id>`` (scoped to one agent), for every agent with tools in the cluster."""
    door = services.openai
    if door is None:
        return _disabled()
    return door.models(principal_of(request.scope))


@router.post(
    "/chat/completions",
    response_model=ChatCompletion,
    responses={
        200: {
            "description": "A chat.completion, or with stream: true Server-Sent Events of "
            "chat.completion.chunk objects ending with data: [DONE]",
            "content": {"text/event-stream": {"schema": {}}},
        },
        400: _error("A request the API refuses (n > 1, an image part, a bad parameter...), named in param"),
        401: _error("Missing or wrong API key"),
        403: _error("A key whose role may not query"),
        404: _error("Unknown model, or unknown session"),
        429: _error("Too many queries in flight (Retry-After)"),
        500: _error("A bug in the master; see its log"),
        502: _error("The LLM provider failed"),
        503: _error("No LLM configured, Redis unavailable, or the master is stopping (Retry-After)"),
    },
)
async def chat_completions(request: Request, services: ServicesDep) -> Response:
    """Ask the orchestrator, OpenAI-style: the last user message is the question (see the guide
    "Chat with OpenAgent from Open WebUI, LibreChat or any OpenAI client")."""
    door = services.openai
    if door is None:
        return _disabled()
    return await door.chat(
        await request.body(), request.headers.get(SESSION_HEADER), principal_of(request.scope)
    )


_RESPONSE_ERRORS: dict[int | str, dict[str, Any]] = {
    401: _error("Missing or wrong API key"),
    403: _error("A key whose role may not query"),
    404: _error("No such response (never stored, deleted, expired, or another tenant's)"),
    503: _error("Redis unavailable"),
}


def _responses(services: Services) -> ResponsesDoor | None:
    door = services.responses
    if door is None or services.openai is None:
        return None
    return door


@router.post(
    "/responses",
    response_model=ResponseObject,
    responses={
        200: {
            "description": "A response object, or with stream: true Server-Sent Events of the "
            "Responses API (response.created ... response.completed)",
            "content": {"text/event-stream": {"schema": {}}},
        },
        400: _error("A request the API refuses, named in param"),
        401: _error("Missing or wrong API key"),
        403: _error("A key whose role may not query, or a decision by a key that may not approve"),
        404: _error("Unknown model, previous response, approval or session"),
        409: _error("An approval decided already"),
        429: _error("Too many queries in flight (Retry-After)"),
        500: _error("A bug in the master; see its log"),
        502: _error("The LLM provider failed"),
        503: _error("No LLM configured, Redis unavailable, or the master is stopping (Retry-After)"),
    },
)
async def create_response(request: Request, services: ServicesDep) -> Response:
    """Ask the orchestrator through OpenAI's Responses API: ``input`` (text or items),
    ``instructions``, client ``function`` tools, ``previous_response_id``, ``store``, ``stream``,
    ``background``; ``mcp_approval_response`` items decide approvals (see the guide "The Responses
    API and the OpenAI Agents SDK")."""
    door = _responses(services)
    if door is None:
        return _disabled()
    return await door.create(
        await request.body(), request.headers.get(SESSION_HEADER), principal_of(request.scope)
    )


@router.get("/responses/{response_id}", response_model=ResponseObject, responses=_RESPONSE_ERRORS)
async def retrieve_response(response_id: ResponseId, request: Request, services: ServicesDep) -> Response:
    """A stored response, as it stands (a background one: ``in_progress`` until its run ends)."""
    door = _responses(services)
    if door is None:
        return _disabled()
    return await door.retrieve(response_id, principal_of(request.scope))


@router.delete("/responses/{response_id}", response_model=ResponseDeleted, responses=_RESPONSE_ERRORS)
async def delete_response(response_id: ResponseId, request: Request, services: ServicesDep) -> Response:
    """Forget a stored response (the session it continued stays)."""
    door = _responses(services)
    if door is None:
        return _disabled()
    return await door.delete(response_id, principal_of(request.scope))


@router.post(
    "/responses/{response_id}/cancel",
    response_model=ResponseObject,
    responses={**_RESPONSE_ERRORS, 400: _error("Not a background response")},
)
async def cancel_response(response_id: ResponseId, request: Request, services: ServicesDep) -> Response:
    """Cancel a background response in progress: ``cancelled``, and its run stopped (whichever
    master runs it). One that has ended is answered as it is."""
    door = _responses(services)
    if door is None:
        return _disabled()
    return await door.cancel(response_id, principal_of(request.scope))


async def lean_responses(services: Services, request: LeanRequest, send: Send) -> bool:
    """:func:`create_response` without FastAPI's layers for the plain case, a JSON answer; a
    stream (or no door) goes to the route."""
    door = _responses(services)
    if door is None:
        return False
    read = door.read(request.body)
    if not isinstance(read, Response):
        if read.stream:
            return False  # the route streams it (and reads it again)
        read = await door.answer(read, _session_header(request.scope), principal_of(request.scope))
    await send_response(send, read)
    return True


async def lean_chat_completions(services: Services, request: LeanRequest, send: Send) -> bool:
    """:func:`chat_completions` without FastAPI's layers (:class:`master.asgi.LeanRoutes`) for the
    plain case, a JSON answer; a stream (or no door) goes to the route."""
    door = services.openai
    if door is None:
        return False
    read = door.read(request.body, _session_header(request.scope))
    if not isinstance(read, Response):
        if read.stream:
            return False  # the route streams it (and reads it again)
        read = await door.answer(read, principal_of(request.scope))
    await send_response(send, read)
    return True


_SESSION_HEADER = SESSION_HEADER.lower().encode("latin-1")


def _session_header(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == _SESSION_HEADER:  # the first one, as Starlette's Headers.get
            return str(value.decode("latin-1"))
    return None
