"""The master's lease and the shared table of which master holds which WebSocket agent.

Every master writes ``cluster:master:{id}`` with a TTL (``OPENAGENT_MASTER_LEASE_SECONDS``)
and refreshes it every third of that. Its WebSocket agents are entries of the hash
``cluster:agents`` (``{agent id}@{master id}`` → master id, tools, metadata), written when an
agent registers and removed when its last replica here leaves (compare-and-delete: only the
entry this master wrote). An agent whose replicas are connected to several masters has an
entry per master: a master calls its own replica first, else one of the others' (each master
picks its own, so that callers spread over them). An entry counts only while its master's
lease lives, so an entry a killed master left behind points nowhere once the lease expires;
any master then deletes it.

Each master keeps an in-memory view of the other masters' agents, re-read when the table's
version counter moved (checked every third of the lease): a query pays no Redis round trip
to see them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import zlib
from collections.abc import Callable
from typing import cast

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from master.agents.registry import LiveAgent, Registry, compile_tools, lookup
from master.agents.remote import RemoteAgent
from master.errors import InvalidToolSchema
from master.storage.redis_keys import (
    CLUSTER_AGENTS,
    CLUSTER_AGENTS_VERSION,
    master_inbox_key,
    master_lease_key,
)
from protocol import ToolSchema

logger = logging.getLogger("master.cluster.directory")

# Deletes field ARGV[1] of KEYS[1] only if it still holds ARGV[2], and bumps the version KEYS[2].
_DELETE_IF_SAME = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('INCR', KEYS[2])
  return 1
end
return 0
"""


