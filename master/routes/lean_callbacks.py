"""``POST /tool_callback`` without FastAPI's layers (:class:`master.asgi.LeanRoutes`).

An HTTP invocation costs the master two requests per tool call: the query and the agent's
callback. The callback's plain case (a JSON body that validates, a non-empty ``token``) runs
the route's own function, :func:`master.routes.invocation.tool_callback`, and answers as FastAPI
would (its dict as compact JSON, an ``HTTPException`` as ``{"detail": ..., "error_code": ...}``);
anything else is declined and goes through the full stack.
"""

from __future__ import annotations

import json

from fastapi import HTTPException
from pydantic import ValidationError
from starlette.datastructures import QueryParams
from starlette.responses import JSONResponse, Response
from starlette.types import Send

from master.asgi import LeanRequest, send_response
from master.deps import Services
from master.error_responses import http_error_response
from master.routes.invocation import CallbackBody, tool_callback


async def lean_tool_callback(services: Services, request: LeanRequest, send: Send) -> bool:
    token = QueryParams(request.scope["query_string"].decode("latin-1")).get("token")
    if not token:  # missing or empty: the route's 401
        return False
    try:  # as FastAPI parses a JSON body
        body = CallbackBody.model_validate(json.loads(request.body))
    except (ValueError, ValidationError):
        return False
    response: Response
    try:
        response = JSONResponse(await tool_callback(body, token, services))
    except HTTPException as exc:  # as the app's handler (master.error_responses)
        response = http_error_response(exc)
    await send_response(send, response)
    return True
