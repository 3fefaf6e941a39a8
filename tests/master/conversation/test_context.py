"""Long-context summarization, with a function-driven model."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest

from master.conversation.context import ContextBuilder, Split, split_turns
from master.conversation.turn_log import SessionTurns, StoredTurn, TurnLog
from master.errors import LLMError, QueryRejected
from master.llm.model import ChatResult, FunctionChatModel


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


def faithful(transcript: str) -> str:
    """A summary that keeps the transcript's numbers (the facts of :func:`turns`)."""
    numbers = dict.fromkeys(re.findall(r"\d+", transcript))
    return f"SUMMARY of earlier turns: questions {', '.join(numbers)}"


def summarizer(calls: list[Any]) -> FunctionChatModel:
    def reply(messages: Sequence[dict[str, Any]], tools: Any) -> ChatResult:
        calls.append(messages)
        return ChatResult(content=faithful(messages[-1]["content"]), total_tokens=50)

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
    split = split_turns(stored)
    assert [t["summary"] for t in split.summaries] == [context.summary_turn["summary"]]
    assert context.summary_turn["summary"].startswith("SUMMARY of earlier turns: questions 0, 1, 2")
    assert indexed(split) == [(28, stored[28]), (29, stored[29]), (31, stored[31])]


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


async def test_a_query_that_leaves_no_room_for_any_tool_is_refused_naming_the_limit() -> None:
    """Issue 20: a query just under the size limit left room for none of the tools, and ran
    with none ("offering the 0 most relevant of 9 tools"); it is refused, naming the setting."""
    tools = [
        {"type": "function", "function": {"name": f"a__t{i}", "description": "tool", "parameters": {}}}
        for i in range(9)
    ]
    builder = ContextBuilder(summarizer([]), max_tokens=200, recent_turns=2, summarizer_model="s")
    with pytest.raises(QueryRejected) as refused:
        await builder.build(system="s", turns=[], query="word " * 300, tools=tools)
    assert refused.value.code == "invalid_query"
    assert "ORCHESTRATOR_CONTEXT_MAX_TOKENS" in refused.value.message
    assert "any of the 9 tool(s) on offer" in refused.value.message
    # One tool that fits is enough: the query runs with it.
    context, _ = await builder.build(system="s", turns=[], query="word " * 150, tools=tools[:1])
    assert len(context.tools) == 1


def user_queries(messages: Sequence[dict[str, Any]]) -> list[str]:
    """The numbers of the earlier questions replayed (the last user message is the query)."""
    return [m["content"].split(" ")[1] for m in [m for m in messages if m["role"] == "user"][:-1]]


def summarized_session(raw_before: int, raw_after: int) -> list[dict[str, Any]]:
    """``raw_before`` turns, a summary covering all of them, then ``raw_after`` more turns."""
    before = turns(raw_before)
    summary = {"decision": "summary", "summary": "EARLIER", "covers_through_index": raw_before - 1}
    after = [
        {
            **turn,
            "query": f"question {raw_before + i} " + turn["query"].split(" ", 2)[2],
            "query_id": f"q{raw_before + i}",
        }
        for i, turn in enumerate(turns(raw_after))
    ]
    return [*before, summary, *after]


async def test_a_61_turn_session_sends_only_the_turns_after_the_summary() -> None:
    # 30 turns, their summary (index 30), 30 more: the model must see the summary and turns
    # 31..60, none of the 30 turns the summary already covers.
    session = summarized_session(30, 30)
    assert len(session) == 61
    builder = ContextBuilder(summarizer([]), max_tokens=10**6, recent_turns=8, summarizer_model="s")
    context, _ = await builder.build(system="sys", turns=session, query="next", tools=[])
    assert context.summary_turn is None
    assert context.messages[1] == {
        "role": "system",
        "content": "Summary of the earlier conversation: EARLIER",
    }
    assert user_queries(context.messages) == [str(n) for n in range(30, 60)]


async def test_a_new_summary_records_the_index_in_the_full_session_list() -> None:
    # With an earlier summary in the list, positions in the raw tail and in the session differ.
    session = summarized_session(30, 30)
    calls: list[Any] = []
    builder = ContextBuilder(summarizer(calls), max_tokens=1200, recent_turns=2, summarizer_model="s")
    context, _ = await builder.build(system="sys", turns=session, query="next", tools=[])
    summary = context.summary_turn
    assert summary is not None and summary["covers_through_index"] == 58
    assert session[58]["query"].startswith("question 57 ")
    # The summarizer read exactly the turns between the two summaries' covers.
    transcript = calls[0][-1]["content"]
    assert "question 30 " in transcript and "question 57 " in transcript
    assert "question 29 " not in transcript and "question 58 " not in transcript
    assert user_queries(context.messages) == ["58", "59"]

    # The next query, with the summary stored after the turns: the old summaries and the
    # two recent turns, nothing the summaries cover.
    stored = [*session, summary, *summarized_session(0, 1)[1:]]
    builder = ContextBuilder(summarizer([]), max_tokens=10**6, recent_turns=2, summarizer_model="s")
    follow_up, _ = await builder.build(system="sys", turns=stored, query="next", tools=[])
    summaries = [m["content"] for m in follow_up.messages if m["role"] == "system"][1:]
    assert summaries == [
        "Summary of the earlier conversation: EARLIER",
        f"Summary of the earlier conversation: {summary['summary']}",
    ]
    assert len(user_queries(follow_up.messages)) == 3  # questions 58 and 59, and the one after
    assert user_queries(follow_up.messages)[:2] == ["58", "59"]


