"""What each route needs: a :class:`Permission` per route, and the roles that hold each one.

Every HTTP route declares one permission: a FastAPI route with the dependency :func:`requires`
(on the route or its router), a plain Starlette route (the MCP and A2A doors, the docs, the UI)
with a ``permission`` attribute (:func:`mark`). :func:`permission_of` reads either;
:class:`master.access.middleware.AccessMiddleware` enforces it before the body is read, and
``scripts/roles_table.py`` writes the roles table of ``docs/operations/security.md`` from it.
A route that declares none is treated as ``admin`` only, and a test walking the route table fails
on it.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Any

from fastapi import Request

from master.auth import UNAUTHORIZED_DETAIL, Principal, Role, resolved_principal
from master.errors.responses import ApiError
from protocol.errors import ErrorCode


class Permission(StrEnum):
    """What a route or a WebSocket frame needs (each role holds some, :data:`ROLES_WITH`)."""

    OPEN = "open"
    """No key: health, readiness, the API docs, the web UI's files."""
    CALL_TOKEN = "call_token"
    """No key: the per-call token an agent was given (tool callbacks, attachment blobs)."""
    READ = "read"
    """Read-only views: the agents, the catalog, a call's progress."""
    QUERY = "query"
    """Queries through every door, the caller's sessions, runs, approvals and attachments."""
    CONNECT = "connect"
    """``/ws``: connecting at all; each frame then needs ``query`` or ``agent`` (``master.gateway.frames``)."""
    AGENT = "agent"
    """Agents joining the hub: ``/ws`` as an action agent, ``POST /register`` and ``/unregister``."""
    ADMIN = "admin"
    """Keys, the agent builder, YAML agents in the master, workspaces, the sandbox, ``/metrics``."""


ROLES_WITH: dict[Permission, frozenset[Role]] = {
    Permission.OPEN: frozenset(Role),
    Permission.CALL_TOKEN: frozenset(Role),
    Permission.READ: frozenset(Role),
    Permission.QUERY: frozenset({Role.ADMIN, Role.CLIENT}),
    Permission.CONNECT: frozenset({Role.ADMIN, Role.CLIENT, Role.AGENT}),
    Permission.AGENT: frozenset({Role.ADMIN, Role.AGENT}),
    Permission.ADMIN: frozenset({Role.ADMIN}),
}
"""The roles that hold each permission (the docs' table of roles is generated from it)."""

KEYLESS = frozenset({Permission.OPEN, Permission.CALL_TOKEN})
"""Permissions that need no key (the route checks a call token itself, or nothing)."""

_ROLE_ORDER = (Role.ADMIN, Role.CLIENT, Role.AGENT, Role.VIEWER)


def permits(principal: Principal, permission: Permission) -> bool:
    """Whether ``principal``'s role holds ``permission`` (:data:`master.auth.ANONYMOUS`, whom
    nothing resolved, holds the keyless ones only)."""
    if not principal.resolved:
        return permission in KEYLESS
    return principal.role in ROLES_WITH[permission]


def roles_needed(permission: Permission) -> list[str]:
    """The roles holding ``permission``, most specific first (``client``, then ``admin``)."""
    held = ROLES_WITH[permission]
    return [role.value for role in _ROLE_ORDER[1:] + _ROLE_ORDER[:1] if role in held]


def forbidden_message(principal: Principal, permission: Permission, what: str) -> str:
    """The 403 message: what was refused, the role it needs, and the caller's key and role."""
    needed = " or ".join(repr(role) for role in roles_needed(permission))
    return f"{what} needs the role {needed}; key {principal.name!r} has the role {principal.role.value!r}"


PERMISSION_ATTRIBUTE = "permission"


def mark(route: Any, permission: Permission) -> Any:
    """Declare ``permission`` on a plain Starlette route or mount (returns it)."""
    setattr(route, PERMISSION_ATTRIBUTE, permission)
    return route


def requires(permission: Permission) -> Callable[..., Coroutine[Any, Any, None]]:
    """A FastAPI dependency declaring that a route needs ``permission`` (on the route or its router).

    The check itself happens earlier, in :class:`~master.access.middleware.AccessMiddleware`
    (before the body is read); the dependency checks again what that middleware resolved, so a
    route is never served to a caller it did not admit (and with nothing resolved: 401). One
    dependency object per permission, so :func:`permission_of` can read it back from the route.
    """
    return _DEPENDENCIES[permission]


def _dependency(permission: Permission) -> Callable[..., Coroutine[Any, Any, None]]:
    async def dependency(request: Request) -> None:
        if permission in KEYLESS:
            return
        principal = resolved_principal(request.scope)
        if principal is None:
            raise ApiError(
                ErrorCode.UNAUTHORIZED, UNAUTHORIZED_DETAIL, headers={"WWW-Authenticate": "Bearer"}
            )
        if not permits(principal, permission):
            what = f"{request.method} {request.url.path}"
            raise ApiError(ErrorCode.FORBIDDEN, forbidden_message(principal, permission, what))

    dependency.__name__ = f"requires_{permission.value}"
    dependency.permission = permission  # type: ignore[attr-defined]
    return dependency


_DEPENDENCIES = {permission: _dependency(permission) for permission in Permission}


def permission_of(route: Any) -> Permission | None:
    """The permission ``route`` declares: its ``permission`` attribute, else the last
    :func:`requires` among its dependencies (a route's own comes after its router's), else ``None``."""
    marked = getattr(route, PERMISSION_ATTRIBUTE, None)
    if isinstance(marked, Permission):
        return marked
    found: Permission | None = None
    for depends in getattr(route, "dependencies", ()) or ():
        declared = getattr(getattr(depends, "dependency", None), "permission", None)
        if isinstance(declared, Permission):
            found = declared
    return found


def may_act_as(principal: Principal, agent_id: str) -> bool:
    """Whether ``principal`` may register, unregister or connect as ``agent_id``: an administrator
    always, an ``agent`` key when an ``agent_ids`` pattern matches (``fnmatch``, case-sensitive)."""
    if principal.is_admin:
        return True
    return principal.role is Role.AGENT and any(fnmatchcase(agent_id, p) for p in principal.agent_ids)


def agent_id_refused(principal: Principal, agent_id: str) -> str:
    """The message refusing ``principal`` the agent id ``agent_id``."""
    return (
        f"key {principal.name!r} may not act as agent {agent_id!r}: "
        f"its agent_ids patterns are {list(principal.agent_ids)}"
    )
