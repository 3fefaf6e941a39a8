"""Stored session turns replayed as chat messages for the model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from master.conversation.store import StoredTurn
from master.llm.chat_endpoint import SharedMessage, list_slice, starts_with
from master.llm.model import ChatMessage

_HISTORY_RESULT_CHARS = 2000
"""Tool results longer than this are cut when earlier turns are replayed to the model."""


def history_messages(turns: Sequence[dict[str, Any]]) -> list[ChatMessage]:
    """Replay stored turns as chat messages: each query and its answer, with tool results inline.

    Turns of one query share its ``query_id``; summary turns become system messages, and turns
    of no query (a collaboration started over HTTP) become system notes.

    The messages of a query whose turns are :class:`StoredTurn` objects are kept on its first
    turn (as :class:`SharedMessage` objects, whose JSON the LLM client keeps in turn): the
    next query of the session replays them without rendering or encoding them again. And when
    ``turns`` starts with a :class:`StoredTurn`, the messages of every query but the last are
    kept on that first turn with the turns they came from: the next call whose list starts with
    the very same turns (a session's next query: its stored turns plus the new ones) renders
    only what follows them, instead of walking a long session's every turn again.
    """
    messages: list[ChatMessage] = []
    group: list[dict[str, Any]] = []
    start = 0
    first = turns[0] if turns else None
    if isinstance(first, StoredTurn) and isinstance(first.prefix, tuple):
        done, rendered = first.prefix
        if starts_with(turns, done):
            messages.extend(rendered)
            start = len(done)
    settled = start  # turns[:settled] are rendered into messages[:kept] for good
    kept = len(messages)

    def flush() -> None:
        if group:
            messages.extend(_query_messages(group))
            group.clear()

    for index in range(start, len(turns)):
        turn = turns[index]
        if not group:  # whatever came before this turn is rendered and will not change
            settled, kept = index, len(messages)
        if turn.get("decision") == "instructions":
            flush()
            messages.append({"role": "system", "content": str(turn.get("content", ""))})
            continue
        if turn.get("decision") == "summary":
            flush()
            messages.append(
                {
                    "role": "system",
                    "content": f"Summary of the earlier conversation: {turn.get('summary', '')}",
                }
            )
            continue
        if turn.get("late_callback"):  # a result recorded after its query was gone (call_records)
            flush()
        if turn.get("late_callback") or (turn.get("query_id") is None and "query" not in turn):
            note = _note(turn)
            if note:
                messages.append({"role": "system", "content": note})
            continue
        if group and turn.get("query_id") != group[0].get("query_id"):
            flush()
            settled, kept = index, len(messages)
        group.append(turn)
    if not group:
        settled, kept = len(turns), len(messages)
    flush()
    if (
        isinstance(first, StoredTurn)
        and settled > start
        and all(isinstance(t, StoredTurn) for t in turns[start:settled])
    ):
        first.prefix = (list_slice(turns, 0, settled), messages[:kept])
    return messages


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
