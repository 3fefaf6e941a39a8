"""The master's Redis client.

- A connection error or timeout is retried once, on a fresh connection: after a Redis
  restart, the pooled connections are stale, and the first command on each would fail.
- The pool is bounded and *blocking*: under a burst, a command waits (up to
  ``POOL_WAIT_SECONDS``) for a free connection instead of failing with "No connection available".
- :class:`GroupCommit` sends the scripts that concurrent queries run in one event-loop iteration
  (their session appends) as one pipeline: one socket write and one read for all of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError, NoScriptError, TimeoutError
from redis.typing import EncodableT, KeyT

MAX_CONNECTIONS = 64
POOL_WAIT_SECONDS = 10.0

_ScriptCall = tuple[AsyncScript, Sequence[KeyT], Sequence[EncodableT], "asyncio.Future[Any]"]


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


class GroupCommit:
    """One pipeline for the Lua scripts that concurrent tasks start in the same event-loop iteration.

    Under load, many queries finish at once and each writes to Redis (a session append, an
    invocation call's record). :meth:`run` lets the first caller of an iteration yield once
    (``asyncio.sleep(0)``): every task ready in that iteration that calls :meth:`run` meanwhile
    joins it, and the calls go out as one ``EVALSHA`` pipeline (``transaction=False``): one
    pooled connection, one socket write and one read for all of them, instead of one each. Each
    caller still gets its own script's answer or error, and returns only once Redis has
    answered it: the durability of a plain call. A caller alone in its iteration runs its script
    as before. The pipeline runs in its own task, so a caller that gives up (its deadline) does not
    cancel the others' writes.
    """

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis
        self._pending: list[_ScriptCall] | None = None
        self._running: set[asyncio.Task[None]] = set()

    async def run(self, script: AsyncScript, keys: Sequence[KeyT], args: Sequence[EncodableT]) -> Any:
        """``await script(keys=keys, args=args)``, sent with the calls of the same iteration."""
        pending = self._pending
        if pending is not None:  # another task opened this iteration's batch: join it
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            pending.append((script, keys, args, future))
            return await future
        self._pending = pending = []
        try:
            await asyncio.sleep(0)  # the other tasks ready in this iteration run, and may join
        except BaseException:  # cancelled meanwhile: those that joined are still sent
            self._pending = None
            if pending:
                self._start(pending)
            raise
        self._pending = None
        if not pending:
            return await script(keys=keys, args=args)
        future = asyncio.get_running_loop().create_future()
        pending.insert(0, (script, keys, args, future))
        self._start(pending)
        return await future

    def _start(self, calls: list[_ScriptCall]) -> None:
        task = asyncio.create_task(self._send(calls))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _send(self, calls: list[_ScriptCall]) -> None:
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for script, keys, args, _ in calls:
                    pipe.evalsha(script.sha, len(keys), *keys, *args)
                results = await pipe.execute(raise_on_error=False)
        except BaseException as exc:
            for *_, future in calls:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (script, keys, args, future), result in zip(calls, results, strict=True):
            if isinstance(result, NoScriptError):  # not loaded yet (first use, Redis restarted): alone
                try:
                    result = await script(keys=keys, args=args)
                except Exception as exc:
                    result = exc
            if future.done():
                continue
            if isinstance(result, Exception):
                future.set_exception(result)
            else:
                future.set_result(result)