class ClusterDirectory:
    """This master's lease, its agents in the shared table, and its view of the others'."""

    def __init__(
        self,
        redis: aioredis.Redis,
        registry: Registry,
        *,
        master_id: str,
        base_url: str,
        lease_seconds: float,
    ) -> None:
        self._redis = redis
        self._registry = registry
        self.master_id = master_id
        self._base_url = base_url
        self._lease = lease_seconds
        self._delete_if_same = redis.register_script(_DELETE_IF_SAME)
        self._written: dict[str, str] = {}
        """This master's entries: field → value."""
        self._changes: asyncio.Queue[tuple[str, LiveAgent]] = asyncio.Queue()
        self._version: str | None = None
        self._entries: dict[str, str] = {}
        self._remote: dict[str, RemoteAgent] = {}
        self._alive: set[str] = {master_id}
        self._tasks: list[asyncio.Task[None]] = []
        self.on_tick: list[Callable[[], None]] = []
        """Called after each heartbeat (the router checks its calls' masters)."""

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        try:
            await self._heartbeat()
        except RedisError as exc:  # the heartbeat loop keeps trying
            logger.warning("cluster heartbeat failed: %s", exc)
        self._registry.listeners.append(self._changed)
        self._tasks = [
            asyncio.create_task(self._beat_forever(), name="cluster-heartbeat"),
            asyncio.create_task(self._write_changes(), name="cluster-agent-writer"),
        ]
        logger.info("cluster member %s (lease %.1f s)", self.master_id, self._lease)

    async def aclose(self) -> None:
        """Leave: stop the heartbeat, remove this master's agents and lease."""
        if self._changed in self._registry.listeners:
            self._registry.listeners.remove(self._changed)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        with contextlib.suppress(RedisError):
            for entry, raw in list(self._written.items()):
                await self._delete_if_same(keys=[CLUSTER_AGENTS, CLUSTER_AGENTS_VERSION], args=[entry, raw])
            await self._redis.delete(master_lease_key(self.master_id))

    # ------------------------------------------------------------------ reads (no Redis)

    @property
    def lease_seconds(self) -> float:
        return self._lease

    def alive(self, master_id: str) -> bool:
        """Whether ``master_id`` (a master holding agents in the table) renewed its lease by the last heartbeat."""
        return master_id in self._alive

    def owner(self, agent_id: str) -> str | None:
        """The other master this one calls for WebSocket agent ``agent_id`` (as of the last
        heartbeat), or ``None``."""
        remote = self._remote.get(agent_id)
        return None if remote is None else remote.master_id

    def remote_agents(self, allowed: set[str] | None = None) -> list[RemoteAgent]:
        """Agents of other live masters, limited to ``allowed`` ids when given (looked up by id)."""
        found = self._remote.values() if allowed is None else lookup(self._remote, allowed)
        return [agent for agent in found if agent.master_id in self._alive]

    # ------------------------------------------------------------------ writes

    def _changed(self, change: str, agent: LiveAgent) -> None:
        self._changes.put_nowait((change, agent))

    async def _write_changes(self) -> None:
        while True:
            change, agent = await self._changes.get()
            try:
                if change == "added":
                    raw = json.dumps(
                        {
                            "master_id": self.master_id,
                            "role": agent.role,
                            "metadata": agent.metadata,
                            "tools": [
                                tool.schema.model_dump(exclude_none=True) for tool in agent.tools.values()
                            ],
                            "connected_at": agent.connected_at,
                            **({"tenant": agent.tenant} if agent.tenant is not None else {}),
                        },
                        separators=(",", ":"),
                        default=str,
                    )
                    entry = entry_field(agent.agent_id, self.master_id)
                    async with self._redis.pipeline(transaction=True) as pipe:
                        pipe.hset(CLUSTER_AGENTS, entry, raw)
                        pipe.incr(CLUSTER_AGENTS_VERSION)
                        await pipe.execute()
                    self._written[entry] = raw
                elif self._registry.get(agent.agent_id) is None:  # removed, and not replaced since
                    entry = entry_field(agent.agent_id, self.master_id)
                    raw = self._written.pop(entry, "")
                    await self._delete_if_same(
                        keys=[CLUSTER_AGENTS, CLUSTER_AGENTS_VERSION], args=[entry, raw]
                    )
            except RedisError as exc:
                logger.warning("could not record agent %s %s in Redis: %s", agent.agent_id, change, exc)

    # ------------------------------------------------------------------ heartbeat

    async def _beat_forever(self) -> None:
        while True:
            await asyncio.sleep(self._lease / 3)
            try:
                await self._heartbeat()
            except RedisError as exc:
                logger.warning("cluster heartbeat failed: %s", exc)
            for callback in self.on_tick:
                callback()

    async def _heartbeat(self) -> None:
        """Renew the lease; re-read the table when it changed; learn which masters live; drop dead entries."""
        info = json.dumps({"base_url": self._base_url, "started": time.time()})
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.set(master_lease_key(self.master_id), info, px=int(self._lease * 1000))
            pipe.expire(master_inbox_key(self.master_id), int(self._lease * 3) + 1)
            pipe.get(CLUSTER_AGENTS_VERSION)
            _, _, version = await pipe.execute()
        if version != self._version:
            self._entries = cast(dict[str, str], await self._redis.hgetall(CLUSTER_AGENTS))
            self._version = version
        owners = {entry: _owner(raw) for entry, raw in self._entries.items()}
        others = sorted({m for m in owners.values() if m and m != self.master_id})
        alive = {self.master_id}
        if others:
            async with self._redis.pipeline(transaction=False) as pipe:
                for master_id in others:
                    pipe.exists(master_lease_key(master_id))
                found = await pipe.execute()
            alive |= {master_id for master_id, exists in zip(others, found, strict=True) if exists}
        self._alive = alive
        self._rebuild(owners)
        for entry, owner in owners.items():
            if owner not in alive:  # a routing entry that outlived its master
                logger.info("dropping agent %s of master %s (lease expired)", entry, owner)
                await self._delete_if_same(
                    keys=[CLUSTER_AGENTS, CLUSTER_AGENTS_VERSION], args=[entry, self._entries[entry]]
                )

    def _rebuild(self, owners: dict[str, str | None]) -> None:
        """The other masters' agents: for an agent held by several, the one this master calls
        (chosen by a hash of this master's id, so that callers spread over the holders)."""
        holders: dict[str, list[tuple[str, str]]] = {}
        for entry, raw in self._entries.items():
            owner = owners[entry]
            if not owner or owner == self.master_id or owner not in self._alive:
                continue
            holders.setdefault(entry.partition("@")[0], []).append((owner, raw))
        remote: dict[str, RemoteAgent] = {}
        for agent_id, held in holders.items():
            held.sort()
            owner, raw = held[zlib.crc32(self.master_id.encode()) % len(held)]
            known = self._remote.get(agent_id)
            if known is not None and known.row.get("_raw") == raw:
                remote[agent_id] = known
                continue
            try:
                row = json.loads(raw)
                tools = compile_tools(agent_id, [ToolSchema.model_validate(t) for t in row.get("tools", [])])
            except (ValueError, InvalidToolSchema) as exc:
                logger.warning("ignoring agent %s of master %s: %s", agent_id, owner, exc)
                continue
            row["_raw"] = raw
            remote[agent_id] = RemoteAgent(
                agent_id,
                owner,
                str(row.get("role", "action")),
                dict(row.get("metadata") or {}),
                tools,
                float(row.get("connected_at") or 0),
                row,
                tenant=str(row["tenant"]) if row.get("tenant") else None,
            )
        self._remote = remote


def entry_field(agent_id: str, master_id: str) -> str:
    """The field of ``cluster:agents`` for ``agent_id``'s replicas on ``master_id``."""
    return f"{agent_id}@{master_id}"


def _owner(raw: str) -> str | None:
    try:
        owner = json.loads(raw).get("master_id")
    except (ValueError, AttributeError):
        return None
    return owner if isinstance(owner, str) else None
