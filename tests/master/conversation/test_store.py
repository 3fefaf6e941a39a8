"""The Redis session store."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError

from master.auth import Scope
from master.conversation.store import SessionStore, SessionTurns
from master.errors import SessionStoreUnavailable
from tests.factories import EVERY_TENANT


class _Switchable:
    """A Redis client that can be made to fail, and counts its PINGs."""

    def __init__(self, inner: aioredis.Redis) -> None:
        self.inner = inner
        self.down = False
        self.pings = 0
        self.connection_pool = _SwitchablePool(self)

    def register_script(self, script: str) -> AsyncScript:
        return AsyncScript(self, script)  # type: ignore[arg-type]

    async def ping(self) -> Any:
        self.pings += 1
        if self.down:
            raise RedisConnectionError("down")
        return await self.inner.ping()

    async def evalsha(self, *args: Any) -> Any:
        if self.down:
            raise RedisConnectionError("down")
        return await self.inner.evalsha(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _SwitchablePool:
    """The pool of a :class:`_Switchable`: its connections fail to send while the client is down."""

    def __init__(self, client: _Switchable) -> None:
        self.client = client

    async def get_connection(self) -> Any:
        return _SwitchableConnection(self.client, await self.client.inner.connection_pool.get_connection())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client.inner.connection_pool, name)


class _SwitchableConnection:
    def __init__(self, client: _Switchable, inner: Any) -> None:
        self.client = client
        self.inner = inner

    async def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
        if self.client.down:
            raise RedisConnectionError("down")
        await self.inner.send_packed_command(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_a_recent_answer_stands_for_the_ping_until_a_command_fails(
    redis_client: aioredis.Redis,
) -> None:
    """Issue 15: a query in a new session skips its PING when Redis answered the store within
    ``fresh_within``; readiness (no ``fresh_within``) always pings, and a failure is never masked."""
    client = _Switchable(redis_client)
    store = SessionStore(client, ttl_seconds=100)  # type: ignore[arg-type]
    await store.check(fresh_within=60)
    await store.append(store.new_session_id(), [{"n": 1}])
    await store.check(fresh_within=60)
    assert client.pings == 1
    await store.check()
    assert client.pings == 2
    client.down = True
    with pytest.raises(SessionStoreUnavailable):
        await store.append(store.new_session_id(), [{"n": 2}])
    with pytest.raises(SessionStoreUnavailable):
        await store.check(fresh_within=60)  # the failed append: ask Redis again
    assert client.pings == 3
    client.down = False
    await store.check(fresh_within=60)
    assert client.pings == 4


async def test_append_load_and_ttl(redis_client: aioredis.Redis) -> None:
    store = SessionStore(redis_client, ttl_seconds=100)
    sid = store.new_session_id()
    assert await store.load(sid, EVERY_TENANT) is None
    await store.append(sid, [{"query": "a", "decision": "answer_directly", "tool_args": {}, "agents": []}])
    await store.append(sid, [{"query": "b"}, {"query": "c"}])
    turns = await store.load(sid, EVERY_TENANT)
    assert turns is not None and [t["query"] for t in turns] == ["a", "b", "c"]
    assert turns[0]["tool_args"] == {} and turns[0]["agents"] == []
    assert 0 < await redis_client.ttl(f"session:{sid}") <= 100
    assert json.loads(await redis_client.get(f"session:{sid}")) == turns


async def test_the_summary_count_lives_as_long_as_its_session(redis_client: aioredis.Redis) -> None:
    """Each append refreshes the count of summary turns with the session (else the count of a
    long-lived session would expire first, and the one-summary-per-span check with it)."""
    store = SessionStore(redis_client, ttl_seconds=100)
    sid = store.new_session_id()
    await store.append(sid, [{"query": "q", "answer": "a"}])
    assert await store.append_summary(sid, {"summary": "s"}, 0)
    await redis_client.expire(f"session_summaries:{sid}", 5)  # as if set long ago

    await store.append(sid, [{"query": "q2", "answer": "a2"}])

    assert await redis_client.ttl(f"session_summaries:{sid}") > 5
    assert not await store.append_summary(sid, {"summary": "again"}, 0)  # the span was summarized


async def test_concurrent_appends_lose_nothing(redis_client: aioredis.Redis) -> None:
    store = SessionStore(redis_client, ttl_seconds=100)
    sid = store.new_session_id()
    await asyncio.gather(*(store.append(sid, [{"n": n}]) for n in range(200)))
    turns = await store.load(sid, EVERY_TENANT)
    assert turns is not None and sorted(t["n"] for t in turns) == list(range(200))


async def test_cached_load_reads_only_what_was_appended(redis_client: aioredis.Redis) -> None:
    store = SessionStore(redis_client, ttl_seconds=100)
    other = SessionStore(redis_client, ttl_seconds=100)  # another master appending to the same session
    sid = store.new_session_id()
    await store.append(sid, [{"n": 0, "text": "é ünïcode"}])
    assert [t["n"] for t in await store.load(sid, EVERY_TENANT) or []] == [0]
    await other.append(sid, [{"n": 1}, {"n": 2}])
    assert [t["n"] for t in await store.load(sid, EVERY_TENANT) or []] == [0, 1, 2]
    unchanged = await store.load(sid, EVERY_TENANT)  # nothing re-read
    assert [t["n"] for t in unchanged or []] == [0, 1, 2]
    assert json.loads(await redis_client.get(f"session:{sid}")) == await store.load(sid, EVERY_TENANT)


async def test_concurrent_loads_of_a_grown_session_add_its_new_turns_once(
    redis_client: aioredis.Redis,
) -> None:
    """Loads of one session that overlap each add what was appended to the one log of its turns
    at most once; a query's list keeps the turns it loaded, however the log grows later."""
    store = SessionStore(redis_client, ttl_seconds=100)
    other = SessionStore(redis_client, ttl_seconds=100)
    sid = store.new_session_id()
    await store.append(sid, [{"n": 0}])
    first = await store.load(sid, EVERY_TENANT)
    assert isinstance(first, SessionTurns) and first.stored == 1
    for n in range(1, 6):
        await other.append(sid, [{"n": n}])
        loads = await asyncio.gather(*(store.load(sid, EVERY_TENANT) for _ in range(4)))
        assert all([t["n"] for t in turns or []] == list(range(n + 1)) for turns in loads)
        assert [t["n"] for t in first] == [0]
        log = loads[-1].log if isinstance(loads[-1], SessionTurns) else None
        assert log is not None and [t["n"] for t in log] == list(range(n + 1))
    assert log is first.log  # grown in place


