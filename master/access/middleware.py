"""401 and 403 before a route reads its body: :class:`AccessMiddleware`.

FastAPI resolves a route's dependencies only after it has read and parsed the JSON body, so a
check in a dependency alone would answer an unparseable body 400/422, and a refused request
would have been read. This middleware matches each HTTP request against the app's own route
table, reads the :class:`~master.access.permissions.Permission` the route declares, resolves
the caller (:class:`~master.access.authenticator.Authenticator`) and answers 401 (no valid
credentials), 403 (the role does not hold the permission; the message names the role needed) or
503 (a stored key cannot be checked: Redis down) before anything reads the body; otherwise it
attaches the principal to the scope (:func:`master.auth.set_principal`) for the route. Routes
that need no key pass untouched; a route that declares nothing is treated as ``admin`` (and a
test fails on it). WebSockets pass through: ``/ws`` resolves its caller itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from starlette.responses import Response
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from master.access.authenticator import Authenticator
from master.access.permissions import KEYLESS, Permission, forbidden_message, permission_of, permits
from master.auth import (
    BOOTSTRAP_ADMIN,
    UNAUTHORIZED_DETAIL,
    Principal,
    key_matches,
    presented_key,
    resolved_principal,
    set_principal,
)
from master.errors import SessionStoreUnavailable
from master.errors.responses import error_response
from protocol.errors import ErrorCode

Refusal = Callable[[Scope, ErrorCode, str], Response | None]
"""A door's own error body for a path (the OpenAI API's), or ``None`` for the usual one."""

_AUTHENTICATED = object()
"""For a path whose routes take other methods: credentials are checked (401 before 405), no role."""


def refusal_response(scope: Scope, code: ErrorCode, message: str, door: Refusal | None = None) -> Response:
    """The 401/403/503 answer: the door's shape for its paths, else ``{"detail", "error_code"}``."""
    own = door(scope, code, message) if door is not None else None
    if own is not None:
        return own
    headers = {"WWW-Authenticate": "Bearer"} if code is ErrorCode.UNAUTHORIZED else None
    return error_response(code, message, headers=headers)


class AccessMiddleware:
    """Enforces each route's permission before its body is read (module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        api_key: str | None,
        routes: Callable[[], Sequence[Any]],
        refusal: Refusal | None = None,
    ) -> None:
        self.app = app
        self._api_key = api_key
        self._routes = routes
        self._refusal = refusal
        self._table: list[tuple[Any, Permission]] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and resolved_principal(scope) is None:
            answer = await self._admit(scope)
            if answer is not None:
                await answer(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _admit(self, scope: Scope) -> Response | None:
        """``None`` to serve the request (principal attached), else the refusal."""
        needed = self._permission(scope)
        if needed is None or needed in KEYLESS:
            return None
        principal: Principal | None = None
        if self._api_key is None or key_matches(self._api_key, presented_key(scope)):
            principal = BOOTSTRAP_ADMIN  # in memory, constant time: no Redis for the bootstrap key
        else:
            services = getattr(scope["app"].state, "services", None)
            authenticator: Authenticator | None = getattr(services, "access", None)
            try:
                principal = await authenticator.resolve(scope) if authenticator is not None else None
            except SessionStoreUnavailable as exc:
                return refusal_response(scope, ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc), self._refusal)
        if principal is None:
            return refusal_response(scope, ErrorCode.UNAUTHORIZED, UNAUTHORIZED_DETAIL, self._refusal)
        if isinstance(needed, Permission) and not permits(principal, needed):
            what = f"{scope['method']} {scope['path']}"
            message = forbidden_message(principal, needed, what)
            return refusal_response(scope, ErrorCode.FORBIDDEN, message, self._refusal)
        set_principal(scope, principal)
        return None

    def _permission(self, scope: Scope) -> Permission | object | None:
        """The permission of the route ``scope`` matches; :data:`_AUTHENTICATED` for a path whose
        routes take other methods (unless all of them are keyless); ``None``: no route (404)."""
        if self._table is None:  # the routes are complete once the app serves
            self._table = [(route, permission_of(route) or Permission.ADMIN) for route in self._routes()]
        partial = False
        for route, permission in self._table:
            match, _ = route.matches(scope)
            if match == Match.FULL:
                return permission
            partial = partial or (match == Match.PARTIAL and permission not in KEYLESS)
        return _AUTHENTICATED if partial else None
