"""Stored session turns replayed as chat messages for the model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from master.orchestration.llm import ChatMessage

_HISTORY_RESULT_CHARS = 2000
"""Tool results longer than this are cut when earlier turns are replayed to the model."""


def history_messages(turns: Sequence[dict[str, Any]]) -> list[ChatMessage]:
    """Replay stored turns as chat messages: each query and its answer, with tool results inline.

    Turns of one query share its ``query_id``; summary turns become system messages, and turns
    of no query (a collaboration started over HTTP) become system notes.
    """
    messages: list[ChatMessage] = []
    group: dict[str, Any] | None = None

    def flush() -> None:
        if group is None:
            return
        messages.append({"role": "user", "content": group["query"]})
        text = "\n".join([*group["notes"], group["answer"]]).strip()
        if text:
            messages.append({"role": "assistant", "content": text})

    for turn in turns:
        decision = turn.get("decision")
        note = _note(turn)
        if decision == "summary":
            flush()
            group = None
            messages.append(
                {
                    "role": "system",
                    "content": f"Summary of the earlier conversation: {turn.get('summary', '')}",
                }
            )
            continue
        if turn.get("query_id") is None and "query" not in turn:
            if note:
                messages.append({"role": "system", "content": note})
            continue
        if group is None or turn.get("query_id") != group["query_id"]:
            flush()
            group = {"query_id": turn.get("query_id"), "query": "", "notes": [], "answer": ""}
        if turn.get("query"):
            group["query"] = str(turn["query"])
        if note:
            group["notes"].append(note)
        if turn.get("answer"):
            group["answer"] = str(turn["answer"])
    flush()
    return messages


def _note(turn: dict[str, Any]) -> str | None:
    """A tool call or collaboration, in words."""
    decision = turn.get("decision")
    if decision == "call_tool":
        outcome = (
            f"returned {json.dumps(turn.get('result'), default=str)}"
            if "result" in turn
            else f"failed: {turn.get('error')}"
        )
        return (
            f"[called {turn.get('tool_agent_id')}.{turn.get('tool_name')}"
            f"({json.dumps(turn.get('tool_args'), default=str)}) {outcome[:_HISTORY_RESULT_CHARS]}]"
        )
    if decision == "collaboration":
        return (
            f"[collaboration of {', '.join(turn.get('agents') or [])} on {turn.get('task')!r} "
            f"({turn.get('message_count')} messages, {turn.get('reason', 'completed')}): {turn.get('summary')}]"
        )
    return None
