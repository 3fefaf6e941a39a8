"""API-key authentication for HTTP routes and WebSocket connections.

When ``OPENAGENT_API_KEY`` is set, every HTTP endpoint but ``GET /health`` needs
``Authorization: Bearer <key>`` (401 otherwise) and every ``/ws`` connection
needs the same header or ``?token=<key>`` (closed with 1008 otherwise).
"""

from __future__ import annotations

import secrets

from starlette.requests import HTTPConnection


def presented_key(conn: HTTPConnection, *, allow_query_token: bool) -> str | None:
    """The key a client presented, from the Authorization header (or ``?token=`` for WebSockets)."""
    header = conn.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    if allow_query_token:
        return conn.query_params.get("token")
    return None


def key_matches(expected: str | None, presented: str | None) -> bool:
    """True when auth is off, or ``presented`` is the key (constant-time comparison)."""
    if expected is None:
        return True
    if presented is None:
        return False
    return secrets.compare_digest(expected.encode(), presented.encode())
