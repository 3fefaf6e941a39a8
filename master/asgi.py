"""The master's ASGI entry: a FastAPI app whose hottest route can skip the middleware stack.

A ``POST /query`` passes through about a dozen ASGI layers before its endpoint runs
(FastAPI's telemetry and body-limit wrappers, Starlette's error and exception middleware,
the early auth check, the exit stack, the router, per-route body limits, dependency
solving, a content-type parse with ``email.message``): a third of the master's CPU per
one-tool query in the benchmark (issue 15). :class:`MasterApp` answers the routes
registered in :attr:`MasterApp.lean_routes` directly when the request is the plain case
(JSON body within the size limit, the API key when one is set, FastAPI's own telemetry off:
checked once per lifespan, in which the master sets up tracing)
and the handler accepts it. Anything else, or a handler that declines (say, a body that does
not validate), goes through the full stack with the body replayed, so every error answer
(401, 403, 413, 422...) is FastAPI's own. The routes stay declared as usual, for the
OpenAPI document.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from master.auth import key_matches

logger = logging.getLogger("master.asgi")

LeanHandler = Callable[[Any, "LeanRequest", Send], Awaitable[bool]]
"""``(services, request, send)``: answers and returns True, or returns False having sent nothing."""

_WANTED = frozenset((b"content-length", b"content-type", b"accept", b"authorization"))
_INTERNAL_ERROR = [(b"content-length", b"21"), (b"content-type", b"text/plain; charset=utf-8")]


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


class MasterApp(FastAPI):
    """FastAPI, plus the lean path for :attr:`lean_routes` (see the module docstring)."""

    def __init__(self, *args: Any, max_body_size: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, max_body_size=max_body_size, **kwargs)
        self.lean_routes: dict[tuple[str, str], LeanHandler] = {}
        """``(method, path)`` → handler."""
        self.lean_api_key: str | None = None
        """The key a lean request must carry (``OPENAGENT_API_KEY``); without it, the full stack answers."""
        self._lean_max_body = max_body_size
        self._telemetry_checked: object = None
        self._telemetry_on = False
        """Whether FastAPI's own telemetry (request spans or metrics) is on: the full stack serves then."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.lean_routes:
            handler = self.lean_routes.get((scope["method"], scope["path"]))
            if handler is not None and not scope.get("root_path") and not self.root_path:
                rest = await self._lean(handler, scope, receive, send)
                if rest is None:
                    return
                receive = rest
        await super().__call__(scope, receive, send)

    def lean_available(self) -> bool:
        """Whether the lean path serves now: the lifespan has run and FastAPI's own telemetry is off
        (checked once per lifespan, which is where the master sets up tracing)."""
        services = getattr(self.state, "services", None)
        if services is None:
            return False
        if self._telemetry_checked is not services:
            telemetry = getattr(self, "_native_telemetry", None)
            self._telemetry_on = telemetry is not None and bool(telemetry.enabled())
            self._telemetry_checked = services
        return not self._telemetry_on

    async def _lean(self, handler: LeanHandler, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """Answer through ``handler``; ``None`` when done, else the ``receive`` for the full stack."""
        services = getattr(self.state, "services", None)
        if services is None or not self.lean_available():
            return receive
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
        json_body = _json_type(found.get(b"content-type", b""))
        accept = found.get(b"accept", b"").decode("latin-1")
        scheme, _, presented = found.get(b"authorization", b"").decode("latin-1").partition(" ")
        key = presented.strip() if scheme.lower() == "bearer" and presented.strip() else None
        limit = self._lean_max_body
        if not json_body or (limit is not None and length is not None and length > limit):
            return receive
        if not key_matches(self.lean_api_key, key):
            return receive
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
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            if await handler(services, LeanRequest(scope, body, accept), tracked):
                return None
        except Exception:
            # As Starlette's ServerErrorMiddleware: a plain 500 if nothing was sent, then the server logs it.
            if not started:
                await send({"type": "http.response.start", "status": 500, "headers": _INTERNAL_ERROR})
                await send({"type": "http.response.body", "body": b"Internal Server Error"})
            raise
        if started:  # pragma: no cover - a handler that declines must not have sent anything
            raise RuntimeError("a lean handler declined after starting its response")
        return _replay(messages, receive)


async def send_response(send: Send, response: Response) -> None:
    """Send a Starlette response built by a lean handler (headers as Starlette makes them)."""
    await send(
        {"type": "http.response.start", "status": response.status_code, "headers": response.raw_headers}
    )
    await send({"type": "http.response.body", "body": response.body})


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that gives ``messages`` again, then the connection's own."""
    pending = deque(messages)

    async def replayed() -> Message:
        if pending:
            return pending.popleft()
        return await receive()

    return replayed
