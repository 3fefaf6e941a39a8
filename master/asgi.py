"""The lean routes: :class:`LeanRoutes`, an ASGI middleware that answers the hottest routes itself.

A ``POST /query`` passes through about a dozen ASGI layers before its endpoint runs (the early
auth check, the exception middleware, the exit stack, the router, per-route body limits,
dependency solving, a content-type parse with ``email.message``): about a third of the master's
CPU per one-tool query in the benchmark (``bench/``). :class:`LeanRoutes` is the outermost of
the app's own middleware (only FastAPI's error, telemetry and body-limit layers wrap it; a test
pins the stack) and answers the routes in its table directly in the plain case: a JSON body
within the size limit, a caller whose role holds the route's permission, no FastAPI request
telemetry on the request, and a handler that accepts it. The bootstrap key
(``OPENAGENT_API_KEY``) is compared in memory first (constant time, no Redis); another key or a
JWT is resolved as every route resolves it (:class:`master.access.Authenticator`). Anything else,
or a handler that declines (say, a body that does not validate), goes on to the rest of the stack
with the body replayed, so every error answer (401, 403, 413, 422...) is the route's own. The
routes stay declared as usual, for the OpenAPI document.

:class:`JsonDepthGuard` answers 400 to a body nested deeper than
:data:`master.storage.json_bytes.MAX_JSON_DEPTH`, for every door (each in its own error shape: a JSON-RPC
parse error on ``/mcp`` and ``/a2a``, OpenAI's on ``/v1``), so that no door's JSON parser meets
such a body; it sits just inside the access check (a body is read only for a caller who may use
the route), and the lean routes decline such a body to it.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from master.access.middleware import Refusal
from master.access.permissions import KEYLESS, Permission, permits
from master.auth import BOOTSTRAP_ADMIN, key_matches, presented_key, set_principal
from master.errors import SessionStoreUnavailable
from master.errors.responses import error_response
from master.storage.json_bytes import MAX_JSON_DEPTH, too_deep
from protocol.errors import ErrorCode

logger = logging.getLogger("master.asgi")

LeanHandler = Callable[[Any, "LeanRequest", Send], Awaitable[bool]]
"""``(services, request, send)``: answers and returns True, or returns False having sent nothing."""

_WANTED = frozenset((b"content-length", b"content-type", b"accept"))
TELEMETRY_SCOPE_KEY = "fastapi.telemetry"
"""Set (not ``None``) in the scope of a request FastAPI's own telemetry observes: the full stack
serves it then, so its span and metrics name the route."""


class LeanRequest:
    """What a lean handler gets: the scope, the whole body and the headers it may need."""

    __slots__ = ("accept", "body", "scope")

    def __init__(self, scope: Scope, body: bytes, accept: str) -> None:
        self.scope = scope
        self.body = body
        self.accept = accept


def _json_type(value: bytes) -> bool:
    """``application/json``, with parameters or not (what the lean path accepts)."""
    media = value.split(b";", 1)[0].strip().lower()
    return media == b"application/json"


class LeanRoutes:
    """Answers ``routes`` (``(method, path)`` → handler and the route's permission) without the
    rest of the stack (module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        routes: Mapping[tuple[str, str], tuple[LeanHandler, Permission]],
        api_key: str | None,
        max_body_size: int | None,
    ) -> None:
        self.app = app
        self.routes = dict(routes)
        self._api_key = api_key
        self._max_body = max_body_size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            lean = self.routes.get((scope["method"], scope["path"]))
            services = getattr(scope["app"].state, "services", None) if lean is not None else None
            if lean is not None and services is not None and scope.get(TELEMETRY_SCOPE_KEY) is None:
                rest = await self._lean(*lean, services, scope, receive, send)
                if rest is None:
                    return
                receive = rest
        await self.app(scope, receive, send)

    async def _lean(
        self,
        handler: LeanHandler,
        permission: Permission,
        services: Any,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> Receive | None:
        """Answer through ``handler``; ``None`` when done, else the ``receive`` for the full stack."""
        found: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            if name in _WANTED and name not in found:  # the first of each, as Starlette's Headers.get
                found[name] = value
        length: int | None = None
        if b"content-length" in found:
            try:
                length = int(found[b"content-length"])
            except ValueError:
                return receive
        limit = self._max_body
        if not _json_type(found.get(b"content-type", b"")) or (
            limit is not None and length is not None and length > limit
        ):
            return receive
        if permission not in KEYLESS and not await self._admitted(services, scope, permission):
            return receive  # the full stack answers 401, 403 or 503
        messages: list[Message] = []
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                return _replay(messages, receive)
            chunk = message.get("body", b"")
            size += len(chunk)
            if limit is not None and size > limit:
                return _replay(messages, receive)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if too_deep(body):  # JsonDepthGuard, inside, answers it
            return _replay(messages, receive)
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        # A handler that raises is answered 500 by Starlette's ServerErrorMiddleware, outside this one.
        accept = found.get(b"accept", b"").decode("latin-1")
        if await handler(services, LeanRequest(scope, body, accept), tracked):
            return None
        if started:  # pragma: no cover - a handler that declines must not have sent anything
            raise RuntimeError("a lean handler declined after starting its response")
        return _replay(messages, receive)

    async def _admitted(self, services: Any, scope: Scope, permission: Permission) -> bool:
        """Whether the caller may use the route, its principal attached; the bootstrap key first."""
        if self._api_key is None or key_matches(self._api_key, presented_key(scope)):
            set_principal(scope, BOOTSTRAP_ADMIN)
            return True
        access = getattr(services, "access", None)
        if access is None:
            return False
        try:
            principal = await access.resolve(scope)
        except SessionStoreUnavailable:
            return False
        if principal is None or not permits(principal, permission):
            return False
        set_principal(scope, principal)
        return True


TOO_DEEP = f"the body is JSON nested deeper than {MAX_JSON_DEPTH} levels"
JSON_RPC_PARSE_ERROR = -32700
_BODILESS = frozenset(("GET", "HEAD", "OPTIONS"))
_FORMS = (b"multipart/form-data", b"application/x-www-form-urlencoded")


class JsonDepthGuard:
    """Refuses an HTTP body nested deeper than :data:`MAX_JSON_DEPTH` with 400, before any route
    or door parses it (module docstring): ``jsonrpc_paths`` (prefixes) get a JSON-RPC parse error,
    ``refusal`` a door's own shape for its paths, the rest ``invalid_body``. Forms (uploads) pass:
    no door reads them as JSON."""

    def __init__(
        self, app: ASGIApp, *, refusal: Refusal | None = None, jsonrpc_paths: tuple[str, ...] = ()
    ) -> None:
        self.app = app
        self._refusal = refusal
        self._jsonrpc = jsonrpc_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in _BODILESS or _is_form(scope):
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        chunks: list[bytes] = []
        while True:
            try:
                message = await receive()
            except Exception as exc:  # over the body limit: the route's own handlers answer it
                await self.app(scope, _replay(messages, _raising(exc)), send)
                return
            messages.append(message)
            if message["type"] != "http.request":  # the client went away: the route sees it
                await self.app(scope, _replay(messages, receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if too_deep(body):
            await self._refuse(scope, send)
            return
        whole: Message = {"type": "http.request", "body": body, "more_body": False}
        await self.app(scope, _replay([whole], receive), send)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        path = str(scope.get("path", ""))
        response: Response | None
        if path.startswith(self._jsonrpc):
            response = JSONResponse(
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": JSON_RPC_PARSE_ERROR, "message": f"Parse error: {TOO_DEEP}"},
                },
                status_code=400,
            )
        else:
            response = self._refusal(scope, ErrorCode.INVALID_BODY, TOO_DEEP) if self._refusal else None
            if response is None:
                response = error_response(ErrorCode.INVALID_BODY, TOO_DEEP)
        logger.info("%s %s refused: %s", scope["method"], path, TOO_DEEP)
        await send_response(send, response)


def _raising(exc: Exception) -> Receive:
    """A ``receive`` that raises ``exc`` again (where the route reads the body)."""

    async def receive() -> Message:
        raise exc

    return receive


def _is_form(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower() in _FORMS
    return False


async def send_response(send: Send, response: Response) -> None:
    """Send a Starlette response built by a lean handler (headers as Starlette makes them)."""
    await send(
        {"type": "http.response.start", "status": response.status_code, "headers": response.raw_headers}
    )
    await send({"type": "http.response.body", "body": response.body})


_JSON_TYPE = (b"content-type", b"application/json")


async def send_json(send: Send, content: Any) -> None:
    """``200`` with ``content`` as Starlette's ``JSONResponse`` sends it (the same bytes and
    headers), without building the response object."""
    body = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    headers = [(b"content-length", str(len(body)).encode()), _JSON_TYPE]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that gives ``messages`` again, then the connection's own."""
    pending = deque(messages)

    async def replayed() -> Message:
        if pending:
            return pending.popleft()
        return await receive()

    return replayed
