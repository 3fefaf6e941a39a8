"""The master's Redis client: a dropped connection is retried once, a burst waits for the pool."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError, ResponseError

from master.conversation.store import SessionStore
from master.storage.redis_client import GroupCommit, create_redis, unreachable
from tests.factories import EVERY_TENANT, TEST_REDIS_URL


async def _drop_connections(client: aioredis.Redis, killer: aioredis.Redis) -> None:
    """Close the server side of ``client``'s pooled connection, as a Redis restart does."""
    await killer.client_kill_filter(_id=await client.client_id())


async def _drop_appends_connection(store: SessionStore, killer: aioredis.Redis) -> None:
    """Close the server side of the connection ``store``'s appends go over, as a Redis restart does."""
    host, port = store._appends._connection._writer.get_extra_info("sockname")[:2]
    await killer.client_kill_filter(_type=None, addr=f"{host}:{port}")


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
        assert await store.load(sid, EVERY_TENANT) == [{"n": 1}]  # a Lua script over a fresh connection
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


_ECHO_OR_FAIL = """
if ARGV[1] == 'bad' then return redis.error_reply('bad argument') end
redis.call('RPUSH', KEYS[1], ARGV[1])
return ARGV[1]
"""


@dataclass
class _Group:
    """A group commit on a client of its own, and a script that appends its argument to a list."""

    commit: GroupCommit
    script: AsyncScript

    def run(self, value: str) -> Coroutine[Any, Any, Any]:
        return self.commit.run(self.script, ["test:group"], [value])


@pytest.fixture
async def group(redis_client: aioredis.Redis) -> AsyncIterator[_Group]:
    client = create_redis(TEST_REDIS_URL)
    try:
        yield _Group(GroupCommit(client), client.register_script(_ECHO_OR_FAIL))
    finally:
        await redis_client.delete("test:group")
        await client.aclose()


async def test_group_commit_sends_one_iterations_scripts_as_one_pipeline(
    group: _Group, redis_client: aioredis.Redis
) -> None:
    """Issue 26: a call that finds the group idle goes out at once, alone; the scripts that
    concurrent tasks run meanwhile go out together as one pipeline; each caller gets its own
    answer or error once Redis has answered, and a script Redis has not loaded is loaded."""
    await redis_client.script_flush()
    assert await group.run("alone") == "alone"
    assert group.commit.batches == 1
    await redis_client.script_flush()  # the batches find it missing: each call loads and runs it
    args = [str(n) for n in range(20)] + ["bad"]
    outcomes = await asyncio.gather(*(group.run(arg) for arg in args), return_exceptions=True)
    assert outcomes[:20] == args[:20]
    assert isinstance(outcomes[20], ResponseError) and "bad argument" in str(outcomes[20])
    assert group.commit.batches == 3  # the first alone, then the 20 others in one pipeline
    outcomes = await asyncio.gather(*(group.run(str(n)) for n in range(5)))
    assert outcomes == [str(n) for n in range(5)]
    assert group.commit.batches == 5
    stored = await redis_client.lrange("test:group", 0, -1)
    assert sorted(stored) == sorted(["alone", *args[:20], *(str(n) for n in range(5))])


async def test_a_call_that_finds_the_group_idle_is_sent_from_its_callers_task(
    group: _Group, redis_client: aioredis.Redis
) -> None:
    """At concurrency 1 no sender task runs: the caller writes its script and reads the answer
    itself (the call is written before its caller first yields)."""
    assert await group.run("load") == "load"
    call = asyncio.create_task(group.run("alone"))
    await asyncio.sleep(0)  # the call runs up to its wait for Redis's answer
    assert group.commit.batches == 2  # written already, by its caller: no sender task
    assert group.commit._sender is None
    assert await asyncio.wait_for(call, timeout=30) == "alone"
    assert group.commit._sender is None
    assert await redis_client.lrange("test:group", 0, -1) == ["load", "alone"]


async def test_group_commit_batches_what_arrives_while_a_batch_is_in_redis(
    group: _Group, redis_client: aioredis.Redis
) -> None:
    """The calls made while a batch waits for Redis's answer go out together in the next batch."""
    assert await group.run("load") == "load"
    first = asyncio.create_task(group.run("first"))
    async with asyncio.timeout(30):
        while group.commit.batches < 2:  # written; its answer needs the socket, so it is not read yet
            await asyncio.sleep(0)
    rest = [asyncio.create_task(group.run(str(n))) for n in range(10)]
    assert await asyncio.wait_for(asyncio.gather(first, *rest), timeout=30) == [
        "first",
        *map(str, range(10)),
    ]
    assert group.commit.batches == 3


