"""The Redis session store."""

from __future__ import annotations

import asyncio
import json

import redis.asyncio as aioredis

from master.sessions import SessionStore


async def test_append_load_and_ttl(redis_client: aioredis.Redis) -> None:
    store = SessionStore(redis_client, ttl_seconds=100)
    sid = store.new_session_id()
    assert await store.load(sid) is None
    await store.append(sid, [{"query": "a", "decision": "answer_directly", "tool_args": {}, "agents": []}])
    await store.append(sid, [{"query": "b"}, {"query": "c"}])
    turns = await store.load(sid)
    assert turns is not None and [t["query"] for t in turns] == ["a", "b", "c"]
    assert turns[0]["tool_args"] == {} and turns[0]["agents"] == []
    assert 0 < await redis_client.ttl(f"session:{sid}") <= 100
    assert json.loads(await redis_client.get(f"session:{sid}")) == turns


async def test_concurrent_appends_lose_nothing(redis_client: aioredis.Redis) -> None:
    store = SessionStore(redis_client, ttl_seconds=100)
    sid = store.new_session_id()
    await asyncio.gather(*(store.append(sid, [{"n": n}]) for n in range(200)))
    turns = await store.load(sid)
    assert turns is not None and sorted(t["n"] for t in turns) == list(range(200))
