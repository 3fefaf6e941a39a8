"""Every Redis key pattern the master uses, in one place."""

from __future__ import annotations

SESSION_PREFIX = "session:"
"""``session:{session_id}`` → JSON array of turns (TTL ``REDIS_SESSION_TTL_SECONDS``)."""


def session_key(session_id: str) -> str:
    return f"{SESSION_PREFIX}{session_id}"
