"""Who is calling: :class:`Principal` and :class:`Role`, the bootstrap key and its constant-time check.

When ``OPENAGENT_API_KEY`` is set, every HTTP endpoint but the open ones (``GET /health``,
``/ready``, the API docs; the agents' per-call-token routes) needs ``Authorization: Bearer <key>``
(401 otherwise) and every ``/ws`` connection needs the same header or ``?token=<key>`` (closed
with 1008 otherwise). The key is that bootstrap key, a stored key or a JWT
(:mod:`master.access` resolves them, and checks each route's permission against the role).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from enum import StrEnum

from starlette.datastructures import QueryParams
from starlette.responses import JSONResponse
from starlette.types import Scope

from protocol.errors import ErrorCode


class Role(StrEnum):
    """What a key may do (the roles table of the docs' Security page is generated from the routes)."""

    ADMIN = "admin"
    CLIENT = "client"
    AGENT = "agent"
    VIEWER = "viewer"


DEFAULT_TENANT = "default"
TENANT_PATTERN = r"^[A-Za-z0-9_.-]{1,128}$"
"""What a tenant's name may be (a key's ``tenant``, a JWT's tenant claim): never ``*``, never empty."""


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
    approves: tuple[str, ...] = ()
    """fnmatch patterns of the tools (``<agent_id>__<tool>``) whose approvals it decides in its
    tenant (:mod:`master.query.approvals`: who approves)."""

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


def resolved_principal(scope: Scope) -> Principal | None:
    """The principal the auth middleware resolved for ``scope``, or ``None`` when none was (fail closed)."""
    state = scope.get("state")
    found = state.get("principal") if isinstance(state, dict) else None
    return found if isinstance(found, Principal) else None


def set_principal(scope: Scope, principal: Principal) -> None:
    """Attach ``principal`` to ``scope`` (and so to ``request.state.principal``)."""
    scope.setdefault("state", {})["principal"] = principal


def authorized(scope: Scope, api_key: str | None) -> bool:
    """Whether the request or WebSocket of ``scope`` carries ``api_key`` (always True when none is set).

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
