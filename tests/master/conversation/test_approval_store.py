"""The approval store against the tests' Redis: what it keeps of approvals no one decided."""

from __future__ import annotations

import uuid

import redis.asyncio as aioredis

from master.conversation.approvals import ApprovalStore
from master.storage.redis_keys import APPROVALS_EXPIRING_KEY
from protocol import Approval
from tests.factories import EVERY_TENANT

TTL = 600


def _approval(store: ApprovalStore) -> Approval:
    now = store.clock()
    return Approval(
        approval_id=f"test-{uuid.uuid4().hex}",
        session_id=f"test-{uuid.uuid4().hex}",
        agent_id="bank",
        tool_name="transfer",
        arguments={"amount": 1},
        created_at=now,
        expires_at=now + store.ttl_seconds,
    )


async def test_undecided_approvals_leave_the_pending_set_once_their_records_are_gone(
    redis_client: aioredis.Redis,
) -> None:
    """With the sweep off nothing ends an undecided approval; the next approval made after its
    record expired (a TTL after the approval itself) takes it off the pending set."""
    store = ApprovalStore(redis_client, ttl_seconds=TTL)
    start = store.clock()
    old = _approval(store)
    await store.create([old], {})
    assert await redis_client.zscore(APPROVALS_EXPIRING_KEY, old.approval_id) is not None

    store.clock = lambda: start + 2 * TTL - 1  # expired, its record still kept (2 x TTL)
    newer = _approval(store)
    await store.create([newer], {})
    assert await redis_client.zscore(APPROVALS_EXPIRING_KEY, old.approval_id) is not None
    assert (await store.record(old.approval_id, EVERY_TENANT) or {}).get("status") == "expired"

    store.clock = lambda: start + 2 * TTL + 1  # its record has expired too
    latest = _approval(store)
    await store.create([latest], {})
    assert await redis_client.zscore(APPROVALS_EXPIRING_KEY, old.approval_id) is None
    for kept in (newer, latest):
        assert await redis_client.zscore(APPROVALS_EXPIRING_KEY, kept.approval_id) is not None
    await redis_client.zrem(APPROVALS_EXPIRING_KEY, newer.approval_id, latest.approval_id)
