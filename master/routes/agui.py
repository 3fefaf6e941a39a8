"""``POST /ag-ui``: the AG-UI door for agent front ends (:mod:`master.doors.agui` answers it).

The body is an AG-UI ``RunAgentInput``; the answer is a stream of AG-UI events (Server-Sent
Events). What is refused before the run starts is an HTTP error with the master's error body;
everything after, a failed run included, is an event of the stream (``RUN_ERROR``).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from master.auth import principal_of
from master.deps import ServicesDep
from master.doors.agui import AgUiDoor, InputError
from master.errors.responses import ApiError
from master.gateway.drain import RETRY_AFTER_SECONDS as DRAIN_RETRY_AFTER
from master.openapi import error
from master.query.admission import DRAINING
from master.query.events import QueryRefused
from protocol import ErrorCode

router = APIRouter(tags=["ag-ui"])

RETRY_AFTER_SECONDS = 1
"""``Retry-After`` of a 429 (too many queries in flight); a draining master's 503 has the drain's."""

_INPUT = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "description": "An AG-UI RunAgentInput (threadId, runId, messages, tools, state, "
                "context, forwardedProps, resume), as the AG-UI clients send it",
                "required": ["threadId", "runId", "messages"],
                "properties": {
                    "threadId": {"type": "string", "description": "The conversation: the hub's session id"},
                    "runId": {"type": "string"},
                    "messages": {"type": "array", "items": {"type": "object"}},
                    "tools": {"type": "array", "items": {"type": "object"}},
                    "state": {},
                    "context": {"type": "array", "items": {"type": "object"}},
                    "forwardedProps": {},
                    "resume": {
                        "type": "array",
                        "items": {"type": "object"},
                        "description": "Answers to the interrupts of the thread's last run",
                    },
                },
            }
        }
    },
}


@router.post(
    "/ag-ui",
    response_class=StreamingResponse,
    openapi_extra={"requestBody": _INPUT},
    responses={
        200: {
            "description": "AG-UI events as Server-Sent Events: RUN_STARTED, the run's steps, text "
            "and tool calls, STATE_SNAPSHOT, then RUN_FINISHED (success, or interrupt with the "
            "approvals that wait) or RUN_ERROR",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        401: error("Missing or wrong API key (unauthorized)"),
        422: error("Not an AG-UI RunAgentInput (validation_error)"),
        429: error("Too many queries in flight (too_many_queries, Retry-After)"),
        503: error("The master is stopping (draining, Retry-After)"),
    },
)
async def run_agent(request: Request, services: ServicesDep) -> StreamingResponse:
    """Run a query for an AG-UI front end: the ``threadId`` is the session, the last user message
    the question; a call that needs approval ends the run with an interrupt, answered by the next
    input's ``resume`` (see the guide "Build your own front end with AG-UI")."""
    door = services.agui or AgUiDoor(services.entry, services.approvals)
    try:
        run = door.read(await request.body())
    except InputError as exc:
        raise ApiError(exc.code, exc.message) from None
    try:
        events = await door.start(run, principal_of(request.scope))
    except QueryRefused as exc:
        code = ErrorCode.of(exc.code)
        retry = DRAIN_RETRY_AFTER if code == DRAINING else RETRY_AFTER_SECONDS
        headers = {"Retry-After": str(retry)} if code in (ErrorCode.TOO_MANY_QUERIES, DRAINING) else None
        raise ApiError(code, exc.message, headers) from None
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
