"""Stored session turns replayed as chat messages for the model."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, cast

from master.conversation.turn_log import SessionTurns, StoredTurn, Turn
from master.llm.model import ChatMessage, Messages, SharedMessage, SharedRun

_HISTORY_RESULT_CHARS = 2000
"""Tool results longer than this are cut when earlier turns are replayed to the model."""


def history_messages(turns: Sequence[Turn]) -> list[ChatMessage]:
    """Replay stored turns as chat messages: each query and its answer, with tool results inline.

    Turns of one query share its ``query_id``; summary turns become system messages, and turns
    of no query (a collaboration started over HTTP) become system notes. The messages of a
    query whose turns are :class:`StoredTurn` objects are kept on its first turn.
    """
    messages: list[ChatMessage] = []
    _replay(turns, range(len(turns)), messages)
    return messages


def context_messages(
    system: str,
    summaries: Sequence[Turn],
    turns: Sequence[Turn],
    spans: Sequence[tuple[int, int]],
    query: str,
) -> Messages:
    """A query's messages for the model: the system prompt, the summaries in effect, the turns
    ``turns[start:end]`` of each span replayed (:func:`history_messages`), and the query.

    When ``turns`` is a :class:`SessionTurns`, the replayed messages of its stored turns are kept
    on its :class:`TurnLog` as a :class:`SharedRun`, which the messages share: a session's next
    query replays only its new turns, and the model's client finds the history's JSON and token
    count without walking it (:func:`master.llm.chat_body.chat_pieces`).
    """
    messages = Messages([{"role": "system", "content": system}])
    if summaries:
        messages.extend(_summary_message(summary) for summary in summaries)
    if spans:  # a new session has none
        done = _shared_replay(turns, spans, messages) if isinstance(turns, SessionTurns) else 0
        _replay(turns, _positions(spans, done, len(turns)), messages)
    messages.append({"role": "user", "content": query})
    return messages


class _Replay:
    """What a :class:`TurnLog` keeps of its replay from turn ``start`` on: ``run`` holds the
    messages of its turns up to ``settled`` (not the turns at ``gaps``, summary turns), which no
    later turn changes."""

    __slots__ = ("gaps", "run", "settled", "start")

    def __init__(self, start: int) -> None:
        self.start = start
        self.settled = start
        self.gaps: tuple[int, ...] = ()
        self.run = SharedRun()


def _shared_replay(turns: SessionTurns, spans: Sequence[tuple[int, int]], messages: Messages) -> int:
    """Add to ``messages`` the shared messages of the turns in ``spans``, replayed up to a
    position, which is returned (0: none shared). Extends the log's replay with the stored turns
    whose messages are final."""
    log, stored = turns.log, turns.stored
    start = spans[0][0]
    gaps = [gap for (_, end), (after, _) in itertools.pairwise(spans) for gap in range(end, after)]
    memo = log.replay
    if not (
        isinstance(memo, _Replay)
        and memo.start == start
        and memo.settled <= stored
        and memo.gaps == tuple(gap for gap in gaps if gap < memo.settled)
    ):
        if isinstance(memo, _Replay) and memo.start == start and memo.settled > stored:
            return 0  # a later query of the session replayed more: not this one's to share
        memo = _Replay(start)
        log.replay = memo
    if memo.settled < stored:
        rendered: list[ChatMessage] = []
        settled, kept = _replay(turns, _positions(spans, memo.settled, stored), rendered)
        memo.run.items.extend(cast("list[SharedMessage]", rendered[:kept]))
        memo.settled = stored if settled is None else settled
        memo.gaps = tuple(gap for gap in gaps if gap < memo.settled)
    if memo.run.items:
        messages.share(memo.run)
    return memo.settled


def _positions(spans: Sequence[tuple[int, int]], low: int, high: int) -> Iterator[int]:
    """The positions of ``spans`` from ``low`` to before ``high``."""
    for start, end in spans:
        yield from range(max(start, low), min(end, high))


def _replay(
    turns: Sequence[Turn], positions: Iterable[int], messages: list[ChatMessage]
) -> tuple[int | None, int]:
    """Append the messages of the turns at ``positions`` (ascending) to ``messages``. Returns where
    the last query's messages start, which its next turns could change: the position of its first
    turn (``None``: no query is open) and the length ``messages`` had before them."""
    group: list[Turn] = []
    settled: int | None = None
    kept = len(messages)

    def flush() -> None:
        if group:
            messages.extend(_query_messages(group))
            group.clear()

    for index in positions:
        turn = turns[index]
        if not group:  # whatever came before this turn is rendered and will not change
            settled, kept = index, len(messages)
        if turn.get("decision") == "instructions":
            flush()
            messages.append(SharedMessage(role="system", content=str(turn.get("content", ""))))
            continue
        if turn.get("decision") == "summary":
            flush()
            messages.append(_summary_message(turn))
            continue
        if turn.get("late_callback"):  # a result recorded after its query was gone (call_records)
            flush()
        if turn.get("late_callback") or (turn.get("query_id") is None and "query" not in turn):
            note = _note(turn)
            if note:
                messages.append(SharedMessage(role="system", content=note))
            continue
        if group and turn.get("query_id") != group[0].get("query_id"):
            flush()
            settled, kept = index, len(messages)
        group.append(turn)
    if not group:
        settled, kept = None, len(messages)
    flush()
    return settled, kept


def _summary_message(turn: Turn) -> SharedMessage:
    return SharedMessage(
        role="system", content=f"Summary of the earlier conversation: {turn.get('summary', '')}"
    )


CLIENT = "client"
"""The ``tool_agent_id`` of a call the asker ran itself (a client tool of the OpenAI-compatible API)."""


def turns_from_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """An asker's earlier chat messages (OpenAI's format, text content) as session turns, for a
    stateless asker's new session: system messages become ``instructions`` turns (replayed as
    system messages), each user message and what answered it one query's turns, a call of the
    asker's own tools and its result a ``call_tool`` turn of agent :data:`CLIENT`."""
    turns: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    query_id: str | None = None
    for index, message in enumerate(messages):
        role, content = message.get("role"), message.get("content") or ""
        if role in ("system", "developer"):
            turns.append({"decision": "instructions", "content": content})
        elif role == "user":
            query_id = f"earlier-{index}"
            turns.append({"query": content, "query_id": query_id, "decision": "question"})
        elif role == "assistant":
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                calls[str(call.get("id"))] = {
                    "name": function.get("name"),
                    "arguments": function.get("arguments"),
                }
            if content:
                turns.append({"query_id": query_id, "decision": "answer_directly", "answer": content})
        elif role == "tool":
            call = calls.get(str(message.get("tool_call_id")), {})
            turns.append(
                {
                    "query_id": query_id,
                    "decision": "call_tool",
                    "tool_agent_id": CLIENT,
                    "tool_name": call.get("name"),
                    "tool_args": call.get("arguments"),
                    "result": content,
                }
            )
    return turns