async def test_group_commit_sends_again_on_a_fresh_connection_after_a_restart(
    redis_client: aioredis.Redis,
) -> None:
    """Redis closed the group's connection (as a restart does): the next batch is sent once more on
    a fresh connection, and stored once; a check does not take the closed connection for a live one."""
    client = create_redis(TEST_REDIS_URL)
    store = SessionStore(client, ttl_seconds=60)
    try:
        sid = store.new_session_id()
        await store.append(sid, [{"n": 1}])
        await _drop_appends_connection(store, redis_client)
        await _drop_connections(client, redis_client)
        await store.check(fresh_within=60)
        await store.append(sid, [{"n": 2}])
        await _drop_appends_connection(store, redis_client)
        await store.append(sid, [{"n": 3}])
        assert await store.load(sid, EVERY_TENANT) == [{"n": 1}, {"n": 2}, {"n": 3}]
    finally:
        await client.aclose()


async def test_a_check_pings_once_redis_closed_the_appends_connection(
    redis_client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recent append stands for the PING only while the appends' connection is open: once Redis
    closed it (stopped, restarted), the next check asks Redis."""
    client = create_redis(TEST_REDIS_URL)
    store = SessionStore(client, ttl_seconds=60)
    pings = 0
    ping = client.ping

    async def counted() -> Any:
        nonlocal pings
        pings += 1
        return await ping()

    monkeypatch.setattr(client, "ping", counted)
    try:
        await store.append(store.new_session_id(), [{"n": 1}])
        await store.check(fresh_within=60)
        assert pings == 0
        await _drop_appends_connection(store, redis_client)
        async with asyncio.timeout(30):
            while store._appends.open():  # the event loop sees the closed socket when it polls
                await asyncio.sleep(0.01)
        await store.check(fresh_within=60)
        assert pings == 1
    finally:
        await client.aclose()


async def test_group_commit_reports_a_failed_pipeline_to_every_caller(redis_client: aioredis.Redis) -> None:
    """A Redis that does not answer fails every call of the batch (none waits for ever)."""
    client = create_redis("redis://127.0.0.1:1/0", pool_wait_seconds=1.0)
    commit = GroupCommit(client)
    script = client.register_script(_ECHO_OR_FAIL)
    try:
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(commit.run(script, ["k"], [str(n)]) for n in range(3)), return_exceptions=True),
            timeout=30,
        )
        assert all(isinstance(outcome, RedisError) for outcome in outcomes)
    finally:
        await client.aclose()


async def test_group_commit_sends_what_queued_when_the_caller_sending_alone_gives_up(
    group: _Group, redis_client: aioredis.Redis
) -> None:
    """The caller that sent its call alone is cancelled while Redis has it: the calls queued
    meanwhile are still sent (on a fresh connection: the cancelled read left the old one out of
    step) and answered (none waits for ever)."""
    assert await group.run("load") == "load"
    first = asyncio.create_task(group.run("first"))
    await asyncio.sleep(0)  # the first writes its call and waits for the answer
    joined = asyncio.create_task(group.run("joined"))
    await asyncio.sleep(0)  # the second queues behind it
    first.cancel()
    assert await asyncio.wait_for(joined, timeout=30) == "joined"
    with pytest.raises(asyncio.CancelledError):
        await first
    assert group.commit.batches == 3
    # The first was written before its caller gave up: Redis ran it.
    assert sorted(await redis_client.lrange("test:group", 0, -1)) == ["first", "joined", "load"]
    assert await group.run("after") == "after"


async def test_group_commit_does_not_send_a_queued_call_whose_caller_gave_up(
    group: _Group, redis_client: aioredis.Redis
) -> None:
    """A call queued behind a batch in Redis whose caller is cancelled before the next batch is
    written is not sent; the others of that batch are."""
    assert await group.run("load") == "load"
    first = asyncio.create_task(group.run("first"))
    await asyncio.sleep(0)  # the first writes its call and waits for the answer
    dropped = asyncio.create_task(group.run("dropped"))
    kept = asyncio.create_task(group.run("kept"))
    await asyncio.sleep(0)  # both queue behind it
    dropped.cancel()
    assert await asyncio.wait_for(asyncio.gather(first, kept), timeout=30) == ["first", "kept"]
    with pytest.raises(asyncio.CancelledError):
        await dropped
    assert await redis_client.lrange("test:group", 0, -1) == ["load", "first", "kept"]


async def test_unreachable_says_why_a_redis_does_not_answer(redis_client: aioredis.Redis) -> None:
    """The lifespan's start check: ``None`` for a Redis that answers, the error's text otherwise."""
    assert await unreachable(redis_client) is None
    with socket.socket() as probe:  # a port nothing listens on once the socket is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    nobody = create_redis(f"redis://127.0.0.1:{port}/0")
    try:
        problem = await unreachable(nobody)
    finally:
        await nobody.aclose()
    assert problem is not None and str(port) in problem, problem
