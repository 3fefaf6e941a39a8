"""The OpenAPI document describes every response a route can give, errors included.

Route modules declare the statuses of their own domain (404 unknown call, 409 conflict, ...)
with :data:`ErrorBody` as the model. :func:`document_shared_responses` adds, from the route
table, the statuses that the shared machinery gives on any route:

- 401 on every route that needs the API key (:func:`master.deps.needs_api_key`);
- 400 (a body that is not JSON, or nested too deeply), 413 (over
  ``OPENAGENT_HTTP_MAX_BODY_BYTES``) and 422 (not the declared schema) on every route that
  takes a body;
- 422 on every route with parameters;
- :class:`protocol.ErrorBody` as the body of every error response declared without one;
- :data:`protocol.RunEvent` (``components.schemas.RunEvent``), the data of each Server-Sent
  Event of ``POST /query`` (its ``text/event-stream`` response refers to it).

Every error body is ``{"detail": ..., "error_code": ...}``: ``detail`` a message, FastAPI's list
of validation errors or an object with more, ``error_code`` a :class:`protocol.ErrorCode`
(:mod:`master.errors.responses` answers them).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import iter_route_contexts
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match

from master.deps import needs_api_key
from master.errors.responses import error_response
from protocol.errors import ErrorBody, ErrorCode
from protocol.events import run_event_schema

__all__ = ["ErrorBody", "allow_every_method_on_405", "document_shared_responses", "error"]


def error(description: str) -> dict[str, Any]:
    """A ``responses`` entry with :class:`ErrorBody`."""
    return {"model": ErrorBody, "description": description}


_ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}
_VALIDATION_REF = {"$ref": "#/components/schemas/HTTPValidationError"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def document_shared_responses(app: FastAPI) -> None:
    """Make ``app.openapi()`` add the shared error responses (computed once)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title,
            version=app.version,
            routes=app.routes,
            description=app.description,
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        error_body = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(error_body.pop("$defs", {}))
        components["ErrorBody"] = error_body
        components["HTTPValidationError"] = _validation_error_schema()
        run_event = run_event_schema()
        for name, model in run_event.pop("$defs", {}).items():
            components.setdefault(name, model)
        components["RunEvent"] = {"title": "RunEvent", **run_event}
        components.setdefault("ValidationError", _validation_item_schema())
        for route in iter_route_contexts(app.routes):
            path = getattr(route, "path_format", None) or route.path
            for method in route.methods or ():
                operation = schema.get("paths", {}).get(path, {}).get(method.lower())
                if operation is None:
                    continue
                responses = operation.setdefault("responses", {})
                if needs_api_key(route):
                    responses.setdefault("401", _json(_ERROR_REF, "Missing or invalid API key"))
                if "requestBody" in operation:
                    _add_error(responses, "400", "The body is not JSON, or nested too deeply")
                    _add_error(responses, "413", "The body is over OPENAGENT_HTTP_MAX_BODY_BYTES")
                if "requestBody" in operation or operation.get("parameters"):
                    responses.setdefault("422", _json(_VALIDATION_REF, "The request does not fit the schema"))
                for status, response in responses.items():  # HTTPException bodies: {"detail": ...}
                    if status[0] in "45" and not response.get("content"):
                        response["content"] = {"application/json": {"schema": _ERROR_REF}}
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _add_error(responses: dict[str, Any], status: str, description: str) -> None:
    """Declare :class:`ErrorBody` for ``status``, beside the route's own body when it has one."""
    response = responses.get(status)
    if response is None:
        responses[status] = _json(_ERROR_REF, description)
        return
    content = response.setdefault("content", {}).setdefault("application/json", {})
    schema = content.get("schema")
    if schema is None:
        content["schema"] = _ERROR_REF
    elif schema != _ERROR_REF:
        content["schema"] = {"anyOf": [schema, _ERROR_REF]}
        response["description"] = f"{response.get('description', '')}; or: {description}".lstrip("; ")


def _validation_item_schema() -> dict[str, Any]:
    return {
        "title": "ValidationError",
        "type": "object",
        "properties": {
            "loc": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
            "msg": {"type": "string"},
            "type": {"type": "string"},
        },
        "required": ["loc", "msg", "type"],
    }


def _validation_error_schema() -> dict[str, Any]:
    return {
        "title": "HTTPValidationError",
        "type": "object",
        "properties": {
            "detail": {"type": "array", "items": {"$ref": "#/components/schemas/ValidationError"}},
            "error_code": {"$ref": "#/components/schemas/ErrorCode"},
        },
        "required": ["detail", "error_code"],
        "description": "A request that does not fit the schema: error_code validation_error; each "
        "echoed input is cut to 200 characters.",
    }


def allow_every_method_on_405(app: FastAPI) -> None:
    """405 answers carry ``Allow`` with every method the path takes (Starlette's names only the
    methods of the first route that matched the path, e.g. POST of ``/internal/collaborations``)."""
    routes = list(iter_route_contexts(app.routes))

    async def method_not_allowed(request: Request, exc: Exception) -> Response:
        allowed: set[str] = set()
        for route in routes:
            match, _ = route.matches(request.scope)
            if match != Match.NONE and route.methods:
                allowed |= set(route.methods)
        headers = {"Allow": ", ".join(sorted(allowed))} if allowed else getattr(exc, "headers", None)
        return error_response(ErrorCode.METHOD_NOT_ALLOWED, "Method Not Allowed", headers=headers)

    app.add_exception_handler(405, method_not_allowed)
