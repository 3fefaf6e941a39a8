"""HTTP refusals: :class:`ApiError` for route code, and the handlers that give every error one body.

Every error answer is :class:`protocol.ErrorBody`, ``{"detail": ..., "error_code": ...}``:
``detail`` as FastAPI gives it (a message, the list of validation errors, or an object with
more), ``error_code`` a :class:`protocol.ErrorCode`. Route code raises :class:`ApiError`
with the code, and the status follows from it (``code.status``); the framework's own refusals
(401 from the API-key dependency, 404 unknown path, 405, 413 and 400 from the body parser)
get the code of their status (:func:`code_for_status`); validation errors get
``validation_error``, with every echoed input capped at :data:`MAX_ECHO_CHARS` characters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Scope

from protocol.errors import ErrorCode

MAX_ECHO_CHARS = 200
"""A validation error echoes at most this many characters of each input value."""

_BY_STATUS: dict[int, ErrorCode] = {
    400: ErrorCode.INVALID_BODY,
    401: ErrorCode.UNAUTHORIZED,
    403: ErrorCode.FEATURE_DISABLED,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    413: ErrorCode.BODY_TOO_LARGE,
    422: ErrorCode.VALIDATION_ERROR,
    429: ErrorCode.TOO_MANY_QUERIES,
    501: ErrorCode.NOT_IMPLEMENTED,
    503: ErrorCode.SESSION_STORE_UNAVAILABLE,
}


class ApiError(HTTPException):
    """An HTTP refusal with its stable code; the status is ``code.status``.

    ``detail`` is the message naming the offending value, or an object with more.
    """

    def __init__(
        self,
        code: ErrorCode,
        detail: str | list[Any] | dict[str, Any],
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(code.status, detail=detail, headers=dict(headers) if headers else None)
        self.code = code


def code_for_status(status: int) -> ErrorCode:
    """The code of a refusal raised without one (by the framework): by its status."""
    code = _BY_STATUS.get(status)
    if code is not None:
        return code
    return ErrorCode.INTERNAL_ERROR if status >= 500 else ErrorCode.INVALID_REQUEST


def error_response(
    code: ErrorCode,
    detail: Any,
    *,
    status_code: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """The error body ``{"detail": ..., "error_code": ...}`` (status ``code.status`` unless given)."""
    return JSONResponse(
        {"detail": detail, "error_code": code.value},
        status_code=status_code if status_code is not None else code.status,
        headers=headers,
    )


def http_error_response(exc: StarletteHTTPException) -> JSONResponse:
    """The answer to an :class:`HTTPException`, as its handler gives it (also for the lean paths)."""
    code = exc.code if isinstance(exc, ApiError) else code_for_status(exc.status_code)
    return error_response(code, exc.detail, status_code=exc.status_code, headers=exc.headers)


def capped(value: Any, limit: int = MAX_ECHO_CHARS) -> Any:
    """``value`` with every string (and the JSON of anything large) cut to ``limit`` characters."""
    if isinstance(value, str):
        return value if len(value) <= limit else f"{value[:limit]}… ({len(value)} characters)"
    if isinstance(value, bytes):
        return capped(value.decode("utf-8", "replace"), limit)
    if isinstance(value, dict):
        items = list(value.items())
        shown = {str(key)[:limit]: capped(item, limit) for key, item in items[:20]}
        if len(items) > 20:
            shown["…"] = f"{len(items) - 20} more keys"
        return shown
    if isinstance(value, list | tuple):
        shown_items = [capped(item, limit) for item in value[:20]]
        if len(value) > 20:
            shown_items.append(f"… {len(value) - 20} more items")
        return shown_items
    return value


SECRET_FIELDS = frozenset({"mcp_headers", "a2a_headers", "secrets"})
"""Body fields whose values are secrets (a remote agent's headers, a workspace restore's ``secrets``):
a validation error never echoes them."""
REDACTED = "[redacted]"


def _redacted(value: Any) -> Any:
    """``value`` with every secret field's content replaced by :data:`REDACTED`."""
    if isinstance(value, dict):
        return {k: REDACTED if k in SECRET_FIELDS else _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def validation_detail(errors: Any) -> list[dict[str, Any]]:
    """FastAPI's list of validation errors, with each echoed ``input`` (and ``ctx``) capped, and
    the secret fields' values (:data:`SECRET_FIELDS`) never echoed."""
    detail: list[dict[str, Any]] = []
    for error in jsonable_encoder(errors):
        if isinstance(error, dict):
            error = {**error}
            if "input" in error:
                secret = any(part in SECRET_FIELDS for part in error.get("loc", ()))
                error["input"] = REDACTED if secret else capped(_redacted(error["input"]))
                if secret:
                    error.pop("ctx", None)
            if "ctx" in error:
                error["ctx"] = capped(error["ctx"])
            error["msg"] = capped(error.get("msg", ""), 1000)
        detail.append(error)
    return detail


async def _http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code in {204, 304}:  # no body (as FastAPI's own handler)
        return Response(status_code=exc.status_code, headers=exc.headers)
    return http_error_response(exc)


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    detail = validation_detail(exc.errors())
    sent = request.headers.get("content-type", "")
    if not _json_media(sent):
        # A JSON body sent as a form (curl -d) or text reaches the model as bytes: say which header.
        for error in detail:
            if isinstance(error, dict) and list(error.get("loc", ())) == ["body"]:
                error["msg"] = (
                    "the body must be a JSON object sent with 'Content-Type: application/json' "
                    f"(this request sent {sent or 'no Content-Type'!r})"
                )
    return error_response(ErrorCode.VALIDATION_ERROR, detail)


def _json_media(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


Refusal = Callable[[Scope, ErrorCode, str], Response | None]
"""A door's own shape of a refusal of its paths (``None``: not its path, the usual body)."""


def install_error_handlers(app: FastAPI, refusal: Refusal | None = None) -> None:
    """Give every HTTP refusal of ``app`` the body ``{"detail": ..., "error_code": ...}``, or
    ``refusal``'s of the paths it shapes (the OpenAI-compatible API's ``/v1``: a 404 of an unknown
    route in OpenAI's shape)."""

    async def http_exception(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if refusal is not None and exc.status_code not in {204, 304}:
            code = exc.code if isinstance(exc, ApiError) else code_for_status(exc.status_code)
            message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
            if exc.status_code == 404 and message == "Not Found":
                message = f"unknown route {request.method} {request.url.path}"
            shaped = refusal(request.scope, code, message)
            if shaped is not None:
                shaped.status_code = exc.status_code
                for name, value in (exc.headers or {}).items():
                    shaped.headers[name] = value
                return shaped
        return await _http_exception(request, exc)

    app.add_exception_handler(StarletteHTTPException, http_exception)
    app.add_exception_handler(RequestValidationError, _validation_error)
