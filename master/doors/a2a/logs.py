"""What the A2A door logs of a request it refuses: one WARNING with the request's id and why.

A client's mistake (a body that is not JSON, params that do not parse, an unknown task, an
unsupported operation, a message the executor refuses: an undecodable decision, a bad tool call)
is the client's business, not a fault of the master: it is answered with its JSON-RPC error and
logged once, at WARNING, naming the JSON-RPC request id, the method and the reason, without a
traceback. The ``a2a-sdk`` logs such errors itself, at ERROR with the traceback, once or twice
(its producer and its consumer of the task's events): :class:`ClientMistakes` drops those
records from the SDK's loggers and :func:`logged` writes the one line from the answer. A real
bug (the SDK's ``InternalError``, any other exception) keeps the SDK's ERROR and traceback.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from a2a.utils.errors import A2AError, InternalError
from starlette.requests import Request
from starlette.responses import Response

logger = logging.getLogger("master.doors.a2a")

Endpoint = Callable[[Request], Awaitable[Response]]

INTERNAL_ERROR = -32603
"""The JSON-RPC code of a fault of the server (kept at ERROR, with its traceback)."""

SDK_LOGGERS = (
    "a2a.server.agent_execution.active_task",
    "a2a.server.request_handlers.default_request_handler",
    "a2a.server.request_handlers.default_request_handler_v2",
    "a2a.server.routes.jsonrpc_dispatcher",
    "a2a.server.routes.rest_dispatcher",
    "a2a.compat.v0_3.jsonrpc_adapter",
    "a2a.utils.error_handlers",
)
"""The SDK's loggers that log a refused request (with its traceback, or as a line of their own)."""

_VALIDATION = frozenset(
    {
        "Failed to parse request params",
        "Failed to validate base JSON-RPC request",
        "Failed to validate base JSON-RPC request for v0.3",
    }
)
"""The SDK's messages for a request that does not parse (logged with the parser's traceback)."""

_SDK_REFUSALS = ("Request Error (ID: %s)", "Request error: Code=%s")
"""The starts of the SDK's own line for an error answer (this door writes its own instead)."""


class ClientMistakes(logging.Filter):
    """Drops the SDK's records of a client's mistake (see the module docstring)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is not None:
            if isinstance(error, A2AError):
                return isinstance(error, InternalError)
            return record.msg not in _VALIDATION
        if isinstance(record.msg, str) and record.msg.startswith(_SDK_REFUSALS):
            return record.levelno >= logging.ERROR  # an internal error's line stays
        return True


_FILTER = ClientMistakes()


def quiet_sdk() -> None:
    """Install :class:`ClientMistakes` on the SDK's loggers (once, whatever the masters in a process)."""
    for name in SDK_LOGGERS:
        sdk = logging.getLogger(name)
        if _FILTER not in sdk.filters:
            sdk.addFilter(_FILTER)


def logged(endpoint: Endpoint, path: str) -> Endpoint:
    """``endpoint`` (an SDK route of ``path``), logging each error it answers (module docstring)."""

    async def answer(request: Request) -> Response:
        response = await endpoint(request)
        body = getattr(response, "body", None)
        if isinstance(body, bytes | bytearray | memoryview):
            if b'"error"' in body:
                _log_error(bytes(body), path)
            return response
        events = getattr(response, "body_iterator", None)
        if events is not None:
            response.body_iterator = _logging_errors(events, path)  # type: ignore[attr-defined]
        return response

    return answer


async def _logging_errors(events: AsyncIterator[Any], path: str) -> AsyncIterator[Any]:
    """A stream's events as they are, logging its ``error`` events (a refusal in the stream)."""
    async for event in events:
        if isinstance(event, dict) and event.get("event") == "error":
            data = event.get("data")
            if isinstance(data, str | bytes):
                _log_error(data.encode() if isinstance(data, str) else data, path)
        yield event


def _log_error(body: bytes, path: str) -> None:
    try:
        payload = json.loads(body)
    except ValueError:
        return
    if not isinstance(payload, dict) or not isinstance(payload.get("error"), dict):
        return
    error = payload["error"]
    code = error.get("code")
    if code == INTERNAL_ERROR or (isinstance(code, int) and code >= 500):
        return  # a fault of the master: the SDK logged it at ERROR, with its traceback
    logger.warning(
        "A2A request %s on %s refused (%s): %s%s",
        json.dumps(payload.get("id")),
        path,
        code,
        error.get("message"),
        _detail(error.get("data")),
    )


def _detail(data: Any) -> str:
    """What the error's ``data`` adds (a parser's complaint), short."""
    if isinstance(data, list):  # 1.0: google.rpc.ErrorInfo items, the detail in their metadata
        data = "; ".join(
            str(value)
            for item in data
            if isinstance(item, dict) and isinstance(item.get("metadata"), dict)
            for value in item["metadata"].values()
        )
    if not isinstance(data, str) or not data:
        return ""
    text = " ".join(data.split())
    return f" ({text[:300]}{'...' if len(text) > 300 else ''})"
