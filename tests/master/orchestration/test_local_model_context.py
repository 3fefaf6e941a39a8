"""A local model's context, end to end: the budget calibrated with the server's tokenizer, and a
summary checked before it replaces turns.

A real master in this event loop and a :class:`ScriptedOpenAIServer`: one imitating llama.cpp with
a tokenizer of its own that counts 2.5 tokens per ``cl100k_base`` token (:attr:`Quirks.tokenize_ratio`),
and one whose summarizer drops facts.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from prometheus_client.parser import text_string_to_metric_families

from master.conversation.context import SUMMARY_PROMPT
from master.llm.windows import COUNT_MARGIN, TEMPLATE_TOKENS
from openagent import OrchestratorActionAgent, ToolSchema
from openagent.config import ClientConfig
from openagent.testing import Quirks, ScriptedOpenAIServer, TextReply
from tests.factories import EVERY_TENANT, in_process_master

KEY = "local-context-key"
WINDOW = 2048
MAX_TOKENS = 256


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


async def test_the_budget_is_calibrated_with_the_servers_tokenizer_and_no_request_overflows() -> None:
    filler = " ".join(f"detail{i}" for i in range(40))
    tools = [
        ToolSchema(
            name=f"tool_{i:02d}",
            description=f"Does task number {i}. {filler}",
            parameters={"type": "object", "properties": {"text": {"type": "string"}}},
        )
        for i in range(19)
    ]
    tools.append(
        ToolSchema(
            name="weather",
            description=f"The weather forecast of a city. {filler}",
            parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        )
    )

    async def handler(tool_name: str, arguments: dict[str, Any], **_: Any) -> dict[str, Any]:
        return {"sky": "clear"}

    quirks = Quirks.llamacpp(context_size=WINDOW, tokenize_ratio=2.5)
    # With the fixed margin the budget would be (2048 - 256 - 256) / 1.5 = 1024 of the master's
    # tokens: 2,560 of this model's, over its window. Calibrated, it is 1536 / (2.5 * 1.1) = 558.
    assert (WINDOW - MAX_TOKENS - TEMPLATE_TOKENS) / COUNT_MARGIN * 2.5 > WINDOW
    with ScriptedOpenAIServer(quirks=quirks) as small:
        small.add_tool_call("many__weather", {"city": "Paris"})
        small.add_text("Clear in Paris.")
        small.add_text("Still clear.")
        async with in_process_master(
            openai_base_url=small.base_url,
            openai_api_key="local",
            openagent_api_key=KEY,
            openagent_llm_max_tokens=MAX_TOKENS,
            openagent_llm_compat="auto",
        ) as master:
            config = ClientConfig(master_ws=master.ws_url, api_key=KEY)
            async with OrchestratorActionAgent("many", tools, handler, config=config):
                async with asyncio.timeout(30):
                    while "many" not in master.services.agents.known_ids(EVERY_TENANT):
                        await asyncio.sleep(0.01)
                headers = {"Authorization": f"Bearer {KEY}"}
                async with httpx.AsyncClient(base_url=master.base_url, headers=headers, timeout=60) as http:
                    first = await http.post(
                        "/query", json={"query": "What is the weather forecast in Paris?"}
                    )
                    assert first.status_code == 200, first.text
                    second = await http.post(
                        "/query", json={"query": "And tomorrow?", "session_id": first.json()["session_id"]}
                    )
                    assert second.status_code == 200, second.text
                    metrics = (await http.get("/metrics")).text
        assert first.json()["answer"] == "Clear in Paris." and second.json()["answer"] == "Still clear."
        assert len(small.requests) == 3  # none refused for its size
        assert all(quirks.prompt_tokens(request) <= WINDOW for request in small.requests)
        offered = [tool["function"]["name"] for tool in small.requests[0]["tools"]]
        assert "many__weather" in offered and len(offered) < 20
        assert quirks.tokenize_calls == 1  # once per model, not per query
        assert first.json()["usage"]["prompt_tokens"] > 0
        ratio = samples(metrics, "openagent_llm_token_ratio")[(("model", "gpt-4o-mini"),)]
        assert ratio == pytest.approx(2.5, rel=0.02)  # the server's count over the master's
        tokens = samples(metrics, "openagent_llm_request_tokens_count")
        assert tokens[(("kind", "prompt"), ("model", "gpt-4o-mini"))] == 3, tokens


def session(n: int) -> list[dict[str, Any]]:
    """``n`` turns, each with an order number and a price to keep."""
    return [
        {
            "query": f"What did order ORD-{1000 + i} cost? " + "word " * 60,
            "query_id": f"q{i}",
            "decision": "answer_directly",
            "answer": f"Order ORD-{1000 + i} cost {i * 7} euros.",
        }
        for i in range(n)
    ]


def summarizer(summaries: list[str]) -> Callable[[dict[str, Any]], TextReply]:
    """Answers summary requests with ``summaries`` in turn, anything else with ``ok``."""

    def reply(request: dict[str, Any]) -> TextReply:
        if request["messages"][0]["content"] == SUMMARY_PROMPT:
            return TextReply(summaries.pop(0))
        return TextReply("ok")

    return reply


async def test_a_summary_that_drops_facts_is_retried_then_rejected_and_the_turns_stay(
    llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    scripted_llm = llm
    session_id = "lossy-summary-session"
    await redis_client.set(f"session:{session_id}", json.dumps(session(12)), ex=600)
    kept = "; ".join(f"ORD-{1000 + i} cost {i * 7} euros" for i in range(11))
    scripted_llm.set_handler(summarizer(["Orders were discussed.", "Some orders cost money.", kept]))
    limits = {"orchestrator_context_max_tokens": 600, "orchestrator_recent_turns": 2}
    async with (
        in_process_master(openai_base_url=scripted_llm.base_url, **limits) as master,
        httpx.AsyncClient(base_url=master.base_url, timeout=60) as http,
    ):
        first = await http.post("/query", json={"query": "And the next one?", "session_id": session_id})
        assert first.status_code == 200 and first.json()["answer"] == "ok", first.text
        stored = json.loads(await redis_client.get(f"session:{session_id}"))
        assert not any(turn.get("decision") == "summary" for turn in stored)  # the turns stay
        asks = [r for r in scripted_llm.requests if r["messages"][0]["content"] == SUMMARY_PROMPT]
        assert len(asks) == 2 and "ORD-1000" in asks[1]["messages"][-1]["content"]  # the lost facts named
        answered = scripted_llm.requests[-1]["messages"]
        assert sum(m["role"] == "user" for m in answered) == 13  # every earlier question, and the query
        rejected = samples((await http.get("/metrics")).text, "openagent_summaries_rejected_total")
        assert rejected == {(("reason", "lost_facts"),): 1.0}

        # A later turn still works, and a summary that keeps the facts is stored.
        later = await http.post("/query", json={"query": "Thanks, and now?", "session_id": session_id})
        assert later.status_code == 200 and later.json()["answer"] == "ok", later.text
    stored = json.loads(await redis_client.get(f"session:{session_id}"))
    summaries = [turn for turn in stored if turn.get("decision") == "summary"]
    assert [turn["summary"] for turn in summaries] == [kept]


async def test_a_session_over_a_small_window_with_a_lossy_summarizer_still_answers(
    redis_client: aioredis.Redis,
) -> None:
    """No summary passes, so no summary is stored; each query is sent the latest turns that fit
    the model's window instead of a request the server would refuse."""
    session_id = "small-window-lossy-summary"
    await redis_client.set(f"session:{session_id}", json.dumps(session(24)), ex=600)
    quirks = Quirks.llamacpp(context_size=WINDOW, tokenize_ratio=1.5)
    with ScriptedOpenAIServer(quirks=quirks) as small:
        small.set_handler(summarizer(["Orders were discussed."] * 4))
        async with (
            in_process_master(
                openai_base_url=small.base_url,
                openai_api_key="local",
                openagent_llm_max_tokens=MAX_TOKENS,
                openagent_llm_compat="auto",
            ) as master,
            httpx.AsyncClient(base_url=master.base_url, timeout=60) as http,
        ):
            for query in ("And the next one?", "And after that?"):
                answer = await http.post("/query", json={"query": query, "session_id": session_id})
                assert answer.status_code == 200 and answer.json()["answer"] == "ok", answer.text
        assert all(quirks.prompt_tokens(r) <= WINDOW for r in small.requests)  # summaries' too
        asked = [r for r in small.requests if r["messages"][0]["content"] != SUMMARY_PROMPT]
        assert len(asked) == 2
        assert all(sum(m["role"] == "user" for m in r["messages"]) < 24 for r in asked)  # the latest
    stored = json.loads(await redis_client.get(f"session:{session_id}"))
    assert len(stored) == 26 and not any(turn.get("decision") == "summary" for turn in stored)


