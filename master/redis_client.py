"""The master's Redis client."""

from __future__ import annotations

import redis.asyncio as aioredis

MAX_CONNECTIONS = 64
POOL_WAIT_SECONDS = 5.0


def create_redis(
    url: str, *, decode_responses: bool = True, max_connections: int = MAX_CONNECTIONS
) -> aioredis.Redis:
    """A client whose pool waits (bounded) for a free connection under bursts instead of failing.

    ``decode_responses=False`` gives bytes (attachment blobs)."""
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=POOL_WAIT_SECONDS,
        decode_responses=decode_responses,
        socket_connect_timeout=2.0,
        socket_timeout=5.0,
    )
    return aioredis.Redis.from_pool(pool)  # the client owns the pool: aclose() closes it
