"""The master's Redis client: a dropped connection is retried once, a burst waits for the pool."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from master.conversation.store import SessionStore
from master.redis_client import create_redis
from tests.factories import TEST_REDIS_URL


async def _drop_connections(client: aioredis.Redis, killer: aioredis.Redis) -> None:
    """Close the server side of ``client``'s pooled connection, as a Redis restart does."""
    await killer.client_kill_filter(_id=await client.client_id())


async def test_a_dropped_connection_is_retried_on_a_fresh_one(redis_client: aioredis.Redis) -> None:
    """Defect 2: the first command after a Redis restart used to fail on the stale pooled connection."""
    client = create_redis(TEST_REDIS_URL)
    store = SessionStore(client, ttl_seconds=60)
    try:
        await client.ping()
        await _drop_connections(client, redis_client)
        assert await client.ping() is True
        sid = store.new_session_id()
        await store.append(sid, [{"n": 1}])
        await _drop_connections(client, redis_client)
        assert await store.load(sid) == [{"n": 1}]  # a Lua script over a fresh connection
        await _drop_connections(client, redis_client)
        await store.check()
    finally:
        await client.aclose()


async def test_a_burst_waits_for_a_free_connection(redis_client: aioredis.Redis) -> None:
    """Defect 2: 2,000 commands over a pool of 4 connections all succeed (they queue, none fails)."""
    client = create_redis(TEST_REDIS_URL, max_connections=4)
    try:
        results = await asyncio.gather(*(client.incr("test:burst") for _ in range(2000)))
        assert sorted(results) == list(range(1, 2001))
    finally:
        await redis_client.delete("test:burst")
        await client.aclose()