async def test_under_a_small_window_a_summary_covers_what_the_model_can_read_at_once(
    redis_client: aioredis.Redis,
) -> None:
    session_id = "small-window-partial-summary"
    await redis_client.set(f"session:{session_id}", json.dumps(session(40)), ex=600)
    quirks = Quirks.llamacpp(context_size=WINDOW, tokenize_ratio=1.5)

    def reply(request: dict[str, Any]) -> TextReply:
        if request["messages"][0]["content"] != SUMMARY_PROMPT:
            return TextReply("ok")
        facts = re.findall(r"ORD-\d+ cost \d+", request["messages"][1]["content"])
        return TextReply("; ".join(dict.fromkeys(facts)))  # keeps every order and price

    with ScriptedOpenAIServer(quirks=quirks) as small:
        small.set_handler(reply)
        async with (
            in_process_master(
                openai_base_url=small.base_url,
                openai_api_key="local",
                openagent_llm_max_tokens=MAX_TOKENS,
                openagent_llm_compat="auto",
            ) as master,
            httpx.AsyncClient(base_url=master.base_url, timeout=60) as http,
        ):
            for query in ("And the next one?", "And after that?"):
                answer = await http.post("/query", json={"query": query, "session_id": session_id})
                assert answer.status_code == 200 and answer.json()["answer"] == "ok", answer.text
        assert all(quirks.prompt_tokens(r) <= WINDOW for r in small.requests)  # none refused
    stored = json.loads(await redis_client.get(f"session:{session_id}"))
    summaries = [turn for turn in stored if turn.get("decision") == "summary"]
    assert summaries and summaries[0]["covers_through_index"] < 37  # not all 38 older turns at once
    assert summaries[0]["summary"].startswith("ORD-1000 cost 0")
