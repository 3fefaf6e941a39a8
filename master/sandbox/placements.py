"""Where each sandboxed agent runs, in Redis (``master/storage/redis_keys.py``: ``sandbox:placement:*``).

A placement outlives the master (TTL ``OPENAGENT_K8S_SANDBOX_RUNTIME_TTL``), so a restarted
master still knows which Pod or pool runs an agent, and ``GET /agents`` can show it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Literal

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from master.errors import SessionStoreUnavailable
from master.storage.redis_keys import SANDBOX_INDEX, sandbox_placement_key

PlacementKind = Literal["new_pod", "pool"]


@dataclass(frozen=True)
class Placement:
    """One agent's sandbox workload."""

    agent_id: str
    placement: PlacementKind
    namespace: str
    pod_name: str
    """The agent's own Pod (``new_pod``) or the pool runner Pod (``pool``)."""
    code: str
    master_ws: str
    deployed_at: float
    config_map: str | None = None
    pod_ip: str | None = None
    """The pool runner's address when it was chosen."""
    key_id: str | None = None
    """The agent's own key for the master (role ``agent``), revoked when it is torn down."""

    @classmethod
    def from_json(cls, raw: str | bytes) -> Placement:
        data: dict[str, Any] = json.loads(raw)
        return cls(**data)


class Placements:
    """The placement records, one JSON value per agent plus an index set."""

    def __init__(self, redis: aioredis.Redis, *, ttl_seconds: int) -> None:
        self._redis = redis
        self._ttl = ttl_seconds

    async def save(self, placement: Placement) -> None:
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.set(
                    sandbox_placement_key(placement.agent_id), json.dumps(asdict(placement)), ex=self._ttl
                )
                pipe.sadd(SANDBOX_INDEX, placement.agent_id)
                pipe.expire(SANDBOX_INDEX, self._ttl)
                await pipe.execute()
        except RedisError as exc:
            raise SessionStoreUnavailable(
                f"could not store the placement of {placement.agent_id!r}: {exc}"
            ) from exc

    async def get(self, agent_id: str) -> Placement | None:
        try:
            raw = await self._redis.get(sandbox_placement_key(agent_id))
        except RedisError as exc:
            raise SessionStoreUnavailable(f"could not read the placement of {agent_id!r}: {exc}") from exc
        return Placement.from_json(raw) if raw is not None else None

    async def delete(self, agent_id: str) -> None:
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.delete(sandbox_placement_key(agent_id))
                pipe.srem(SANDBOX_INDEX, agent_id)
                await pipe.execute()
        except RedisError as exc:
            raise SessionStoreUnavailable(f"could not delete the placement of {agent_id!r}: {exc}") from exc

    async def all(self) -> list[Placement]:
        """Every live placement; index members whose record expired are pruned."""
        try:
            agent_ids = sorted(
                member.decode() if isinstance(member, bytes) else str(member)
                for member in await self._redis.smembers(SANDBOX_INDEX)
            )
            if not agent_ids:
                return []
            raws = await self._redis.mget([sandbox_placement_key(a) for a in agent_ids])
            expired = [agent_id for agent_id, raw in zip(agent_ids, raws, strict=True) if raw is None]
            if expired:
                await self._redis.srem(SANDBOX_INDEX, *expired)
        except RedisError as exc:
            raise SessionStoreUnavailable(f"could not read the sandbox placements: {exc}") from exc
        return [Placement.from_json(raw) for raw in raws if raw is not None]