def test_split_turns_uses_the_last_summary_and_absolute_indexes() -> None:
    session = summarized_session(30, 30)
    split = split_turns(session)
    assert [s["summary"] for s in split.summaries] == ["EARLIER"]
    assert indexed(split) == list(enumerate(session))[31:]
    assert split_turns(turns(3)).summaries == []
    assert indexed(split_turns(turns(3))) == list(enumerate(turns(3)))


def indexed(split: Split) -> list[tuple[int, Any]]:
    """The raw turns of ``split`` with their indexes in the session."""
    return [(split.index(position), turn) for position, turn in enumerate(split.raw)]


def walked(split: Split) -> tuple[list[Any], list[tuple[int, Any]]]:
    return split.summaries, indexed(split)


def _split_by_walk(session: Sequence[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    """What :func:`split_turns` must answer, by walking every turn."""
    summaries: list[Any] = []
    for turn in session:
        if turn.get("decision") == "summary":
            summaries = [turn] if turn.get("folds_previous") else [*summaries, turn]
    covered = max((int(s.get("covers_through_index", -1)) for s in summaries), default=-1)
    tail = [(i, t) for i, t in enumerate(session) if i > covered and t.get("decision") != "summary"]
    return summaries, tail


def test_split_turns_of_a_growing_stored_session_walks_only_the_new_turns() -> None:
    """A session's stored turns keep where their summaries are; each query's list (the stored
    turns, then what it adds) splits as a walk over every turn would, through summaries and folds
    arriving later and turns that are not stored yet."""
    log = TurnLog([], 0)
    for step in range(12):
        new = turns(3)
        if step in (3, 7):
            new.append({"decision": "summary", "summary": f"S{step}", "covers_through_index": len(log) + 1})
        if step == 10:
            new.append(
                {
                    "decision": "summary",
                    "summary": "F",
                    "covers_through_index": len(log),
                    "folds_previous": True,
                }
            )
        pending = SessionTurns(log)
        pending += new  # a query's list: its stored turns and its own, not stored yet
        assert walked(split_turns(pending)) == _split_by_walk(pending)
        older = SessionTurns(log)  # a query that loaded the session before these turns were stored
        log.extend(StoredTurn(turn) for turn in new)  # what the store appends, in place
        stored = SessionTurns(log)  # what the next load returns
        assert walked(split_turns(stored)) == _split_by_walk(stored)
        assert log.marks[0] == len(log)
        assert walked(split_turns(older)) == _split_by_walk(older)  # not the later marks
    assert len(log.marks[1]) == 3


async def test_summaries_over_their_share_are_folded_into_one() -> None:
    """Defect 13: when the summaries take more than their share of the budget, the next context
    folds them (and the older raw turns) into one summary that replaces them."""
    calls: list[Any] = []
    long_summary = "fact " * 400  # ~400 tokens each: three of them are over a quarter of 3000
    history: list[dict[str, Any]] = []
    for n in range(3):
        history += turns(2, size=10)
        history.append(
            {
                "decision": "summary",
                "summary": f"S{n} {long_summary}",
                "covers_through_index": len(history) - 1,
            }
        )
    history += turns(3, size=10)
    builder = ContextBuilder(summarizer(calls), max_tokens=3000, recent_turns=2, summarizer_model="s")
    assert builder.wants_summary(system="sys", turns=history, query="next", tool_costs=[])
    context, _ = await builder.build(system="sys", turns=history, query="next", tools=[])
    folded = context.summary_turn
    assert folded is not None and folded["folds_previous"] is True
    assert len(calls) == 1 and all(f"S{n} " in calls[0][-1]["content"] for n in range(3))
    summaries = [m for m in context.messages if str(m["content"]).startswith("Summary of the earlier")]
    assert [m["content"] for m in summaries] == [f"Summary of the earlier conversation: {folded['summary']}"]
    split = split_turns([*history, folded])
    assert split.summaries == [folded] and len(split.raw) == 2
    assert not builder.wants_summary(system="sys", turns=[*history, folded], query="next", tool_costs=[])
