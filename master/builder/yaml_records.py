"""The YAML agents a master started, kept in Redis so that a restarted master starts them again.

Each started agent is stored with its workspace entry (:class:`~openagent.workspace.AgentSpec`,
its handler module among it), the tenant it serves and the loopback port it connected to;
stopping it removes the entry, a master's shutdown keeps it. The entries are the master's own
(``OPENAGENT_MASTER_ID``; ``local`` for a master alone; none are kept by a master of a cluster
without a fixed id), so masters of a cluster do not start each other's agents.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import ValidationError
from redis.asyncio import Redis
from redis.exceptions import RedisError

from master.storage.redis_keys import yaml_agents_key
from openagent.workspace import AgentSpec

logger = logging.getLogger("master.builder.yaml_records")


@dataclass(frozen=True)
class YamlAgentRecord:
    """One agent to start again: what to run, for which tenant, over which loopback port."""

    spec: AgentSpec
    tenant: str
    port: int | None


class YamlAgentRecords:
    """The started YAML agents of one master, in one Redis hash."""

    def __init__(self, redis: Redis, master_name: str) -> None:
        self.redis = redis
        self.key = yaml_agents_key(master_name)

    async def save(self, specs: Iterable[AgentSpec], tenant: str, port: int | None) -> None:
        """Remember these agents as running; a Redis failure is logged (they run all the same)."""
        entries: dict[str | bytes, str | bytes] = {
            spec.agent_id: json.dumps({"spec": spec.model_dump(mode="json"), "tenant": tenant, "port": port})
            for spec in specs
        }
        if not entries:
            return
        try:
            await self.redis.hset(self.key, mapping=entries)  # type: ignore[arg-type]
        except RedisError as exc:
            logger.warning("could not remember the YAML agents %s for a restart: %s", sorted(entries), exc)

    async def forget(self, agent_ids: Iterable[str] | None) -> None:
        """These agents were stopped (every one when ``None``): not started again."""
        try:
            if agent_ids is None:
                await self.redis.delete(self.key)
            elif ids := sorted(set(agent_ids)):
                await self.redis.hdel(self.key, *ids)
        except RedisError as exc:
            logger.warning("could not forget the stopped YAML agents: %s", exc)

    async def load(self) -> list[YamlAgentRecord]:
        """The agents to start again, sorted by id; an unreadable entry is logged and dropped."""
        try:
            raw = await self.redis.hgetall(self.key)
        except RedisError as exc:
            logger.warning("could not read the YAML agents to start again: %s", exc)
            return []
        records = []
        for agent_id, text in sorted(raw.items()):
            try:
                entry = json.loads(text)
                records.append(
                    YamlAgentRecord(
                        AgentSpec.model_validate(entry["spec"]), str(entry["tenant"]), entry["port"]
                    )
                )
            except (ValueError, KeyError, TypeError, ValidationError) as exc:
                logger.warning("dropping the unreadable YAML agent entry %r: %s", agent_id, exc)
                await self.forget([str(agent_id)])
        return records
