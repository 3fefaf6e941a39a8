"""Every Redis key pattern the master uses, in one place."""

from __future__ import annotations

SESSION_PREFIX = "session:"
"""``session:{session_id}`` → JSON array of turns (TTL ``REDIS_SESSION_TTL_SECONDS``)."""


def session_key(session_id: str) -> str:
    return f"{SESSION_PREFIX}{session_id}"


AGENT_PREFIX = "agent:"
"""``agent:{agent_id}`` → JSON record of an HTTP invocation agent (TTL ``REDIS_AGENT_TTL_SECONDS``)."""

AGENT_INDEX = "agents:invocation"
"""SET of the ids of registered invocation agents (members whose record expired are pruned on load)."""


def agent_key(agent_id: str) -> str:
    return f"{AGENT_PREFIX}{agent_id}"
