"""Long-context summarization, with a function-driven model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from master.conversation.context import ContextBuilder, split_turns
from master.errors import LLMError
from master.orchestration.llm import ChatResult, FunctionChatModel


def turns(n: int, size: int = 60) -> list[dict[str, Any]]:
    return [
        {
            "query": f"question {i} " + "word " * size,
            "query_id": f"q{i}",
            "decision": "answer_directly",
            "answer": f"answer {i}",
        }
        for i in range(n)
    ]


def summarizer(calls: list[Any]) -> FunctionChatModel:
    def reply(messages: Sequence[dict[str, Any]], tools: Any) -> ChatResult:
        calls.append(messages)
        return ChatResult(content="SUMMARY of earlier turns", total_tokens=50)

    return FunctionChatModel(reply)


async def test_under_the_limit_nothing_is_summarized() -> None:
    calls: list[Any] = []
    builder = ContextBuilder(summarizer(calls), max_tokens=12000, recent_turns=8, summarizer_model="s")
    context, spent = await builder.build(system="sys", turns=turns(3), query="q", tools=[])
    assert context.summary_turn is None and calls == [] and spent == 0
    assert len(context.messages) == 1 + 3 * 2 + 1


async def test_over_the_limit_summarizes_all_but_recent_turns() -> None:
    calls: list[Any] = []
    builder = ContextBuilder(summarizer(calls), max_tokens=1200, recent_turns=2, summarizer_model="s")
    history = turns(30)
    context, spent = await builder.build(system="sys", turns=history, query="next?", tools=[])
    assert spent == 50 and len(calls) == 1
    assert context.summary_turn is not None
    assert context.summary_turn["covers_through_index"] == 27
    assert context.summary_turn["decision"] == "summary"
    # summary + the 2 recent turns (user+assistant each) + the query
    assert [m["role"] for m in context.messages] == [
        "system",
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert "SUMMARY" in context.messages[1]["content"]
    assert context.messages[2]["content"].startswith("question 28")

    # the follow-up context: summary + raw tail after covers_through_index
    stored = [*history, context.summary_turn, *turns(1)]
    summaries, tail = split_turns(stored)
    assert [t["summary"] for t in summaries] == ["SUMMARY of earlier turns"]
    assert [i for i, _ in tail] == [28, 29, 31]


async def test_failed_summarization_keeps_every_turn() -> None:
    def fail(messages: Any, tools: Any) -> ChatResult:
        raise LLMError("down")

    builder = ContextBuilder(FunctionChatModel(fail), max_tokens=1200, recent_turns=2, summarizer_model="s")
    context, _ = await builder.build(system="sys", turns=turns(30), query="q", tools=[])
    assert context.summary_turn is None
    assert len(context.messages) == 1 + 30 * 2 + 1


async def test_tools_that_do_not_fit_are_ranked_by_relevance() -> None:
    def tool(name: str, description: str) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": name, "description": description + " pad" * 80, "parameters": {}},
        }

    tools = [
        tool("a__stocks", "stock prices"),
        tool("b__weather", "weather forecast for a city"),
        tool("c__news", "news"),
    ]
    builder = ContextBuilder(summarizer([]), max_tokens=200, recent_turns=2, summarizer_model="s")
    context, _ = await builder.build(system="s", turns=[], query="What is the weather forecast?", tools=tools)
    assert [t["function"]["name"] for t in context.tools] == ["b__weather"]
