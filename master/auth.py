"""API-key authentication for HTTP routes and WebSocket connections: one check, :func:`authorized`.

When ``OPENAGENT_API_KEY`` is set, every HTTP endpoint but the open ones (``GET /health``,
``/ready``, the API docs; the agents' per-call-token routes) needs ``Authorization: Bearer <key>``
(401 otherwise) and every ``/ws`` connection needs the same header or ``?token=<key>`` (closed
with 1008 otherwise).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from starlette.datastructures import QueryParams
from starlette.responses import JSONResponse, Response
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from protocol.errors import ErrorCode


class Role(StrEnum):
    """What a key may do (the roles table of the docs' Security page is generated from the routes)."""

    ADMIN = "admin"
    CLIENT = "client"
    AGENT = "agent"
    VIEWER = "viewer"


DEFAULT_TENANT = "default"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who made a request: the key (or JWT) it presented, its role and its tenant.

    Resolved once per request or WebSocket and kept in ``scope["state"]["principal"]``
    (:func:`principal_of`). Objects a principal creates (sessions, runs, approvals, attachments,
    tasks) are owned by its ``tenant``; :meth:`sees` says whether it may read one.
    """

    key_id: str
    name: str
    role: Role
    tenant: str = DEFAULT_TENANT
    agent_ids: tuple[str, ...] = ()
    """For the ``agent`` role: fnmatch patterns of the agent ids it may register or connect as."""

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN

    def sees(self, owner_tenant: str | None) -> bool:
        """Whether an object owned by ``owner_tenant`` (``None``: made before tenants) is visible."""
        return self.is_admin or (owner_tenant or DEFAULT_TENANT) == self.tenant

    @property
    def tenant_filter(self) -> str | None:
        """The ``tenant`` argument the stores take for this principal: ``None`` (every tenant's
        records) for an administrator, its own tenant otherwise."""
        return None if self.is_admin else self.tenant


BOOTSTRAP_ADMIN = Principal(key_id="bootstrap", name="OPENAGENT_API_KEY", role=Role.ADMIN)
"""The holder of ``OPENAGENT_API_KEY``, and everyone when no key is set (auth off)."""


def principal_of(scope: Scope) -> Principal:
    """The principal resolved for ``scope`` by the auth middleware (the bootstrap admin when auth is
    off or nothing was resolved, e.g. in-process callers)."""
    state = scope.get("state")
    found = state.get("principal") if isinstance(state, dict) else None
    return found if isinstance(found, Principal) else BOOTSTRAP_ADMIN


def set_principal(scope: Scope, principal: Principal) -> None:
    """Attach ``principal`` to ``scope`` (and so to ``request.state.principal``)."""
    scope.setdefault("state", {})["principal"] = principal


def authorized(scope: Scope, api_key: str | None) -> bool:
    """Whether the request or WebSocket of ``scope`` carries ``api_key`` (always True when none is set).

    The one check of the master's key, for every route (:func:`master.deps.require_api_key`),
    :class:`EarlyAuthMiddleware`, the lean routes (:class:`master.asgi.LeanRoutes`) and ``/ws``.
    Accepted: ``Authorization: Bearer <key>`` (the first ``Authorization`` header), and on a
    WebSocket only, when that header carries no bearer key, ``?token=<key>``.
    """
    if api_key is None:
        return True
    return key_matches(api_key, presented_key(scope))


def presented_key(scope: Scope) -> str | None:
    """The key a client presented: the bearer credentials, or a WebSocket's ``?token=``."""
    for name, value in scope["headers"]:
        if name == b"authorization":  # the first one, as Starlette's Headers.get
            header: str = value.decode("latin-1")
            scheme, _, presented = header.partition(" ")
            if scheme.lower() == "bearer" and presented.strip():
                return presented.strip()
            break
    if scope["type"] == "websocket":
        return QueryParams(scope["query_string"].decode("latin-1")).get("token")
    return None


def key_matches(expected: str | None, presented: str | None) -> bool:
    """True when auth is off, or ``presented`` is the key (constant-time comparison)."""
    if expected is None:
        return True
    if presented is None:
        return False
    return secrets.compare_digest(expected.encode(), presented.encode())


UNAUTHORIZED_DETAIL = "missing or invalid API key: send 'Authorization: Bearer <OPENAGENT_API_KEY>'"


def unauthorized() -> JSONResponse:
    """The 401 of every HTTP route without the key (the body of :class:`protocol.ErrorResponse`)."""
    return JSONResponse(
        {"detail": UNAUTHORIZED_DETAIL, "error_code": ErrorCode.UNAUTHORIZED.value},
        status_code=401,
        headers={"WWW-Authenticate": "Bearer"},
    )


class EarlyAuthMiddleware:
    """401 for a protected route before anything reads the request body.

    FastAPI resolves a route's dependencies (the API-key check among them) only after it has read
    and parsed the JSON body, so without the key an unparseable body would get 400/422 rather than
    401. This middleware matches the request against the app's own route table and answers 401
    first for every route that ``protected(route)`` says needs the key; other requests (open
    routes, unknown paths, WebSockets: ``/ws`` checks its key itself) pass through.
    ``unauthorized`` may answer a path in its own shape instead (``/v1``: OpenAI's error body).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        api_key: str | None,
        routes: Callable[[], Sequence[Any]],
        protected: Callable[[Any], bool],
        unauthorized: Callable[[Scope], Response | None] | None = None,
    ) -> None:
        self.app = app
        self._unauthorized = unauthorized
        self._api_key = api_key
        self._routes = routes
        self._protected = protected
        self._table: list[tuple[Any, bool]] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self._api_key is not None and self._needs_key(scope):
            if not authorized(scope, self._api_key):
                own = self._unauthorized(scope) if self._unauthorized is not None else None
                if own is not None:  # a door with its protocol's error body (the OpenAI API's)
                    await own(scope, receive, send)
                    return
                await unauthorized()(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _needs_key(self, scope: Scope) -> bool:
        if self._table is None:  # the routes are complete once the app serves
            self._table = [(route, self._protected(route)) for route in self._routes()]
        partial = False  # the path of a protected route with another method: 401 before 405
        for route, protected in self._table:
            match, _ = route.matches(scope)
            if match == Match.FULL:
                return protected
            partial = partial or (match == Match.PARTIAL and protected)
        return partial