async def test_cached_load_notices_a_rewritten_session(redis_client: aioredis.Redis) -> None:
    store = SessionStore(redis_client, ttl_seconds=100)
    sid = store.new_session_id()
    await store.append(sid, [{"n": 0}, {"n": 1}])
    assert len(await store.load(sid, EVERY_TENANT) or []) == 2
    await redis_client.set(f"session:{sid}", json.dumps([{"m": "x" * 50}]))  # replaced, longer
    assert await store.load(sid, EVERY_TENANT) == [{"m": "x" * 50}]
    await redis_client.delete(f"session:{sid}")
    assert await store.load(sid, EVERY_TENANT) is None
    await redis_client.set(f"session:{sid}", "[]")
    assert await store.load(sid, EVERY_TENANT) == []
    await store.append(sid, [{"n": 5}])
    assert await store.load(sid, EVERY_TENANT) == [{"n": 5}]


async def test_a_session_stored_as_something_else_is_refused_by_name_and_left_as_it_is(
    redis_client: aioredis.Redis,
) -> None:
    store = SessionStore(redis_client, ttl_seconds=100)
    sid = store.new_session_id()
    await store.append(sid, [{"n": 0}])
    assert await store.load(sid, EVERY_TENANT) == [{"n": 0}]
    await redis_client.append(f"session:{sid}", "garbage")  # after the cached copy was read
    for value in (None, "[not json at all", '{"n": 0}', "[1, 2]"):
        if value is not None:
            await redis_client.set(f"session:{sid}", value)
        with pytest.raises(SessionStoreUnavailable, match=f"session {sid!r} is stored in Redis as something"):
            await store.load(sid, EVERY_TENANT)
        assert await redis_client.exists(f"session:{sid}")  # nothing removed behind the user's back
    assert await store.delete(sid, EVERY_TENANT) and await store.load(sid, EVERY_TENANT) is None


