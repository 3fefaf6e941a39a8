"""The master's Redis client.

- A connection error or timeout is retried once, on a fresh connection: after a Redis
  restart, the pooled connections are stale, and the first command on each would fail.
- The pool is bounded and *blocking*: under a burst, a command waits (up to
  ``POOL_WAIT_SECONDS``) for a free connection instead of failing with "No connection available".
"""

from __future__ import annotations

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError, TimeoutError

MAX_CONNECTIONS = 64
POOL_WAIT_SECONDS = 10.0


def create_redis(
    url: str,
    *,
    decode_responses: bool = True,
    max_connections: int = MAX_CONNECTIONS,
    pool_wait_seconds: float = POOL_WAIT_SECONDS,
) -> aioredis.Redis:
    """A client whose pool waits (bounded) for a free connection, retrying a dropped connection once.

    ``decode_responses=False`` gives bytes (attachment blobs)."""
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=pool_wait_seconds,
        decode_responses=decode_responses,
        socket_connect_timeout=2.0,
        socket_timeout=5.0,
        retry=Retry(NoBackoff(), retries=1, supported_errors=(ConnectionError, TimeoutError)),
    )
    return aioredis.Redis.from_pool(pool)  # the client owns the pool: aclose() closes it
