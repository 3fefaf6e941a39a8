"""The master's Redis client.

- A connection error or timeout is retried once, on a fresh connection: after a Redis
  restart, the pooled connections are stale, and the first command on each would fail.
- The pool is bounded and *blocking*: under a burst, a command waits (up to
  ``POOL_WAIT_SECONDS``) for a free connection instead of failing with "No connection available".
- :class:`GroupCommit` sends the scripts that concurrent queries run (their session appends, the
  invocation call records) and plain commands (the cluster inboxes' ``XADD``) in batches over one
  held connection: one socket write and one read per batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

import hiredis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT, KeyT

MAX_CONNECTIONS = 64
POOL_WAIT_SECONDS = 10.0

_ScriptCall = tuple[AsyncScript | None, Sequence[KeyT], Sequence[EncodableT], "asyncio.Future[Any]"]
"""A queued script call (or, without a script, a plain command: its words in the third item) and
the future its caller waits on."""
_Batch = Sequence[tuple[AsyncScript | None, Sequence[KeyT], Sequence[EncodableT], object]]
"""What :meth:`GroupCommit._exchange` writes: script calls and commands (the fourth item is not read)."""


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
        retry=Retry(NoBackoff(), retries=1, supported_errors=(RedisConnectionError, RedisTimeoutError)),
    )
    return aioredis.Redis.from_pool(pool)  # the client owns the pool: aclose() closes it


async def unreachable(redis: aioredis.Redis) -> str | None:
    """Why ``redis`` does not answer a ``PING`` (the error's text), or ``None`` when it does."""
    try:
        await redis.ping()
    except RedisError as exc:
        return str(exc)
    return None


class GroupCommit:
    """Concurrent tasks' Lua scripts, sent in batches over one connection of the client's pool.

    Under load, many queries finish at once and each writes to Redis (a session append, an
    invocation call's record). A call that finds the group idle goes out at once, alone, from
    its caller's own task (no task switch: at concurrency 1 every call is one of those). The calls
    made while a batch is in Redis queue, and once it is answered a sender task writes the queue
    as one ``EVALSHA`` pipeline, and so on while calls arrive: one socket write and one read for
    all the calls that arrived during the previous batch (group commit: the busier the master, the
    larger the batches; batches go in lockstep, one in Redis at a time). Each caller still gets its
    own script's answer or error, and returns only once Redis has answered it: the durability of a
    plain call.

    The batches use a connection that the group holds from the client's pool for its lifetime,
    so a batch costs no pool round, and closing the client (``aclose``) closes it. It runs with
    one deadline per batch (the pool's ``socket_timeout``) instead of redis-py's per-write
    ``wait_for``. A batch that finds the connection dropped (a Redis restart) is sent once more on
    a fresh connection, as the client's own retry does. A call whose caller gave up (cancelled)
    before its batch was written is not sent; once written, a caller's deadline does not cancel
    the others' writes (a call sent alone from its caller's task is the only one of its batch:
    cancelling that caller drops the connection, as a plain call's cancellation does, and the
    calls queued meanwhile go out on a fresh one).
    """

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis
        self._queue: list[_ScriptCall] = []
        self._sender: asyncio.Task[None] | None = None
        self._busy = False
        """A batch is being written or read (by a caller alone or the sender task): calls queue."""
        self._connection: Any = None
        self._deadline: float | None = redis.connection_pool.connection_kwargs.get("socket_timeout")
        self.batches = 0
        """Batches written so far (each is one socket write)."""

    async def run(self, script: AsyncScript, keys: Sequence[KeyT], args: Sequence[EncodableT]) -> Any:
        """``await script(keys=keys, args=args)``, sent in a batch with concurrent calls."""
        return await self._run(script, keys, args)

    async def command(self, *words: EncodableT) -> Any:
        """A plain command (``XADD key * field value``...), sent in a batch with concurrent calls;
        its answer as redis-py's connection reads it (no response callback)."""
        return await self._run(None, (), words)

    async def _run(self, script: AsyncScript | None, keys: Sequence[KeyT], args: Sequence[EncodableT]) -> Any:
        if self._busy:  # a batch is in Redis: join the next one
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._queue.append((script, keys, args, future))
            return await future
        self._busy = True  # idle: this call is the batch, sent from this task
        try:
            (result,) = await self._exchange([(script, keys, args, None)], retry=True)
        finally:
            if self._queue:  # the calls made meanwhile: the sender task writes them next
                self._sender = asyncio.create_task(self._send_queued())
            else:
                self._busy = False
        if (
            isinstance(result, NoScriptError) and script is not None
        ):  # not loaded yet (first use, Redis restarted)
            return await script(keys=keys, args=args)
        if isinstance(result, Exception):
            raise result
        return result

    def open(self) -> bool:
        """Whether the group's connection is open, as far as this process knows without a round
        trip or a read: a Redis that stopped or restarted has closed its end, which the event loop
        records on the connection's stream as soon as it polls (``False`` too before the first
        batch, or when the connection is of a kind whose stream this cannot see)."""
        connection = self._connection
        if connection is None or not connection.is_connected:
            return False
        reader = _stream(connection)
        return reader is not None and not reader.at_eof()

    async def _send_queued(self) -> None:
        try:
            while self._queue:
                calls, self._queue = self._queue, []
                calls = [call for call in calls if not call[3].done()]  # their callers gave up
                if calls:
                    await self._send(calls)
        finally:
            self._sender = None
            self._busy = False
            if self._queue:  # cancelled (shutdown): nobody waits for ever
                calls, self._queue = self._queue, []
                _fail(calls, RedisConnectionError("the group commit stopped"))

    async def _send(self, calls: list[_ScriptCall]) -> None:
        try:
            results = await self._exchange(calls, retry=True)
        except BaseException as exc:
            _fail(calls, exc if isinstance(exc, Exception) else RedisConnectionError("cancelled"))
            if not isinstance(exc, Exception):
                raise
            return
        for (script, keys, args, future), result in zip(calls, results, strict=True):
            if isinstance(result, NoScriptError) and script is not None:  # not loaded yet: alone
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

    async def _exchange(self, calls: _Batch, *, retry: bool) -> list[Any]:
        """Write the batch and read one answer per call (an error answer is returned, not raised)."""
        connection = self._connection
        if connection is None:
            connection = self._connection = await self._redis.connection_pool.get_connection()  # type: ignore[no-untyped-call]
            connection.socket_timeout = None  # the batch's deadline below covers each read and write
        elif connection.is_connected and (reader := _stream(connection)) is not None and reader.at_eof():
            await connection.disconnect(nowait=True)  # Redis closed it (restart, idle timeout): anew
        results: list[Any] = []
        try:
            async with asyncio.timeout(self._deadline):
                await connection.send_packed_command(
                    b"".join(
                        hiredis.pack_command(
                            cast(  # its stub types a 1-tuple
                                Any,
                                ("EVALSHA", script.sha, len(keys), *keys, *args)
                                if script is not None
                                else tuple(args),
                            )
                        )
                        for script, keys, args, _ in calls
                    ),
                    check_health=False,
                )
                self.batches += 1
                for _ in calls:
                    try:
                        results.append(await connection.read_response())
                    except ResponseError as exc:
                        results.append(exc)
                return results
        except BaseException as exc:
            await connection.disconnect(nowait=True)  # mid-batch, its answers are out of step: anew
            if not isinstance(exc, (RedisError, OSError, TimeoutError)):
                raise
            if retry and not results and isinstance(exc, RedisConnectionError):
                return await self._exchange(calls, retry=False)  # a stale connection: once more
            if isinstance(exc, TimeoutError) and not isinstance(exc, RedisError):
                exc = RedisTimeoutError(f"Redis did not answer a batch within {self._deadline} s")
            elif not isinstance(exc, RedisError):
                exc = RedisConnectionError(f"Redis connection failed: {exc}")
            return results + [exc] * (len(calls) - len(results))  # answered ones keep their answers


def _stream(connection: Any) -> asyncio.StreamReader | None:
    """The stream redis-py's asyncio connection reads its socket from (``None``: not one of those)."""
    reader = getattr(connection, "_reader", None)
    return reader if isinstance(reader, asyncio.StreamReader) else None


def _fail(calls: list[_ScriptCall], exc: BaseException) -> None:
    for *_, future in calls:
        if not future.done():
            future.set_exception(exc)
