"""A summary replaces turns only when it keeps their facts (:mod:`master.conversation.summary_check`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from master.conversation.context import MISSING_FACTS_PROMPT, SUMMARY_PROMPT, ContextBuilder
from master.conversation.summary_check import MAX_FACTS, check, facts
from master.llm.model import ChatResult, FunctionChatModel

TRANSCRIPT = (
    "user: What is the weather in Paris for order ORD-1234? My name is Alice and I paid 1,200 euros.\n"
    'assistant: [called weather-agent.get_weather({"city": "Paris"}) returned {"temp": 21.5}]\n'
    "It is 21.5 degrees in Paris. Alice, your order ORD-1234 ships Tuesday."
)


def test_facts_are_numbers_names_and_identifiers_not_sentence_openers() -> None:
    assert set(facts(TRANSCRIPT)) == {
        "Paris",
        "Alice",
        "Tuesday",
        "ORD-1234",
        "weather-agent.get_weather",
        "1200",
        "21.5",
    }


def test_names_may_be_written_in_any_alphabet_and_acronyms_count() -> None:
    found = facts("user: Is it warm in Zürich? Ask José at NASA about Łódź.")
    assert set(found) == {"Zürich", "José", "NASA", "Łódź"}
    assert check(
        "José (NASA) says Zürich and łódź are warm.",
        "user: Is it warm in Zürich? Ask José at NASA about Łódź.",
    ).passed


def test_a_summary_that_keeps_the_facts_passes_and_one_that_drops_them_does_not() -> None:
    good = check(
        "Alice (order ORD-1234, paid 1200 euros) asked about Paris: 21.5 degrees per get_weather; "
        "the order ships Tuesday.",
        TRANSCRIPT,
    )
    assert good.passed and good.lost == ()
    lossy = check("The user asked about the weather and an order.", TRANSCRIPT)
    assert not lossy.passed and "Paris" in lossy.lost and "21.5" in lossy.lost
    one_lost = check("Alice, ORD-1234, 1200 euros, Paris 21.5 degrees by get_weather.", TRANSCRIPT)
    assert one_lost.lost == ("Tuesday",) and one_lost.passed  # 1 of 7: within the share it may lose


def test_only_the_most_mentioned_facts_are_checked() -> None:
    transcript = "\n".join(f"user: item {n} costs {n}00 dollars" for n in range(100))
    assert len(facts(transcript)) == MAX_FACTS


def turns(n: int) -> list[dict[str, Any]]:
    return [
        {
            "query": f"What did order ORD-{1000 + i} cost? " + "word " * 60,
            "query_id": f"q{i}",
            "decision": "answer_directly",
            "answer": f"Order ORD-{1000 + i} cost {i * 7} euros.",
        }
        for i in range(n)
    ]


class Summarizer:
    """Answers the summary prompt with ``replies`` in turn; records what it was asked."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.asked: list[list[dict[str, Any]]] = []

    def __call__(self, messages: Sequence[dict[str, Any]], tools: Any) -> ChatResult:
        assert messages[0]["content"] == SUMMARY_PROMPT
        self.asked.append(list(messages))
        return ChatResult(self.replies.pop(0), total_tokens=10)


def keeps_all(n: int) -> str:
    return "; ".join(f"ORD-{1000 + i} cost {i * 7} euros" for i in range(n))


async def build(summarizer: Summarizer, rejected: list[str]) -> tuple[Any, int]:
    builder = ContextBuilder(
        FunctionChatModel(summarizer),
        max_tokens=600,
        recent_turns=2,
        summarizer_model="s",
        on_rejected=rejected.append,
    )
    return await builder.build(system="sys", turns=turns(12), query="next", tools=[])


async def test_a_summary_that_keeps_the_facts_is_stored_at_once() -> None:
    summarizer, rejected = Summarizer(keeps_all(10)), []
    context, spent = await build(summarizer, rejected)
    assert context.summary_turn is not None and context.summary_turn["summary"] == keeps_all(10)
    assert len(summarizer.asked) == 1 and rejected == [] and spent == 10


async def test_a_lossy_summary_is_asked_again_with_the_lost_facts_and_the_better_one_stored() -> None:
    summarizer, rejected = Summarizer("Orders were discussed.", keeps_all(10)), []
    context, spent = await build(summarizer, rejected)
    assert context.summary_turn is not None and context.summary_turn["summary"] == keeps_all(10)
    retry = summarizer.asked[1]
    assert retry[-2] == {"role": "assistant", "content": "Orders were discussed."}
    assert retry[-1]["content"].startswith(MISSING_FACTS_PROMPT.split("{facts}")[0])
    assert "ORD-1000" in retry[-1]["content"] and "63" in retry[-1]["content"]
    assert rejected == [] and spent == 20


async def test_a_summary_still_lossy_after_the_retry_is_rejected_and_the_turns_stay() -> None:
    summarizer, rejected = Summarizer("Orders were discussed.", "Several orders cost money."), []
    context, spent = await build(summarizer, rejected)
    assert context.summary_turn is None and len(summarizer.asked) == 2
    assert rejected == ["lost_facts"] and spent == 20
    replayed = [m["content"] for m in context.messages if m["role"] == "user"]
    assert len(replayed) == 13 and replayed[0].startswith("What did order ORD-1000 cost?")  # every turn


async def test_under_a_window_a_rejected_summary_sends_the_latest_turns_that_fit() -> None:
    """The model's window is the limit: with no summary, a request with every turn would be
    refused, so this one leaves out the oldest (the session keeps them all)."""
    summarizer, rejected = Summarizer("Orders were discussed.", "Several orders cost money."), []
    builder = ContextBuilder(
        FunctionChatModel(summarizer),
        max_tokens=600,
        recent_turns=2,
        summarizer_model="s",
        on_rejected=rejected.append,
        window_bound=True,
    )
    session = turns(12)
    context, _ = await builder.build(system="sys", turns=session, query="next", tools=[])
    assert context.summary_turn is None and rejected == ["lost_facts"]
    assert context.tokens <= 600
    replayed = [m["content"] for m in context.messages if m["role"] == "user"][:-1]
    assert 2 <= len(replayed) < 12  # the latest that fit, the recent ones always
    assert replayed == [turn["query"] for turn in session[-len(replayed) :]]