async def test_the_session_cache_is_bounded_by_bytes(redis_client: aioredis.Redis) -> None:
    """Defect 14: parsed sessions are cached up to SESSION_CACHE_BYTES of stored JSON, not by count."""
    from master.conversation import store as store_module

    store = SessionStore(redis_client, ttl_seconds=100)
    big = "x" * 200_000
    ids = [store.new_session_id() for _ in range(200)]  # 40 MB of JSON in all
    for sid in ids:
        await store.append(sid, [{"text": big}])
        assert await store.load(sid, EVERY_TENANT) == [{"text": big}]
    assert store._cache.size <= store_module.SESSION_CACHE_BYTES
    assert await store.load(ids[0], EVERY_TENANT) == [{"text": big}]  # evicted ones are read again
    await redis_client.delete(*(f"session:{sid}" for sid in ids))


async def test_a_paused_run_is_found_by_its_calls_and_taken_once(redis_client: aioredis.Redis) -> None:
    store = SessionStore(redis_client, ttl_seconds=100)
    sid = store.new_session_id()
    state = {"query": "q", "query_id": "q1", "messages": [{"role": "user", "content": "q"}], "steps": 1}
    await store.pause(sid, state, ["call_a", "call_b"])
    assert await store.paused_session("call_b") == sid
    assert await store.paused_session("call_unknown") is None
    assert await store.paused(sid) == state
    assert 0 < await redis_client.ttl(f"paused_run:{sid}") <= 100
    assert 0 < await redis_client.ttl("paused_call:call_a") <= 100
    taken = await asyncio.gather(*(store.take_paused(sid) for _ in range(5)))
    assert taken.count(state) == 1 and taken.count(None) == 4  # of concurrent continuations, one
    assert await store.paused(sid) is None


async def test_a_session_is_its_tenants_and_every_administrators(redis_client: aioredis.Redis) -> None:
    """Issue 25: another tenant's session loads and deletes as unknown; a session made before
    tenants (no owner recorded) is ``default``'s; an administrator (``tenant=None``) sees all."""
    store = SessionStore(redis_client, ttl_seconds=100)
    await store.append("s-a", [{"query": "secret"}], owner="a")
    await store.append("s-a", [{"query": "more"}], owner="b")  # only the creating append records it
    await store.append("s-old", [{"query": "legacy"}])
    assert await store.owner("s-a") == "a" and await store.owner("s-old") == "default"
    assert await store.load("s-a", Scope.for_tenant("b")) is None
    assert [t["query"] for t in await store.load("s-a", Scope.for_tenant("a")) or []] == ["secret", "more"]
    assert await store.load("s-a", EVERY_TENANT) is not None  # an administrator's read
    assert await store.load("s-old", Scope.for_tenant("a")) is None
    assert await store.load("s-old", Scope.for_tenant("default")) is not None
    assert await store.visible("s-a", EVERY_TENANT) and await store.visible("s-a", Scope.for_tenant("a"))
    assert not await store.visible("s-a", Scope.for_tenant("b"))
    # The owner key lives as long as the session.
    assert 0 < await redis_client.ttl("session_owner:s-a") <= 100
    assert await store.delete("s-a", Scope.for_tenant("b")) is False
    assert await store.load("s-a", Scope.for_tenant("a")) is not None
    assert await store.delete("s-a", Scope.for_tenant("a")) is True
    assert await redis_client.exists("session:s-a", "session_owner:s-a") == 0
