"""At most one summary per span is stored, whatever the interleaving of the queries that decided
one (:meth:`master.conversation.store.SessionStore.append_summary`).

The summary lock serializes the summaries of one session, but a lock can be lost while a
summary is in flight (its TTL passes under a slow summarizer; Redis forgets it), and then a
query of another master decides from the same stored turns that the same span needs a summary.
Two in-process masters on one Redis, a summarizer that waits for the test: master A's query is
summarizing, the lock goes, master B's query summarizes the same span; both summaries come back.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import httpx
import redis.asyncio as aioredis

from master.conversation.context import SUMMARY_PROMPT
from master.llm.model import ChatResult, FunctionChatModel
from master.storage.redis_keys import session_key, summary_lock_key
from tests.factories import in_process_master
from tests.master.conversation.test_context import faithful

SESSION = "summary-once-session"
SETTINGS: dict[str, Any] = {"orchestrator_context_max_tokens": 1500, "orchestrator_recent_turns": 2}


class Summarizer:
    """The model: a summary waits until :attr:`release` is set; ``asked`` counts summary calls."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.asked = 0
        self.changed = asyncio.Condition()

    async def __call__(self, messages: Sequence[Any], tools: Any) -> ChatResult:
        if messages[0]["content"] != SUMMARY_PROMPT:
            return ChatResult("ok")
        async with self.changed:
            self.asked += 1
            self.changed.notify_all()
        await self.release.wait()
        return ChatResult(f"summary number {self.asked}: " + faithful(messages[-1]["content"]))

    async def wait_for(self, asked: int) -> None:
        async with asyncio.timeout(60), self.changed:
            await self.changed.wait_for(lambda: self.asked >= asked)


async def test_two_queries_that_summarize_one_span_store_one_summary(redis_client: aioredis.Redis) -> None:
    history = [
        {
            "query": f"question {n} " + "word " * 60,
            "query_id": f"old{n}",
            "decision": "answer_directly",
            "answer": "a",
        }
        for n in range(40)
    ]
    await redis_client.set(session_key(SESSION), json.dumps(history), ex=600)
    summarizer = Summarizer()
    model = FunctionChatModel(summarizer)  # type: ignore[arg-type]
    try:
        async with (
            in_process_master(model, **SETTINGS) as a,
            in_process_master(model, **SETTINGS) as b,
            httpx.AsyncClient(timeout=60) as http,
        ):
            body = {"query": "follow-up", "session_id": SESSION}
            first = asyncio.create_task(http.post(f"{a.base_url}/query", json=body))
            await summarizer.wait_for(1)  # A holds the lock, its summary in flight
            assert await redis_client.delete(summary_lock_key(SESSION)) == 1  # the lock is lost
            second = asyncio.create_task(http.post(f"{b.base_url}/query", json=body))
            await summarizer.wait_for(2)  # B decided the same span needs a summary
            summarizer.release.set()
            answers = await asyncio.gather(first, second)
        assert [r.status_code for r in answers] == [200, 200], [r.text for r in answers]
        stored = json.loads(await redis_client.get(session_key(SESSION)))
        summaries = [turn for turn in stored if turn.get("decision") == "summary"]
        assert len(summaries) == 1, summaries
    finally:
        await redis_client.delete(session_key(SESSION))
