"""``POST /tool_callback`` without FastAPI's layers (:class:`master.asgi.LeanRoutes`).

An HTTP invocation costs the master two requests per tool call: the query and the agent's
callback. The callback's plain case (a JSON body that validates, a non-empty ``token``) runs
the route's own function, :func:`master.routes.invocation.tool_callback`, and answers as FastAPI
would (its dict as compact JSON, an ``HTTPException`` as ``{"detail": ..., "error_code": ...}``);
anything else is declined and goes through the full stack.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from fastapi import HTTPException
from pydantic import ValidationError
from starlette.types import Send

from master.asgi import LeanRequest, send_json, send_response
from master.deps import Services
from master.errors.responses import http_error_response
from master.routes.invocation import CallbackBody, tool_callback


def _token(query_string: bytes) -> str | None:
    """The ``token`` parameter as Starlette's ``QueryParams(...).get("token")`` reads it: the
    last one, percent-decoded, blank kept."""
    token = None
    for name, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        if name == "token":
            token = value
    return token


async def lean_tool_callback(services: Services, request: LeanRequest, send: Send) -> bool:
    token = _token(request.scope["query_string"])
    if not token:  # missing or empty: the route's 401
        return False
    try:  # pydantic's JSON parser: a body it refuses is declined, and the route answers as always
        body = CallbackBody.model_validate_json(request.body)
    except ValidationError:
        return False
    try:
        answer = await tool_callback(body, token, services)
    except HTTPException as exc:  # as the app's handler (master.errors.responses)
        await send_response(send, http_error_response(exc))
        return True
    await send_json(send, answer)
    return True
