"""``POST /query`` (JSON and Server-Sent Events: two doors onto :class:`master.query.entry.QueryEntry`)
and ``GET /query/orchestrator-models``."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.types import Send

from master.access import Permission
from master.asgi import LeanRequest
from master.auth import Principal, principal_of
from master.deps import Services, ServicesDep, needs
from master.gateway.drain import RETRY_AFTER_SECONDS
from master.openapi import error
from master.orchestration.prompts import PROMPT_PROFILES
from master.query.admission import DRAINING
from master.query.entry import QueryEntry, QueryRun
from master.query.events import Progress, QueryRefused
from master.query.service import rejected_response
from protocol import ErrorCode, PromptProfile, QueryRequest, QueryResponse, RunEvent
from protocol.events import run_finished

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
    model_labels: dict[str, str] | None = None
    """How to show a model whose id alone would mislead (the demo LLM's ``openagent-demo``)."""
    prompt_profiles: list[PromptProfile]
    """The system prompt profiles a query may ask for (``orchestrator_prompt_profile``)."""
    attachment_limits: AttachmentLimits


def status_for(code: ErrorCode) -> int:
    """The HTTP status that answers a query refused or failed with ``code`` (the code's own)."""
    return code.status


@router.post(
    "/query",
    dependencies=needs(Permission.QUERY),
    response_model=QueryResponse,
    responses={
        200: {
            "description": "The answer (JSON), or with stream/Accept: text/event-stream a stream of "
            "Server-Sent Events ending with a query_result event",
            "content": {"text/event-stream": {"schema": {"$ref": "#/components/schemas/RunEvent"}}},
        },
        400: {
            "model": QueryResponse,
            "description": "Model not allowed, allowed_agent_ids naming an unknown agent, a plan step "
            "that cannot run, or an attachment whose base64 does not decode or whose type contradicts "
            "its content",
        },
        403: error("A key whose role may not query (viewer, agent)"),
        404: {"model": QueryResponse, "description": "Unknown or expired session_id, or unknown plan"},
        409: {"model": QueryResponse, "description": "The plan was already executed"},
        413: {
            "model": QueryResponse,
            "description": "Too many attachments, or one too large (nothing stored)",
        },
        429: {"model": QueryResponse, "description": "Too many queries in flight (too_many_queries)"},
        500: {"model": QueryResponse, "description": "A bug in the master (internal_error); see its log"},
        501: {"model": QueryResponse, "description": "A requested feature is not implemented yet"},
        502: {"model": QueryResponse, "description": "The LLM provider failed"},
        503: {
            "model": QueryResponse,
            "description": "No LLM configured, Redis unavailable, or the master is stopping "
            "(draining, with Retry-After)",
        },
    },
)
async def post_query(body: QueryRequest, request: Request, services: ServicesDep) -> Response:
    """Ask the orchestrator. The answer has the fields of a WebSocket ``query_result``.

    With ``"stream": true`` (or ``Accept: text/event-stream``) the answer is a stream of
    Server-Sent Events ending with a ``query_result`` event (see :func:`sse_events`).
    """
    streamed = body.stream or "text/event-stream" in request.headers.get("accept", "")
    return await answer(services.entry, body, streamed=streamed, principal=principal_of(request.scope))


async def answer(entry: QueryEntry, body: QueryRequest, *, streamed: bool, principal: Principal) -> Response:
    """``POST /query``'s answer through the query entry: JSON, or SSE once the query is admitted;
    a refusal is JSON with its status either way."""
    if not streamed:
        return _json(await outcome(entry, body, principal=principal))
    query_id = f"http-{secrets.token_hex(16)}"
    try:
        run = entry.submit(body, door="sse", query_id=query_id, stream=True, principal=principal)
    except QueryRefused as exc:
        return _json(rejected_response(body, query_id, exc))
    return sse_response(run)


async def outcome(entry: QueryEntry, body: QueryRequest, *, principal: Principal) -> QueryResponse:
    """The JSON answer's content (the route and its lean path): the run's outcome, or its refusal."""
    query_id = f"http-{secrets.token_hex(16)}"
    try:
        run = entry.submit(body, door="http", query_id=query_id, principal=principal)
    except QueryRefused as exc:
        return rejected_response(body, query_id, exc)
    return await run.result()


RUN_ID_HEADER = "OpenAgent-Run-Id"
"""Names the run of a streamed answer before it ends (``GET /runs/{run_id}`` reads it meanwhile)."""


def sse_response(run: QueryRun) -> StreamingResponse:
    """The run's answer as Server-Sent Events (:func:`sse_events`), its run id in a header."""
    return StreamingResponse(
        sse_events(run),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", RUN_ID_HEADER: run.run_id},
    )


def _json(response: QueryResponse) -> Response:
    """The JSON answer, with the status of its ``error_code``; a draining master's carries
    ``Retry-After``. Serialized here: returning the model would make FastAPI validate it again."""
    code = response.error_code
    return Response(
        response.model_dump_json(),
        status_code=200 if code is None else status_for(code),
        media_type="application/json",
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)} if code == DRAINING else None,
    )


_JSON_TYPE = (b"content-type", b"application/json")
_RETRY_AFTER = (b"retry-after", str(RETRY_AFTER_SECONDS).encode())


async def send_json_answer(send: Send, response: QueryResponse) -> None:
    """Send :func:`_json`'s answer (the same status, headers and bytes) without building the
    Starlette response: the lean path's every answer."""
    code = response.error_code
    body = response.model_dump_json().encode()
    headers = [(b"content-length", str(len(body)).encode()), _JSON_TYPE]
    if code == DRAINING:
        headers.insert(0, _RETRY_AFTER)
    status = 200 if code is None else status_for(code)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def sse_event(event: RunEvent) -> str:
    """One :data:`protocol.RunEvent` as a Server-Sent Event: ``event: <type>``, its JSON as data."""
    return f"event: {event.type}\ndata: {event.model_dump_json(fallback=str)}\n\n"


async def sse_events(run: QueryRun) -> AsyncIterator[str]:
    """The run's events as Server-Sent Events, each a :data:`protocol.RunEvent` (its ``type`` the
    event's name, its JSON the data): ``step`` (a tool round starts), ``tool_call``,
    ``tool_progress``, ``tool_result`` as they happen, ``token`` (pieces of the model's text as
    it writes), with ``roles`` the coordinator's ``plan``, ``subtask_started`` and ``verdict``,
    ``approval_required`` and ``run_paused`` when the run waits for people, and last
    ``query_result`` with the full result (the fields of the JSON answer, ``success: false`` and
    ``error`` when the query failed). A client that disconnects stops
    receiving them; the run goes on (:mod:`master.query.entry`)."""
    async for event in run.events():
        typed = event.event if isinstance(event, Progress) else run_finished(event.response)
        yield sse_event(typed)


async def lean_post_query(services: Services, request: LeanRequest, send: Send) -> bool:
    """:func:`post_query` without FastAPI's layers (:class:`master.asgi.LeanRoutes`), for the plain
    case: a JSON answer. Declines (False, nothing sent) a body that does not validate or a stream, so that the route answers those exactly as it always has."""
    if "text/event-stream" in request.accept:
        return False
    try:  # parsed and validated in one step; whatever this refuses, the route answers as always
        body = QueryRequest.model_validate_json(request.body)
    except ValidationError:  # invalid JSON too
        return False
    if body.stream:
        return False
    principal = principal_of(request.scope)
    await send_json_answer(send, await outcome(services.entry, body, principal=principal))
    return True


@router.get(
    "/query/orchestrator-models", response_model=OrchestratorModels, dependencies=needs(Permission.READ)
)
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
