"""The orchestrator's context for one query, kept under ``ORCHESTRATOR_CONTEXT_MAX_TOKENS``.

Context = every summary turn in effect (in order) + the raw turns after the last summary.
When system prompt, context, tool definitions and the query exceed the limit,
the raw tail (except the last ``ORCHESTRATOR_RECENT_TURNS`` turns) is summarized
by ``SUMMARIZER_MODEL`` and a turn ``{"decision": "summary", "summary": ...,
"covers_through_index": N}`` is returned for the session, N being the index in
the full session list of the last turn the summary covers. A failed
summarization loses nothing: the full tail is used and the turns stay as they are.

A summary is checked before it replaces turns (:mod:`master.conversation.summary_check`): when it
loses more than a small share of the numbers, names and identifiers of the turns it covers, the
summarizer is asked once more with the lost facts listed; if that summary loses them too, it is
not stored, the turns stay, and ``openagent_summaries_rejected_total`` counts it.

When the limit is the model's window (``window_bound``) and no summary replaces the older turns
(rejected, or the summarizer failed), a request with all of them would be refused: it is sent
the most recent turns that fit instead (the session keeps every turn, and the next query tries
to summarize again). Otherwise (a limit below a larger window) the full tail is sent. Under the
window, a summary covers only the oldest turns the model can read in one request; the next
summaries take the rest.

When the summaries themselves take more than :data:`SUMMARY_SHARE` of the limit, they are folded:
one new summary (``"folds_previous": true``) of the summaries and the older raw turns replaces them.

One summarization per session at a time: :class:`master.query.service.QueryService` holds the
session's summary lock around it, and queries waiting for the lock reuse the stored result.

If the tools of all linked agents still do not fit, the most relevant tools
(by word overlap with the query) are offered, and the log says so. When not even one of the
tools on offer fits beside the messages, the query is refused (``invalid_query``, naming
``ORCHESTRATOR_CONTEXT_MAX_TOKENS``) rather than run with none: the model would only repeat it.
"""

from __future__ import annotations

import bisect
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from master.conversation import summary_check
from master.conversation.history import context_messages, history_messages
from master.conversation.store import SessionTurns
from master.errors import LLMError, QueryRejected
from master.llm.model import ChatMessage, ChatModel
from master.llm.tokens import count_messages, count_text, count_tools

logger = logging.getLogger("master.conversation.context")

Turn = dict[str, Any]

SUMMARY_PROMPT = (
    "Summarize this conversation between a user and an AI orchestrator that calls tools of agents. "
    "Keep every fact, number, name, decision and tool result a follow-up question could need; drop "
    "pleasantries. Write plain prose, at most 200 words."
)

MISSING_FACTS_PROMPT = (
    "Your summary leaves out facts of the conversation: {facts}. Write the summary again, keeping "
    "each of them as written (numbers, names and identifiers verbatim)."
)


@dataclass
class Context:
    """Messages and tools for the model, and a summary turn to store (if one was made)."""

    messages: list[ChatMessage]
    tools: list[dict[str, Any]]
    summary_turn: Turn | None = None
    tokens: int = 0


SUMMARY_SHARE = 0.25
"""Share of ``ORCHESTRATOR_CONTEXT_MAX_TOKENS`` the summaries may take; beyond it they are folded
into one summary (which also covers the older raw turns)."""


@dataclass(frozen=True)
class Split:
    """A session's turns as the context uses them (:func:`split_turns`)."""

    turns: Sequence[Turn]
    summaries: list[Turn]
    """The summary turns in effect, in order."""
    spans: tuple[tuple[int, int], ...]
    """The raw turns after the last summary, without summary turns: the turns ``[start:end]`` of
    each span, one after the other."""

    @property
    def raw_count(self) -> int:
        return sum(end - start for start, end in self.spans)

    @property
    def raw(self) -> list[Turn]:
        """The raw turns, in order (a new list)."""
        return [turn for start, end in self.spans for turn in self.turns[start:end]]

    def index(self, position: int) -> int:
        """The index in the session's list of ``raw[position]``."""
        for start, end in self.spans:
            if position < end - start:
                return start + position
            position -= end - start
        raise IndexError(position)


