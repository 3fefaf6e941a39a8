"""Records of HTTP invocation calls: the claim of a late callback is atomic, once, and token-checked."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import redis.asyncio as aioredis

from master.agents.call_records import RECORD_MARGIN_SECONDS, CallRecords, DeliveryStatus, token_hash
from master.conversation.history import history_messages
from master.conversation.store import SessionStore
from master.llm.model import ChatResult, FunctionChatModel
from master.observability import logs
from protocol import ToolResult
from tests.factories import EVERY_TENANT, in_process_master

TOKEN = "the-per-call-token"


async def recorded_call(records: CallRecords, session_id: str | None, query_id: str = "q-1") -> str:
    call_id = uuid.uuid4().hex
    with logs.query_context(query_id, session_id):
        await records.record(call_id, TOKEN, "weather", "get_weather", {"city": "Lima"}, call_timeout=30)
    return call_id


def result(call_id: str, success: bool = True) -> ToolResult:
    if success:
        return ToolResult(call_id=call_id, success=True, result={"c": 24})
    return ToolResult(call_id=call_id, success=False, error="sensor offline")


async def test_the_record_holds_the_call_and_expires_after_its_timeout(redis_client: aioredis.Redis) -> None:
    records = CallRecords(redis_client, master_id="master-a", session_ttl_seconds=100)
    sid = str(uuid.uuid4())
    call_id = await recorded_call(records, sid)
    stored = await redis_client.hgetall(f"call:{call_id}")
    assert stored == {
        "state": "pending",
        "token": token_hash(TOKEN),
        "master": "master-a",
        "session": sid,
        "query": "q-1",
        "agent": "weather",
        "tool": "get_weather",
        "args": '{"city":"Lima"}',
    }
    assert TOKEN not in str(stored)  # only its hash
    assert 30 < await redis_client.ttl(f"call:{call_id}") <= 30 + RECORD_MARGIN_SECONDS
    assert await records.holder(call_id) == "master-a"


async def test_a_late_callback_is_recorded_once_and_a_wrong_token_changes_nothing(
    redis_client: aioredis.Redis,
) -> None:
    store = SessionStore(redis_client, ttl_seconds=100)
    sid = store.new_session_id()
    await store.append(sid, [{"query": "earlier", "query_id": "q-0", "decision": "answer_directly"}])
    dead = CallRecords(redis_client, master_id="master-old", session_ttl_seconds=100)
    call_id = await recorded_call(dead, sid)
    restarted = CallRecords(redis_client, master_id="master-new", session_ttl_seconds=100)

    assert (await restarted.deliver("not-the-token", result(call_id))).status == "unknown"
    assert await redis_client.hget(f"call:{call_id}", "state") == "pending"

    delivery = await restarted.deliver(TOKEN, result(call_id))
    assert delivery.status == "recorded" and delivery.session_id == sid
    again = await restarted.deliver(TOKEN, result(call_id, success=False))
    assert again.status == "already_recorded" and again.session_id == sid

    turns = await store.load(sid, EVERY_TENANT)
    assert turns is not None and len(turns) == 2
    late = turns[1]
    assert late["decision"] == "call_tool" and late["late_callback"] is True
    assert (late["query_id"], late["call_id"]) == ("q-1", call_id)
    assert (late["tool_agent_id"], late["tool_name"], late["tool_args"]) == (
        "weather",
        "get_weather",
        {"city": "Lima"},
    )
    assert late["result"] == {"c": 24} and "error" not in late
    assert 0 < await redis_client.ttl(f"session:{sid}") <= 100
    # The next query's model sees it as a note after the earlier exchange.
    assert history_messages(turns)[-1] == {
        "role": "system",
        "content": '[called weather.get_weather({"city": "Lima"}) returned {"c": 24} (after its query had ended)]',
    }


async def test_concurrent_deliveries_record_the_result_once(redis_client: aioredis.Redis) -> None:
    store = SessionStore(redis_client, ttl_seconds=100)
    sid = store.new_session_id()
    call_id = await recorded_call(CallRecords(redis_client, master_id="gone", session_ttl_seconds=100), sid)
    masters = [CallRecords(redis_client, master_id=f"m{n}", session_ttl_seconds=100) for n in range(8)]
    deliveries = await asyncio.gather(*(m.deliver(TOKEN, result(call_id, success=False)) for m in masters))
    assert sorted(d.status for d in deliveries) == ["already_recorded"] * 7 + ["recorded"]
    turns = await store.load(
        sid, EVERY_TENANT
    )  # a session the dead query never stored: created by the record
    assert turns is not None and len(turns) == 1 and turns[0]["error"] == "sensor offline"


async def test_a_call_whose_query_stored_its_outcome_is_finished(redis_client: aioredis.Redis) -> None:
    store = SessionStore(redis_client, ttl_seconds=100)
    sid = store.new_session_id()
    records = CallRecords(redis_client, master_id="master-a", session_ttl_seconds=100)
    call_id = await recorded_call(records, sid)
    other_call = await recorded_call(records, sid)
    turn = {"query": "q", "query_id": "q-1", "decision": "call_tool", "error": "timed out"}
    await store.append(sid, [turn], settled_calls=[call_id, "never-recorded"])
    assert await redis_client.hget(f"call:{call_id}", "state") == "stored"
    assert await redis_client.hget(f"call:{other_call}", "state") == "pending"  # not one of those turns
    assert not await redis_client.exists("call:never-recorded")

    delivery = await CallRecords(redis_client, master_id="b", session_ttl_seconds=100).deliver(
        TOKEN, result(call_id)
    )
    assert delivery.status == "finished"
    assert await store.load(sid, EVERY_TENANT) == [turn]


async def test_a_recorded_call_stays_recorded_when_its_query_stores_later(
    redis_client: aioredis.Redis,
) -> None:
    store = SessionStore(redis_client, ttl_seconds=100)
    sid = store.new_session_id()
    records = CallRecords(redis_client, master_id="master-a", session_ttl_seconds=100)
    call_id = await recorded_call(records, sid)
    assert (await records.deliver(TOKEN, result(call_id))).status == "recorded"
    await store.append(sid, [{"query": "q", "query_id": "q-1"}], settled_calls=[call_id])
    assert await redis_client.hget(f"call:{call_id}", "state") == "recorded"


async def test_a_live_holder_gets_the_callback_forwarded(redis_client: aioredis.Redis) -> None:
    sid = str(uuid.uuid4())
    holder = CallRecords(redis_client, master_id="master-a", session_ttl_seconds=100)
    call_id = await recorded_call(holder, sid)
    other = CallRecords(redis_client, master_id="master-b", session_ttl_seconds=100)
    asked: list[str] = []

    async def alive(master_id: str) -> DeliveryStatus | None:
        asked.append(master_id)
        return "forwarded"

    async def gone(master_id: str) -> DeliveryStatus | None:
        asked.append(master_id)
        return None

    assert (await other.deliver(TOKEN, result(call_id), alive)).status == "forwarded"
    assert await redis_client.hget(f"call:{call_id}", "state") == "pending"  # the holder settles it
    # The holder itself never forwards to itself: the call is not in its memory, so it records.
    assert (await holder.deliver(TOKEN, result(call_id), alive)).status == "recorded"
    assert asked == ["master-a"]

    second = await recorded_call(holder, sid)
    assert (await other.deliver(TOKEN, result(second), gone)).status == "recorded"
    assert asked == ["master-a", "master-a"]


async def test_unknown_expired_or_sessionless_calls(redis_client: aioredis.Redis) -> None:
    records = CallRecords(redis_client, master_id="m", session_ttl_seconds=100)
    assert (await records.deliver(TOKEN, result("no-such-call"))).status == "unknown"
    assert await records.holder("no-such-call") is None
    orphan = await recorded_call(records, None, query_id="")  # a call made outside any query
    assert (await records.deliver(TOKEN, result(orphan))).status == "no_session"
    assert (await records.deliver(TOKEN, result(orphan))).status == "already_recorded"
    assert await redis_client.exists("session:-") == 0


async def test_an_oversized_late_result_is_recorded_as_the_limits_error(redis_client: aioredis.Redis) -> None:
    """A ``POST /tool_callback`` for a call no master holds, with a result over
    ``OPENAGENT_MAX_TOOL_RESULT_BYTES``, records the error a waiting query would have got
    (naming the limit), never the result."""
    llm = FunctionChatModel(lambda messages, tools: ChatResult("ok"))
    async with (
        in_process_master(llm, openagent_max_tool_result_bytes=200) as master,
        httpx.AsyncClient(base_url=master.base_url, timeout=60) as http,
    ):
        session_id = (await http.post("/query", json={"query": "hi"})).json()["session_id"]
        gone = CallRecords(redis_client, master_id="gone-master", session_ttl_seconds=100)
        call_id = await recorded_call(gone, session_id)
        big = ToolResult(call_id=call_id, success=True, result={"blob": "x" * 1000})
        answer = await http.post(
            f"/tool_callback?call_id={call_id}&token={TOKEN}", json=big.model_dump(mode="json")
        )
        assert answer.status_code == 200 and answer.json()["status"] == "recorded", answer.text
        turns = (await http.get(f"/sessions/{session_id}")).json()["turns"]
        [late] = [turn for turn in turns if turn.get("call_id") == call_id]
        assert "result" not in late and "x" * 1000 not in str(turns)
        assert "over the limit of 200 bytes (OPENAGENT_MAX_TOOL_RESULT_BYTES)" in late["error"]
        assert late["error"].startswith("tool 'get_weather' on agent 'weather' failed: its result is")
