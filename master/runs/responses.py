"""Stored responses of the OpenAI Responses API (``POST /v1/responses``) in the master's Redis.

:class:`ResponseStore` keeps each response object with its tenant, run, session and holding
master (``openai_response:{id}``, :mod:`master.storage.redis_keys`), so ``previous_response_id``,
``GET``, ``DELETE`` and ``cancel`` answer on any master of a cluster. The door that reads and
writes it is :class:`master.doors.openai.responses.ResponsesDoor`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from master.auth import Scope, TenantRecords
from master.errors import SessionStoreUnavailable
from master.storage.redis_keys import openai_response_key

# Writes a response's record unless it is already cancelled (a cancel from any master wins over
# the run's own end); with ARGV[3] = "cancel", only while it is queued or in progress.
# KEYS: record; ARGV: JSON, TTL seconds, mode. Returns the stored status after the call.
_WRITE = """
local raw = redis.call('GET', KEYS[1])
if raw then
  local was = cjson.decode(raw)
  local status = was.response and was.response.status or ''
  if status == 'cancelled' then return status end
  if ARGV[3] == 'cancel' and status ~= 'queued' and status ~= 'in_progress' then return status end
elseif ARGV[3] == 'cancel' then
  return ''
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', tonumber(ARGV[2]))
return cjson.decode(ARGV[1]).response.status
"""


class ResponseStore(TenantRecords):
    """Stored responses in Redis (``openai_response:{id}``): the response object with its tenant,
    run, session and holding master (tenant-owned: read and deleted in a caller's scope)."""

    def __init__(self, redis: aioredis.Redis, *, ttl_seconds: int, timeout_seconds: float) -> None:
        self._redis = redis
        self._ttl = ttl_seconds
        self._timeout = timeout_seconds
        self._write = redis.register_script(_WRITE)

    async def put(self, record: dict[str, Any], *, cancel: bool = False) -> str:
        """Write ``record`` (not over a cancelled one; with ``cancel``, only over an unfinished
        one); the status that stands."""
        key = openai_response_key(str(record["response"]["id"]))
        data = json.dumps(record, separators=(",", ":"), default=str)
        try:
            async with asyncio.timeout(self._timeout):
                status = await self._write(keys=[key], args=[data, self._ttl, "cancel" if cancel else "put"])
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"storing the response failed: {exc}") from exc
        return status.decode() if isinstance(status, bytes) else str(status or "")

    async def get(self, response_id: str, scope: Scope) -> dict[str, Any] | None:
        """The record, or ``None`` (unknown, expired, or another tenant's)."""
        try:
            async with asyncio.timeout(self._timeout):
                raw = await self._redis.get(openai_response_key(response_id))
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"reading the response failed: {exc}") from exc
        if raw is None:
            return None
        record: dict[str, Any] = json.loads(raw)
        return record if self._sees("get", scope, record.get("tenant")) else None

    async def delete(self, response_id: str, scope: Scope) -> bool:
        """Forget the response; ``False`` when ``scope`` has no such response."""
        self._scoped("delete", scope)
        if await self.get(response_id, scope) is None:
            return False
        try:
            async with asyncio.timeout(self._timeout):
                await self._redis.delete(openai_response_key(response_id))
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"deleting the response failed: {exc}") from exc
        return True