def split_turns(turns: Sequence[Turn]) -> Split:
    """The summary turns in effect, and where the raw turns after the last summary are.

    A summary with ``folds_previous`` replaces every summary before it.

    Only the positions of the summary turns need a walk over the turns in Python. When ``turns``
    is a :class:`SessionTurns`, the positions among its stored turns are kept on its
    :class:`TurnLog`, so the session's next query walks only its new turns.
    """
    marks: list[int] = []
    walked = 0
    if isinstance(turns, SessionTurns):
        log, walked = turns.log, turns.stored
        scanned, found = log.marks
        if scanned < walked:
            found = found + [i for i in range(scanned, walked) if log[i].get("decision") == "summary"]
            log.marks = (walked, found)
        marks = found[: bisect.bisect_left(found, walked)]
    marks += (i for i in range(walked, len(turns)) if turns[i].get("decision") == "summary")
    summaries: list[Turn] = []
    for index in marks:
        summary = turns[index]
        summaries = [summary] if summary.get("folds_previous") else [*summaries, summary]
    covered = max((int(s.get("covers_through_index", -1)) for s in summaries), default=-1)
    spans: list[tuple[int, int]] = []
    start = covered + 1
    for end in [*marks, len(turns)]:
        if end > start:
            spans.append((start, end))
        start = max(start, end + 1)
    return Split(turns, summaries, tuple(spans))


