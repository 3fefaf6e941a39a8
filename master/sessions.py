"""The session store: conversation turns in Redis.

``session:{session_id}`` holds a JSON array of turns (see the spec's "Session
store"), with TTL ``REDIS_SESSION_TTL_SECONDS`` refreshed on every append.
Appends run as one Lua script, so concurrent queries on one session never lose a
turn and a query costs two round trips (load, append).

An unknown or expired ``session_id`` is refused (HTTP 404, ``unknown_session``)
rather than silently starting an empty conversation: the client then knows the
model has lost the context, and starts a new session by omitting ``session_id``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any, cast

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from master.errors import SessionStoreUnavailable
from master.redis_keys import session_key

Turn = dict[str, Any]

# Appends turns to the JSON array without decoding it: the stored value always ends with ']'.
_APPEND = """
local current = redis.call('GET', KEYS[1])
local value
if not current or current == '[]' then
  value = '[' .. ARGV[1] .. ']'
else
  value = string.sub(current, 1, -2) .. ',' .. ARGV[1] .. ']'
end
redis.call('SET', KEYS[1], value, 'EX', ARGV[2])
return 1
"""


class SessionStore:
    """Load and append conversation turns."""

    def __init__(self, redis: aioredis.Redis, *, ttl_seconds: int) -> None:
        self._redis = redis
        self._ttl = ttl_seconds
        self._append = redis.register_script(_APPEND)

    @staticmethod
    def new_session_id() -> str:
        return str(uuid.uuid4())

    async def load(self, session_id: str) -> list[Turn] | None:
        """The session's turns, or ``None`` when it does not exist (or expired)."""
        try:
            raw = await self._redis.get(session_key(session_id))
        except RedisError as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc
        if raw is None:
            return None
        return cast(list[Turn], json.loads(raw))

    async def append(self, session_id: str, turns: Sequence[Turn]) -> None:
        """Append ``turns`` atomically and refresh the session's TTL."""
        if not turns:
            return
        payload = ",".join(json.dumps(turn, separators=(",", ":"), default=str) for turn in turns)
        try:
            await self._append(keys=[session_key(session_id)], args=[payload, self._ttl])
        except RedisError as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc

    async def delete(self, session_id: str) -> bool:
        """Forget a session; True when it existed."""
        try:
            return bool(await self._redis.delete(session_key(session_id)))
        except RedisError as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc
