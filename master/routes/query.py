"""``POST /query`` and ``GET /query/orchestrator-models``."""

from __future__ import annotations

import json
import uuid
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.types import Send

from master.asgi import LeanRequest, send_response
from master.deps import Services, ServicesDep
from master.drain import RETRY_AFTER_SECONDS
from master.error_responses import ApiError
from master.errors import QueryRejected
from master.openapi import error
from master.orchestration.prompts import PROMPT_PROFILES
from master.query.admission import DRAINING
from master.query.service import rejected_response
from protocol import ErrorCode, PromptProfile, QueryRequest, QueryResponse

router = APIRouter(tags=["query"])


class AttachmentLimits(BaseModel):
    max_bytes: int
    """``RAG_MAX_ATTACHMENT_BYTES``: the largest file a query may attach."""
    max_count: int
    """``RAG_MAX_ATTACHMENTS``: the most files a query may attach."""


class OrchestratorModels(BaseModel):
    """``GET /query/orchestrator-models``."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    default_model: str
    """The model a query gets when it names none."""
    allowed_models: list[str]
    """The models a query may ask for (``orchestrator_model``)."""
    prompt_profiles: list[PromptProfile]
    """The system prompt profiles a query may ask for (``orchestrator_prompt_profile``)."""
    attachment_limits: AttachmentLimits


def status_for(exc: QueryRejected) -> int:
    """The HTTP status that answers a rejected query (its code's)."""
    return exc.code.status


@router.post(
    "/query",
    response_model=QueryResponse,
    responses={
        200: {
            "description": "The answer (JSON), or with stream/Accept: text/event-stream a stream of "
            "Server-Sent Events ending with a query_result event",
            "content": {"text/event-stream": {"schema": {}}},
        },
        400: {
            "model": QueryResponse,
            "description": "Model not allowed, a plan step that cannot run, or an attachment whose base64 "
            "does not decode or whose type contradicts its content",
        },
        403: error("OPENAGENT_HTTP_QUERY=0"),
        404: {"model": QueryResponse, "description": "Unknown or expired session_id, or unknown plan"},
        409: {"model": QueryResponse, "description": "The plan was already executed"},
        413: {
            "model": QueryResponse,
            "description": "Too many attachments, or one too large (nothing stored)",
        },
        429: {"model": QueryResponse, "description": "Too many queries in flight (too_many_queries)"},
        501: {"model": QueryResponse, "description": "A requested feature is not implemented yet"},
        502: {"model": QueryResponse, "description": "The LLM provider failed"},
        503: {
            "model": QueryResponse,
            "description": "No LLM configured, Redis unavailable, or the master is stopping "
            "(draining, with Retry-After)",
        },
    },
)
async def post_query(body: QueryRequest, request: Request, services: ServicesDep) -> Any:
    """Ask the orchestrator. The answer has the fields of a WebSocket ``query_result``.

    With ``"stream": true`` (or ``Accept: text/event-stream``) the answer is a stream of
    Server-Sent Events ending with a ``query_result`` event (see :mod:`master.query.streaming`).
    """
    if not services.settings.openagent_http_query:
        raise ApiError(ErrorCode.FEATURE_DISABLED, "POST /query is disabled (OPENAGENT_HTTP_QUERY=0)")
    query_id = _query_id()
    try:
        if body.stream or "text/event-stream" in request.headers.get("accept", ""):
            return StreamingResponse(
                services.streams.start(body, query_id),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
    except QueryRejected as exc:  # the stream could not start
        return _rejected(body, query_id, exc)
    return await _answer(services, body, query_id)


async def _answer(services: Services, body: QueryRequest, query_id: str) -> Response:
    """The JSON answer of a query, or its refusal (both paths of ``POST /query``)."""
    try:
        with services.admission.slot():
            answered = await services.queries.run(body, query_id)
    except QueryRejected as exc:
        return _rejected(body, query_id, exc)
    # Serialized here: returning the model would make FastAPI validate it a second time.
    return Response(answered.model_dump_json(), media_type="application/json")


def _rejected(body: QueryRequest, query_id: str, exc: QueryRejected) -> Response:
    """A refused query's answer; a draining master's refusal carries ``Retry-After``."""
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if exc.code == DRAINING else None
    return Response(
        rejected_response(body, query_id, exc).model_dump_json(),
        status_code=status_for(exc),
        media_type="application/json",
        headers=headers,
    )


def _query_id() -> str:
    return f"http-{uuid.uuid4().hex}"


async def lean_post_query(services: Services, request: LeanRequest, send: Send) -> bool:
    """:func:`post_query` without FastAPI's layers (:class:`master.asgi.MasterApp`), for the plain
    case: a JSON answer. Declines (False, nothing sent) a body that does not validate, a stream,
    or ``POST /query`` turned off, so that the route answers those exactly as it always has."""
    if not services.settings.openagent_http_query or "text/event-stream" in request.accept:
        return False
    try:  # as FastAPI parses a JSON body
        body = QueryRequest.model_validate(json.loads(request.body))
    except (ValueError, ValidationError):  # json.JSONDecodeError is a ValueError
        return False
    if body.stream:
        return False
    await send_response(send, await _answer(services, body, query_id=_query_id()))
    return True


@router.get("/query/orchestrator-models", response_model=OrchestratorModels)
async def orchestrator_models(services: ServicesDep) -> dict[str, Any]:
    """The models and prompt profiles a query may ask for, and the attachment limits
    (``RAG_MAX_ATTACHMENT_BYTES``, ``RAG_MAX_ATTACHMENTS``) so clients can check before sending."""
    settings = services.settings
    return {
        **services.catalog.as_dict(),
        "prompt_profiles": list(PROMPT_PROFILES),
        "attachment_limits": {
            "max_bytes": settings.rag_max_attachment_bytes,
            "max_count": settings.rag_max_attachments,
        },
    }