def _query_messages(group: list[dict[str, Any]]) -> list[ChatMessage]:
    """The user and assistant messages of one query's turns (memoized on stored turns)."""
    first, last = group[0], group[-1]
    if isinstance(first, StoredTurn):
        cached = first.replay
        if isinstance(cached, tuple) and cached[0] is last and cached[1] == len(group):
            return list(cached[2])
    query, notes, answer = "", [], ""
    for turn in group:
        if turn.get("query"):
            query = str(turn["query"])
        note = _note(turn)
        if note:
            notes.append(note)
        if turn.get("answer"):
            answer = str(turn["answer"])
    rendered: list[ChatMessage] = [SharedMessage(role="user", content=query)]
    text = "\n".join([*notes, answer]).strip()
    if text:
        rendered.append(SharedMessage(role="assistant", content=text))
    if isinstance(first, StoredTurn):
        first.replay = (last, len(group), tuple(rendered))
    return rendered


def _note(turn: dict[str, Any]) -> str | None:
    """A tool call or collaboration, in words."""
    decision = turn.get("decision")
    if decision == "call_tool":
        outcome = (
            f"returned {json.dumps(turn.get('result'), default=str)}"
            if "result" in turn
            else f"failed: {turn.get('error')}"
        )
        late = " (after its query had ended)" if turn.get("late_callback") else ""
        return (
            f"[called {turn.get('tool_agent_id')}.{turn.get('tool_name')}"
            f"({json.dumps(turn.get('tool_args'), default=str)}) {outcome[:_HISTORY_RESULT_CHARS]}{late}]"
        )
    if decision == "collaboration":
        return (
            f"[collaboration of {', '.join(turn.get('agents') or [])} on {turn.get('task')!r} "
            f"({turn.get('message_count')} messages, {turn.get('reason', 'completed')}): {turn.get('summary')}]"
        )
    return None
