"""Tool calls waiting for a person: stored in Redis, decided exactly once.

A run that wants a call needing approval pauses (its state is the session's paused run,
:meth:`master.conversation.store.SessionStore.pause`); each held call becomes an approval here:
``approval:{id}`` (what the call is, when it expires), ``approval_decision:{id}`` (set once with
SET NX, so of two deciders exactly one wins) and the session's set of approval ids. Records live
twice the approval TTL, so an expired approval still answers ``expired`` for a while. A pending
approval also sits in one sorted set by ``expires_at`` (:meth:`ApprovalStore.overdue`), which the
expiry sweep reads; each new approval also drops the ids there whose records are gone (expired
a TTL ago), so the set stays bounded while the sweep is off. A person's "approve this tool for
the rest of the session" is a set of tools per session (:meth:`ApprovalStore.remember`). A
record keeps the tenant of the query that made it (``tenant``; none: ``default``): the reads take
the asker's :class:`~master.auth.Scope` (required) and another tenant's approval does not exist
for them.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any, Literal

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from master.auth import Scope, TenantRecords
from master.errors import SessionStoreUnavailable
from master.storage.redis_keys import (
    APPROVALS_EXPIRING_KEY,
    approval_decision_key,
    approval_key,
    session_approvals_key,
    session_approved_tools_key,
)
from protocol import Approval

Decision = Literal["approved", "rejected", "expired"]


class ApprovalStore(TenantRecords):
    """The approvals of paused runs (see the module docstring)."""

    def __init__(
        self,
        redis: aioredis.Redis,
        *,
        ttl_seconds: int,
        timeout_seconds: float = 5.0,
        session_ttl_seconds: int = 86400,
    ) -> None:
        self._redis = redis
        self.ttl_seconds = ttl_seconds
        self._session_ttl = session_ttl_seconds
        self._timeout = timeout_seconds
        self.clock = time.time
        """Unix time now (a test moves it)."""

    @property
    def keep_seconds(self) -> int:
        """How long the records live: twice the TTL (an expired approval still answers)."""
        return 2 * self.ttl_seconds

    async def create(self, approvals: Sequence[Approval], extra: dict[str, dict[str, Any]]) -> None:
        """Store new pending approvals; ``extra[approval_id]`` is kept beside each (call id, schema).

        The sorted set of pending approvals loses, in the same trip, the ids whose records have
        expired (their ``expires_at`` a TTL ago): undecided, and never swept when the sweep is off."""
        try:
            async with asyncio.timeout(self._timeout), self._redis.pipeline(transaction=True) as pipe:
                pipe.zremrangebyscore(APPROVALS_EXPIRING_KEY, "-inf", f"({self.clock() - self.ttl_seconds}")
                for approval in approvals:
                    record = {**approval.model_dump(mode="json"), **extra.get(approval.approval_id, {})}
                    pipe.set(approval_key(approval.approval_id), json.dumps(record), ex=self.keep_seconds)
                    key = session_approvals_key(approval.session_id)
                    pipe.sadd(key, approval.approval_id)
                    pipe.expire(key, self.keep_seconds)
                    pipe.zadd(APPROVALS_EXPIRING_KEY, {approval.approval_id: approval.expires_at})
                await pipe.execute()
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc

    async def record(self, approval_id: str, scope: Scope) -> dict[str, Any] | None:
        """The stored approval with its decision (``status`` as it stands now), or ``None`` (also
        when ``scope`` does not see it: another tenant's query made it)."""
        self._scoped("record", scope)
        record = await self._record(approval_id)
        return record if record is not None and scope.sees(record.get("tenant")) else None

    async def _record(self, approval_id: str) -> dict[str, Any] | None:
        """:meth:`record`, whoever's it is (the callers filter)."""
        try:
            async with asyncio.timeout(self._timeout):
                raw, decision = await self._redis.mget(
                    approval_key(approval_id), approval_decision_key(approval_id)
                )
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc
        if raw is None:
            return None
        record: dict[str, Any] = json.loads(raw)
        if decision is not None:
            record.update(json.loads(decision))
        elif record["expires_at"] <= self.clock():
            record["status"] = "expired"
        return record

    async def get(self, approval_id: str, scope: Scope) -> Approval | None:
        record = await self.record(approval_id, scope)
        return Approval.model_validate(record) if record is not None else None

    async def of_session(self, session_id: str, scope: Scope) -> list[Approval]:
        """The session's approvals that ``scope`` sees, oldest first."""
        self._scoped("of_session", scope)
        try:
            async with asyncio.timeout(self._timeout):
                ids = await self._redis.smembers(session_approvals_key(session_id))
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc
        found = [await self.get(i.decode() if isinstance(i, bytes) else str(i), scope) for i in ids]
        return sorted((a for a in found if a is not None), key=lambda a: (a.created_at, a.approval_id))

    async def pending(self, scope: Scope, limit: int = 500) -> list[Approval]:
        """The approvals ``scope`` sees still waiting for a decision, oldest first (at most
        ``limit``; the sweep's sorted set, by ``expires_at``). Ids found decided or gone leave it;
        expired ones stay for the sweep to end their runs."""
        self._scoped("pending", scope)
        try:
            async with asyncio.timeout(self._timeout):
                ids = await self._redis.zrange(APPROVALS_EXPIRING_KEY, 0, limit - 1)
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc
        found: list[Approval] = []
        stale: list[str] = []
        for raw in ids:
            approval_id = raw.decode() if isinstance(raw, bytes) else str(raw)
            record = await self._record(approval_id)
            if record is None or record["status"] not in ("pending", "expired"):
                stale.append(approval_id)
            elif record["status"] == "pending" and scope.sees(record.get("tenant")):
                found.append(Approval.model_validate(record))
        if stale:
            try:
                async with asyncio.timeout(self._timeout):
                    await self._redis.zrem(APPROVALS_EXPIRING_KEY, *stale)
            except (RedisError, TimeoutError) as exc:
                raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc
        return found

    async def decide(
        self,
        approval_id: str,
        status: Decision,
        *,
        message: str | None = None,
        arguments: dict[str, Any] | None = None,
    ) -> tuple[bool, dict[str, Any]]:
        """Record the decision once (SET NX). Returns ``(won, decision)``: the decision that stands,
        this one when ``won``, else the one that came first."""
        decision = {
            "status": status,
            "message": message,
            "edited_arguments": arguments,
            "decided_at": self.clock(),
        }
        key = approval_decision_key(approval_id)
        try:
            async with asyncio.timeout(self._timeout):
                won = await self._redis.set(key, json.dumps(decision), nx=True, ex=self.keep_seconds)
                if won:
                    await self._redis.zrem(APPROVALS_EXPIRING_KEY, approval_id)
                    return True, decision
                raw = await self._redis.get(key)
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc
        return False, json.loads(raw) if raw is not None else decision

    async def overdue(self, limit: int = 100) -> list[str]:
        """The ids of pending approvals whose ``expires_at`` has passed, oldest first (at most ``limit``)."""
        try:
            async with asyncio.timeout(self._timeout):
                found = await self._redis.zrangebyscore(
                    APPROVALS_EXPIRING_KEY, "-inf", self.clock(), start=0, num=limit
                )
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc
        return [i.decode() if isinstance(i, bytes) else str(i) for i in found]

    async def forget_overdue(self, approval_id: str) -> None:
        """Take ``approval_id`` off the sweep's list (decided, or its record gone)."""
        try:
            async with asyncio.timeout(self._timeout):
                await self._redis.zrem(APPROVALS_EXPIRING_KEY, approval_id)
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc

    async def remember(self, session_id: str, agent_id: str, tool_name: str) -> None:
        """A person approved ``agent_id``'s ``tool_name`` for the rest of ``session_id``."""
        key = session_approved_tools_key(session_id)
        try:
            async with asyncio.timeout(self._timeout), self._redis.pipeline(transaction=True) as pipe:
                pipe.sadd(key, _tool_member(agent_id, tool_name))
                pipe.expire(key, self._session_ttl)
                await pipe.execute()
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc

    async def remembered(self, session_id: str) -> frozenset[tuple[str, str]]:
        """The ``(agent_id, tool_name)`` pairs approved for the rest of ``session_id`` (the set's
        TTL refreshed, so it lives as long as the session is used)."""
        key = session_approved_tools_key(session_id)
        try:
            async with asyncio.timeout(self._timeout), self._redis.pipeline(transaction=False) as pipe:
                pipe.smembers(key)
                pipe.expire(key, self._session_ttl)
                members, _ = await pipe.execute()
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc
        pairs = (json.loads(m) for m in members)
        return frozenset((str(agent), str(tool)) for agent, tool in pairs)


def _tool_member(agent_id: str, tool_name: str) -> str:
    return json.dumps([agent_id, tool_name])
