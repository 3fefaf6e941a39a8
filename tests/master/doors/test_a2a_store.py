"""The A2A task store's compare-and-set: a write derived from an older version of a task never
lands, so a task cancelled through another master stays cancelled whatever the master running it
writes next (two stores on one Redis, as two masters have)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from a2a.server.cluster import ConcurrentTaskModificationError, TaskVersion
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import Task, TaskState

from master.auth import SYSTEM
from master.runs.a2a_tasks import PRINCIPAL_KEY, SCOPE_KEY, RedisTaskStore
from tests.factories import TEST_REDIS_URL

CONTEXT = ServerCallContext(state={SCOPE_KEY: "works", PRINCIPAL_KEY: SYSTEM})


@pytest.fixture
async def raw_redis() -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(TEST_REDIS_URL)  # bytes, as the door's client answers
    try:
        yield client
    finally:
        await client.aclose()


def task_in(task_id: str, state: TaskState.ValueType) -> Task:
    task = Task(id=task_id, context_id="ctx")
    task.status.state = state
    return task


async def test_a_stale_write_never_overwrites_a_cancel_made_through_another_master(
    raw_redis: aioredis.Redis,
) -> None:
    running_here, other_master = (RedisTaskStore(raw_redis, ttl_seconds=60) for _ in range(2))
    task_id = f"task-{uuid.uuid4().hex}"
    first = await running_here.save(
        task_in(task_id, TaskState.TASK_STATE_WORKING),
        event=None,
        prev=None,
        prev_version=TaskVersion.MISSING,
        context=CONTEXT,
    )
    seen_here = await running_here.get(task_id, CONTEXT)
    assert seen_here is not None and seen_here.version == first

    # Another master cancels it (a cancel lands over any state that has not ended).
    seen_there = await other_master.get(task_id, CONTEXT)
    assert seen_there is not None
    await other_master.save(
        task_in(task_id, TaskState.TASK_STATE_CANCELED),
        event=None,
        prev=None,
        prev_version=seen_there.version,
        context=CONTEXT,
    )

    # The master running it writes from what it read before the cancel: refused, each time.
    for late in (TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED):
        with pytest.raises(ConcurrentTaskModificationError):
            await running_here.save(
                task_in(task_id, late), event=None, prev=None, prev_version=seen_here.version, context=CONTEXT
            )
    # A second cancel over the cancelled task is refused too (it has ended).
    with pytest.raises(ConcurrentTaskModificationError):
        await running_here.save(
            task_in(task_id, TaskState.TASK_STATE_CANCELED),
            event=None,
            prev=None,
            prev_version=seen_here.version,
            context=CONTEXT,
        )
    # A change read afresh sees the end and writes nothing.
    assert await running_here.change(task_id, lambda task: None) is False
    stored = await other_master.get(task_id, CONTEXT)
    assert stored is not None and stored.task.status.state == TaskState.TASK_STATE_CANCELED
    assert stored.version.is_after(first)
