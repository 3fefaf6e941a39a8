"""Two in-memory views of the invocation agents on one Redis (two masters): each follows the
other's registrations and removals through the version counter."""

from __future__ import annotations

import aiohttp
import redis.asyncio as aioredis

from master.agents.invocation import InvocationAgents
from master.agents.registrations import InvocationRegistration
from master.auth import BOOTSTRAP_ADMIN
from protocol import ToolSchema

AGENT_ID = "sync-echo"


async def test_a_registration_and_a_removal_on_one_view_reach_the_other_at_its_next_sync(
    redis_client: aioredis.Redis,
) -> None:
    async with aiohttp.ClientSession() as http:
        a = InvocationAgents(redis_client, http, ttl_seconds=60, health_timeout=1.0)
        b = InvocationAgents(redis_client, http, ttl_seconds=60, health_timeout=1.0)
        await a.reload()
        await b.reload()
        assert await b.sync() is False  # nothing changed since its load: no re-read
        registration = InvocationRegistration(
            agent_id=AGENT_ID,
            invocation_base_url="http://127.0.0.1:9",  # nothing listens: the agent is DOWN, still known
            tools=[ToolSchema(name="echo", parameters={"type": "object"})],
        )
        try:
            await a.register(registration, registrant=BOOTSTRAP_ADMIN)
            assert b.get(AGENT_ID) is None
            assert await b.sync() is True
            known = b.get(AGENT_ID)
            assert known is not None and list(known.tools) == ["echo"]
            assert await b.sync() is False
            assert b.get(AGENT_ID) is known  # an unchanged record keeps its object (and its health)
        finally:
            await a.unregister(AGENT_ID)
        assert await b.sync() is True
        assert b.get(AGENT_ID) is None
