"""Collaboration documents in Redis (see :mod:`master.storage.redis_keys`).

``collab:{collab_session_id}`` holds one JSON object: the session's metadata, then
``entries`` (``handshake``, ``message``, ``end``), always as the **last key**, so the
stored text always ends with ``]}``. Appending an entry is then a string splice done
by a small Lua script, one round trip per relayed message, with no JSON decoding in
Redis (cjson would turn an empty ``{}`` or ``[]`` inside an entry into the other).
The first write and the final one (metadata updated at the end) are plain ``SET``\\ s
of the whole document in a transaction with the ``collab:by_parent:{id}`` SET.

A document keeps the tenant that owns it (``tenant``; none: ``default``): the reads take the
asker's :class:`~master.auth.Scope` and another tenant's document is not there for it.
"""

from __future__ import annotations

import json
from typing import Any, cast

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from master.auth import Scope, TenantRecords
from master.errors import SessionStoreUnavailable
from master.storage.redis_keys import collab_by_parent_key, collab_key

Document = dict[str, Any]
Entry = dict[str, Any]

# KEYS[1] = collab:{id}; ARGV[1] = the entry as JSON; ARGV[2] = TTL. Returns 0 when the
# document is gone (expired): an append never creates a document without its metadata.
_APPEND = """
local current = redis.call('GET', KEYS[1])
if not current then
  return 0
end
local head = string.sub(current, 1, -3)
local value
if string.sub(current, -3) == '[]}' then
  value = head .. ARGV[1] .. ']}'
else
  value = head .. ',' .. ARGV[1] .. ']}'
end
redis.call('SET', KEYS[1], value, 'EX', ARGV[2])
return 1
"""


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


def dump_document(document: Document) -> str:
    """The document as stored: metadata first, ``entries`` last (the splice relies on it)."""
    metadata = {key: value for key, value in document.items() if key != "entries"}
    return _compact({**metadata, "entries": list(document.get("entries", []))})


class CollabStore(TenantRecords):
    """Create, append to, finalize and read collaboration documents."""

    def __init__(self, redis: aioredis.Redis, *, ttl_seconds: int) -> None:
        self._redis = redis
        self._ttl = ttl_seconds
        self._append = redis.register_script(_APPEND)

    async def save(self, document: Document) -> None:
        """Write the whole document and index it under its parent session (refreshing both TTLs)."""
        collab_session_id = str(document["collab_session_id"])
        parent = document.get("parent_session_id")
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.set(collab_key(collab_session_id), dump_document(document), ex=self._ttl)
                if parent:
                    pipe.sadd(collab_by_parent_key(str(parent)), collab_session_id)
                    pipe.expire(collab_by_parent_key(str(parent)), self._ttl)
                await pipe.execute()
        except RedisError as exc:
            raise SessionStoreUnavailable(f"collaboration store unavailable (Redis): {exc}") from exc

    async def append(self, collab_session_id: str, entry: Entry) -> bool:
        """Append one entry; False when the document no longer exists."""
        try:
            written = await self._append(
                keys=[collab_key(collab_session_id)], args=[_compact(entry), self._ttl]
            )
        except RedisError as exc:
            raise SessionStoreUnavailable(f"collaboration store unavailable (Redis): {exc}") from exc
        return bool(written)

    async def load(self, collab_session_id: str, scope: Scope) -> Document | None:
        """The stored document, or ``None`` when unknown, expired or not seen by ``scope``."""
        self._scoped("load", scope)
        try:
            raw = await self._redis.get(collab_key(collab_session_id))
        except RedisError as exc:
            raise SessionStoreUnavailable(f"collaboration store unavailable (Redis): {exc}") from exc
        document = None if raw is None else cast(Document, json.loads(raw))
        return document if document is not None and scope.sees(document.get("tenant")) else None

    async def for_parent(self, parent_session_id: str, scope: Scope) -> list[str]:
        """Ids of the collaborations started from an orchestrator session that ``scope`` sees, sorted."""
        self._scoped("for_parent", scope)
        try:
            members = await self._redis.smembers(collab_by_parent_key(parent_session_id))
            ids = sorted(str(member) for member in members)
            if scope.every_tenant or not ids:
                return ids
            documents = await self._redis.mget([collab_key(i) for i in ids])
        except RedisError as exc:
            raise SessionStoreUnavailable(f"collaboration store unavailable (Redis): {exc}") from exc
        return [
            i
            for i, raw in zip(ids, documents, strict=True)
            if raw is not None and scope.sees(json.loads(raw).get("tenant"))
        ]