class ContextBuilder:
    """Builds the bounded context, summarizing older turns when needed."""

    def __init__(
        self,
        llm: ChatModel,
        *,
        max_tokens: int,
        recent_turns: int,
        summarizer_model: str,
        on_rejected: Callable[[str], None] | None = None,
        window_bound: bool = False,
    ) -> None:
        self._llm = llm
        self._on_rejected = on_rejected
        """Told the reason (``lost_facts``) when a summary is not stored (the metric)."""
        self._window_bound = window_bound
        """``max_tokens`` comes from the model's window: a request over it would be refused, so
        when no summary replaces the older turns the most recent that fit are sent instead."""
        self._max_tokens = max_tokens
        self._recent = recent_turns
        self._summarizer_model = summarizer_model
        self._seen: tuple[Sequence[Turn], int, str, str, Split, list[ChatMessage], int] | None = None
        """The last turns read, with their split, messages and token count: a query asks
        :meth:`wants_summary` then :meth:`build` about the same turns, which are then split,
        rendered and counted once (measured in the commit that added this)."""

    def _read(
        self, system: str, turns: Sequence[Turn], query: str, *, take: bool
    ) -> tuple[Split, list[ChatMessage], int]:
        """``turns`` split, rendered as the request's messages, and their tokens (memoized for one
        sequence that has not grown; the orchestrator never edits stored turns). With ``take`` the
        caller owns the messages (and the memo is spent); without, it must not change them."""
        seen = self._seen
        if seen is not None and seen[0] is turns and seen[1] == len(turns) and seen[2:4] == (system, query):
            if take:
                self._seen = None
            return seen[4], seen[5], seen[6]
        split = split_turns(turns)
        messages = context_messages(system, split.summaries, turns, split.spans, query)
        tokens = count_messages(messages)
        self._seen = None if take else (turns, len(turns), system, query, split, messages, tokens)
        return split, messages, tokens

    def wants_summary(
        self, *, system: str, turns: Sequence[Turn], query: str, tool_costs: Sequence[int]
    ) -> bool:
        """Whether :meth:`build` would call the summarizer for these turns (no LLM call here)."""
        split, _, message_tokens = self._read(system, turns, query, take=False)
        return self._fold(split.summaries) or self._overflows(message_tokens, split.raw_count, tool_costs)

    def _overflows(self, message_tokens: int, raw_count: int, tool_costs: Sequence[int]) -> bool:
        """Over the token limit with more raw turns than the recent ones kept as they are."""
        return message_tokens + sum(tool_costs) > self._max_tokens and raw_count > self._recent

    def _fold(self, summaries: list[Turn]) -> bool:
        """The summaries take more than their share: fold them (and what they can absorb) into one."""
        if len(summaries) < 2:
            return False
        text = "".join(str(s.get("summary", "")) for s in summaries)
        return count_messages([{"content": text}]) > self._max_tokens * SUMMARY_SHARE

    async def build(
        self,
        *,
        system: str,
        turns: Sequence[Turn],
        query: str,
        tools: list[dict[str, Any]],
        tool_costs: list[int] | None = None,
    ) -> tuple[Context, int]:
        """The context and the tokens the summarizer spent (``tool_costs``: known token counts of ``tools``)."""
        if tool_costs is None:
            tool_costs = [count_tools([tool]) for tool in tools]
        split, messages, message_tokens = self._read(system, turns, query, take=True)
        summaries = split.summaries
        spent = 0
        summary_turn: Turn | None = None
        fold = self._fold(summaries)
        if fold or self._overflows(message_tokens, split.raw_count, tool_costs):
            raw = split.raw
            older = raw[: len(raw) - min(self._recent, len(raw))]
            if self._window_bound and not fold:
                older = older[: self._summarizable(older)]
            covered = (
                split.index(len(older) - 1)
                if older
                else max(int(s.get("covers_through_index", -1)) for s in summaries)
            )
            text, spent = await self._summarize([*summaries, *older] if fold else older)
            kept, rest = summaries, raw
            if text is not None:
                summary_turn = {
                    "decision": "summary",
                    "summary": text,
                    "covers_through_index": covered,
                    "ts": time.time(),
                }
                if fold:
                    summary_turn["folds_previous"] = True
                rest = raw[len(older) :]
                kept = [summary_turn] if fold else [*summaries, summary_turn]
                messages = context_messages(system, kept, rest, [(0, len(rest))], query)
                message_tokens = count_messages(messages)
            if self._window_bound and message_tokens + sum(tool_costs) > self._max_tokens:
                droppable = max(0, len(rest) - self._recent)
                messages, message_tokens = self._latest_that_fit(
                    system, kept, rest, droppable, query, sum(tool_costs)
                )
        if message_tokens + sum(tool_costs) > self._max_tokens:
            tools, tool_costs = self._fit_tools(message_tokens, tools, tool_costs, query)
        return Context(messages, tools, summary_turn, message_tokens + sum(tool_costs)), spent

    def _summarizable(self, older: list[Turn]) -> int:
        """How many of the ``older`` turns (the first ones, at least one) the model can read in one
        summary request under the window: the others wait for a later summary."""

        def fits(count: int) -> bool:
            return count_text(_transcript(older[:count])) + count_text(SUMMARY_PROMPT) <= self._max_tokens

        if not older or fits(len(older)):
            return len(older)
        low, high = 1, len(older)  # the most that fit is in [low, high)
        while high - low > 1:
            middle = (low + high) // 2
            if fits(middle):
                low = middle
            else:
                high = middle
        logger.info(
            "summarizing the %d oldest of %d turns, as many as the model's window takes", low, len(older)
        )
        return low

    def _latest_that_fit(
        self, system: str, summaries: list[Turn], raw: list[Turn], older: int, query: str, tool_tokens: int
    ) -> tuple[list[ChatMessage], int]:
        """The messages with the fewest of the ``older`` first raw turns left out that fit beside
        ``tool_tokens`` (all of them left out when none does), and their tokens. The session keeps
        every turn; only this request goes without them."""

        def render(dropped: int) -> tuple[list[ChatMessage], int]:
            kept = raw[dropped:]
            messages = context_messages(system, summaries, kept, [(0, len(kept))], query)
            return messages, count_messages(messages)

        low, high = 0, older  # the fewest left out is in [low, high]
        while low < high:
            middle = (low + high) // 2
            if render(middle)[1] + tool_tokens <= self._max_tokens:
                high = middle
            else:
                low = middle + 1
        messages, tokens = render(low)
        logger.warning(
            "no summary replaces the older turns: this request leaves out the %d oldest of %d to fit "
            "the model's window (the session keeps them)",
            low,
            len(raw),
        )
        return messages, tokens

    async def _summarize(self, turns: Sequence[Turn]) -> tuple[str | None, int]:
        """A summary of ``turns`` that keeps their facts (:mod:`master.conversation.summary_check`),
        asked for once more with the lost facts named; ``None`` (the turns stay) when the model
        fails or the summary still loses them. Also the tokens spent."""
        transcript = _transcript(turns)
        messages: list[ChatMessage] = [
            {"role": "system", "content": SUMMARY_PROMPT},
            {"role": "user", "content": transcript},
        ]
        spent = 0
        for attempt in range(2):
            try:
                result = await self._llm.complete(model=self._summarizer_model, messages=messages)
            except LLMError as exc:
                logger.warning("summarization failed, keeping the full context: %s", exc)
                return None, spent
            spent += result.total_tokens
            if not result.content:
                logger.warning("summarizer returned no text, keeping the full context")
                return None, spent
            verdict = summary_check.check(result.content, transcript)
            if verdict.passed:
                logger.info("summarized %d turns into %d characters", len(turns), len(result.content))
                return result.content, spent
            logger.warning(
                "summary of %d turns lost %d of %d facts (%s)%s",
                len(turns),
                len(verdict.lost),
                len(verdict.facts),
                ", ".join(verdict.lost[:10]),
                ": asking again" if attempt == 0 else ": keeping the turns",
            )
            messages = [
                *messages,
                {"role": "assistant", "content": result.content},
                {"role": "user", "content": MISSING_FACTS_PROMPT.format(facts=", ".join(verdict.lost))},
            ]
        if self._on_rejected is not None:
            self._on_rejected("lost_facts")
        return None, spent

    def _fit_tools(
        self, message_tokens: int, tools: list[dict[str, Any]], costs: list[int], query: str
    ) -> tuple[list[dict[str, Any]], list[int]]:
        """The most relevant tools (word overlap with the query) that fit beside the messages.

        Raises :class:`QueryRejected` when none fits (see the module docstring)."""
        room = self._max_tokens - message_tokens
        words = _words(query)
        ranked = sorted(
            range(len(tools)),
            key=lambda i: (-len(words & _words(json.dumps(tools[i]["function"]))), i),
        )
        chosen: list[int] = []
        used = 0
        for index in ranked:
            if used + costs[index] <= room:
                chosen.append(index)
                used += costs[index]
        if tools and not chosen:
            raise QueryRejected(
                "invalid_query",
                f"the query and its context take {message_tokens} of the {self._max_tokens} tokens "
                f"of ORCHESTRATOR_CONTEXT_MAX_TOKENS, leaving {max(room, 0)}: no room for any of "
                f"the {len(tools)} tool(s) on offer (the smallest needs {min(costs)}); shorten the "
                "query or raise ORCHESTRATOR_CONTEXT_MAX_TOKENS",
            )
        chosen.sort()
        logger.warning(
            "tool definitions do not fit ORCHESTRATOR_CONTEXT_MAX_TOKENS: offering the %d most relevant of %d tools",
            len(chosen),
            len(tools),
        )
        return [tools[i] for i in chosen], [costs[i] for i in chosen]


def _transcript(turns: Sequence[Turn]) -> str:
    """``turns`` as the summarizer reads them."""
    return "\n".join(
        f"{m['role']}: {m['content']}" for m in history_messages(turns) if isinstance(m.get("content"), str)
    )


def _words(text: str) -> set[str]:
    return {word for word in re.findall(r"[a-z0-9]+", text.lower()) if len(word) > 2}
