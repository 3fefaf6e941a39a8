"""Who is calling: :class:`Principal` and :class:`Role`, the bootstrap key and its constant-time check.

When ``OPENAGENT_API_KEY`` is set, every HTTP endpoint but the open ones (``GET /health``,
``/ready``, the API docs; the agents' per-call-token routes) needs ``Authorization: Bearer <key>``
(401 otherwise) and every ``/ws`` connection needs the same header or ``?token=<key>`` (closed
with 1008 otherwise). The key is that bootstrap key, a stored key or a JWT
(:mod:`master.access` resolves them, and checks each route's permission against the role).

Defaults fail closed: a request nothing resolved is :data:`ANONYMOUS` (no permission, no
tenant's records), never the administrator; the master's own work (sweeps, resumes, start-up)
names :data:`SYSTEM`. What a caller may read of the tenant-owned stores is a :class:`Scope`, made
only from a principal (or, on a system path, for one named tenant): the stores take it as a
required argument and filter inside (:class:`TenantRecords`), so no route or door compares
tenants itself.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Final

from starlette.datastructures import QueryParams
from starlette.responses import JSONResponse
from starlette.types import Scope as ASGIScope

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
    tasks) are owned by its ``tenant``; :meth:`Scope.of` says which of them it may read.
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
    resolved: bool = True
    """False for :data:`ANONYMOUS` only: nothing resolved the caller, so no role applies
    (:func:`master.access.permits` grants it the keyless permissions only)."""

    @property
    def is_admin(self) -> bool:
        return self.resolved and self.role is Role.ADMIN


_NO_TENANT: Final = "(anonymous)"
"""The tenant of :data:`ANONYMOUS`: not a valid tenant name, so it owns and sees nothing."""

BOOTSTRAP_ADMIN = Principal(key_id="bootstrap", name="OPENAGENT_API_KEY", role=Role.ADMIN)
"""The holder of ``OPENAGENT_API_KEY``, and everyone when no key is set (auth off: the access
middleware attaches it explicitly)."""

SYSTEM = Principal(key_id="system", name="the master itself", role=Role.ADMIN)
"""The master's own in-process work (sweeps, resumes, start-up, internal routes), passed
explicitly: an administrator's view, never a default."""

ANONYMOUS = Principal(
    key_id="anonymous", name="(no key resolved)", role=Role.VIEWER, tenant=_NO_TENANT, resolved=False
)
"""Who a caller is when nothing resolved it: no permission but the keyless ones, no tenant's records."""


class Scope:
    """Which tenants' records a read, list or delete of a tenant-owned store may see: one
    tenant's, or every tenant's.

    Made only by :meth:`of` (every tenant for an administrator's principal, its own tenant for
    any other, none for :data:`ANONYMOUS`) or :meth:`for_tenant` (a system path acting for a
    known tenant): there is no public way to make "every tenant" from nothing. A record with no
    owner recorded (made before tenants) is ``default``'s.
    """

    __slots__ = ("_tenant",)

    _tenant: str | None

    def __init__(self, _mint: object, tenant: str | None) -> None:
        if _mint is not _MINT:
            raise TypeError("a Scope is made with Scope.of(principal) or Scope.for_tenant(name)")
        self._tenant = tenant

    @staticmethod
    def of(principal: Principal) -> Scope:
        """What ``principal`` may see: every tenant for an administrator, its own tenant otherwise."""
        if not isinstance(principal, Principal):
            raise TypeError(f"Scope.of needs a Principal, not {type(principal).__name__}")
        return Scope(_MINT, None if principal.is_admin else principal.tenant)

    @staticmethod
    def for_tenant(tenant: str | None) -> Scope:
        """One tenant's records (``None``: ``default``'s), for a system path acting for it."""
        return Scope(_MINT, tenant or DEFAULT_TENANT)

    @property
    def tenant(self) -> str | None:
        """The one tenant seen, or ``None`` for every tenant."""
        return self._tenant

    @property
    def every_tenant(self) -> bool:
        return self._tenant is None

    @property
    def sees_nothing(self) -> bool:
        """:data:`ANONYMOUS`'s: no tenant's records (the shared agents stay on offer: a public card)."""
        return self._tenant == _NO_TENANT

    def sees(self, owner_tenant: str | None) -> bool:
        """Whether a record owned by ``owner_tenant`` (``None``: ``default``) is in this scope."""
        return self._tenant is None or (owner_tenant or DEFAULT_TENANT) == self._tenant

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Scope) and other._tenant == self._tenant

    def __hash__(self) -> int:
        return hash((Scope, self._tenant))

    def __repr__(self) -> str:
        return "Scope(every tenant)" if self._tenant is None else f"Scope(tenant={self._tenant!r})"


_MINT: Final = object()


ScopeWatcher = Callable[["TenantRecords", str, Scope], None]


class TenantRecords:
    """The base of the stores of tenant-owned records (sessions, runs, approvals, attachments,
    collaborations, A2A tasks, the agent directory).

    Their reads, lists and deletes take a required :class:`Scope` and filter through
    :meth:`_scoped` and :meth:`_sees`, the one place a tenant is compared: a call without a
    ``Scope`` (a forgotten argument, ``None``, a tenant name) raises ``TypeError`` rather than
    reading every tenant's records. ``watchers`` see each scoped call (a test that walks every
    handler records what each one passed).
    """

    watchers: ClassVar[list[ScopeWatcher]] = []

    def _scoped(self, what: str, scope: Scope) -> Scope:
        """``scope``, checked to be one (``what``: the method, for the error and the watchers)."""
        if not isinstance(scope, Scope):
            raise TypeError(
                f"{type(self).__name__}.{what} needs a Scope (Scope.of(principal)), not {scope!r}"
            )
        for watch in TenantRecords.watchers:
            watch(self, what, scope)
        return scope

    def _sees(self, what: str, scope: Scope, owner_tenant: str | None) -> bool:
        """Whether ``scope`` sees a record owned by ``owner_tenant`` (``None``: ``default``)."""
        return self._scoped(what, scope).sees(owner_tenant)


def principal_of(scope: ASGIScope) -> Principal:
    """The principal resolved for ``scope`` by the access middleware, or :data:`ANONYMOUS` when
    none was (fail closed: the middleware attaches the bootstrap administrator itself when auth
    is off; in-process callers pass :data:`SYSTEM` explicitly)."""
    return resolved_principal(scope) or ANONYMOUS


def resolved_principal(scope: ASGIScope) -> Principal | None:
    """The principal the auth middleware resolved for ``scope``, or ``None`` when none was (fail closed)."""
    state = scope.get("state")
    found = state.get("principal") if isinstance(state, dict) else None
    return found if isinstance(found, Principal) else None


def set_principal(scope: ASGIScope, principal: Principal) -> None:
    """Attach ``principal`` to ``scope`` (and so to ``request.state.principal``)."""
    scope.setdefault("state", {})["principal"] = principal


def presented_key(scope: ASGIScope) -> str | None:
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
