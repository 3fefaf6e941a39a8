"""The turns a query stores, in the order the spec gives, on a real session store."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from master.agents.calls import ToolRun
from master.conversation.outcome import Outcome
from master.conversation.store import SessionStore
from master.conversation.turns import TurnRecorder
from protocol import Plan, PlanStep
from tests.factories import EVERY_TENANT


def run(n: int, success: bool = True) -> ToolRun:
    return ToolRun(
        "a__t",
        "a",
        "t",
        {"n": n},
        dispatched=True,
        success=success,
        result={"n": n} if success else None,
        error=None if success else "boom",
    )


async def recorded(
    redis_client: aioredis.Redis, *, flush_each_step: bool = False
) -> tuple[TurnRecorder, SessionStore, str]:
    store = SessionStore(redis_client, ttl_seconds=60)
    sid = store.new_session_id()
    recorder = TurnRecorder(store, sid, query="q", query_id="qid", model="m", flush_each_step=flush_each_step)
    return recorder, store, sid


async def stored(store: SessionStore, sid: str) -> list[dict[str, Any]]:
    return await store.load(sid, EVERY_TENANT) or []


async def test_a_direct_answer(redis_client: aioredis.Redis) -> None:
    recorder, store, sid = await recorded(redis_client)
    await recorder.finish(Outcome(answer="hi"))
    [turn] = await stored(store, sid)
    assert {k: turn[k] for k in ("query", "query_id", "model", "decision", "answer")} == {
        "query": "q",
        "query_id": "qid",
        "model": "m",
        "decision": "answer_directly",
        "answer": "hi",
    }
    assert turn["ts"] > 0


async def test_one_round_the_answer_rides_on_the_last_call(redis_client: aioredis.Redis) -> None:
    recorder, store, sid = await recorded(redis_client)
    recorder.add_summary({"decision": "summary", "summary": "s", "covers_through_index": 3})
    await recorder.steps([run(1), run(2, success=False)])
    assert await store.load(sid, EVERY_TENANT) is None  # nothing stored before the answer (one round)
    await recorder.finish(Outcome(answer="done"))
    turns = await stored(store, sid)
    assert [t["decision"] for t in turns] == ["summary", "call_tool", "call_tool"]
    assert turns[1]["result"] == {"n": 1} and turns[2]["error"] == "boom" and turns[2]["answer"] == "done"
    assert "answer" not in turns[1]


async def test_auto_mode_stores_each_step_then_a_final_answer(redis_client: aioredis.Redis) -> None:
    recorder, store, sid = await recorded(redis_client, flush_each_step=True)
    await recorder.steps([run(1)])
    assert [t["decision"] for t in await stored(store, sid)] == ["call_tool"]
    await recorder.steps([run(2)])
    await recorder.finish(Outcome(answer="all done", steps=2, status="stopped", stopped_by="max_steps"))
    turns = await stored(store, sid)
    assert [t["decision"] for t in turns] == ["call_tool", "call_tool", "final_answer"]
    assert turns[-1] | {"ts": 0} == {
        "query": "q",
        "query_id": "qid",
        "model": "m",
        "decision": "final_answer",
        "steps": 2,
        "answer": "all done",
        "status": "stopped",
        "stopped_by": "max_steps",
        "ts": 0,
    }


async def test_a_proposed_plan_and_an_executed_one(redis_client: aioredis.Redis) -> None:
    recorder, store, sid = await recorded(redis_client)
    plan = Plan(plan_id="p1", steps=[PlanStep(agent_id="a", tool_name="t")])
    await recorder.finish(Outcome(answer="Proposed plan p1", status="awaiting_approval", plan=plan))
    executing = TurnRecorder(store, sid, query="go", query_id="q2", model="m", flush_each_step=True)
    executing.plan_id = "p1"
    await executing.steps([run(1)])
    await executing.finish(Outcome(answer="ran it", steps=1))
    turns = await stored(store, sid)
    assert [t["decision"] for t in turns] == ["plan", "call_tool", "plan_executed"]
    assert turns[0]["status"] == "awaiting_approval" and turns[0]["plan"]["plan_id"] == "p1"
    assert turns[2]["plan_id"] == "p1" and turns[2]["answer"] == "ran it"
