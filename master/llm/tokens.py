"""Token counting with tiktoken's ``cl100k_base``, offline.

The encoding is the one the SDK and the master share (``openagent._tokens``, which needs only
tiktoken and bpe-openai, not the RAG system): tiktoken downloads its encoding files on first
use, which fails without internet, so it is built from the ``cl100k_base`` ranks the
``bpe-openai`` package ships (the RAG chunker counts with the same one).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from master.llm.chat_body import SharedMessage, shared_part
from master.storage.caches import SizedLRU
from openagent._tokens import encoding as encoding  # re-exported: the app warms it up

_PER_MESSAGE = 4
"""Tokens of the chat framing around each message (OpenAI's cookbook estimate)."""


TEXT_CACHE_CHARS = 8 * 1024 * 1024
"""Characters of text whose token counts are kept (a session's earlier turns are counted on
every query); bounded by size, so large distinct queries cannot pile up."""

_counts: SizedLRU[str, int] = SizedLRU(TEXT_CACHE_CHARS, lambda text, _: len(text) + 64, max_entries=65536)


def count_text(text: str) -> int:
    """Tokens of ``text``; memoized in a size-bounded cache."""
    cached = _counts.get(text)
    if cached is None:
        cached = len(encoding().encode(text, disallowed_special=()))
        _counts.put(text, cached)
    return cached


def text_cache_size() -> int:
    """Characters (plus a small overhead per entry) the token-count cache holds."""
    return _counts.size


def count_messages(messages: Iterable[dict[str, Any]]) -> int:
    """Approximate prompt tokens of chat messages (content, tool calls and framing).

    A :class:`~master.llm.chat_body.SharedMessage` (a session's replayed history, never
    changed) keeps its count, and a :class:`~master.llm.chat_body.SharedRun` the running
    counts of its messages, so a long session is not re-counted message by message.
    """
    if not isinstance(messages, Sequence):
        messages = list(messages)
    part = shared_part(messages)
    if part is None:
        return sum(map(_count_message, messages))
    run, at, count = part
    sums = run.token_sums
    for shared in run.items[len(sums) - 1 : count]:
        sums.append(sums[-1] + _count_message(shared))
    return (
        sums[count]
        + sum(map(_count_message, messages[:at]))
        + sum(map(_count_message, messages[at + count :]))
    )


def _count_message(message: dict[str, Any]) -> int:
    """One message's tokens (kept on a :class:`SharedMessage`)."""
    if isinstance(message, SharedMessage) and message.tokens is not None:
        return message.tokens
    total = _PER_MESSAGE
    content = message.get("content")
    if isinstance(content, str):
        total += count_text(content)
    for call in message.get("tool_calls") or ():
        function = call.get("function", {})
        total += count_text(function.get("name", "")) + count_text(function.get("arguments", ""))
    if isinstance(message, SharedMessage):
        message.tokens = total
    return total


def count_tools(tools: Sequence[dict[str, Any]]) -> int:
    """Tokens the tool definitions add to a request."""
    return sum(
        count_text(json.dumps(tool["function"], separators=(",", ":"))) + _PER_MESSAGE for tool in tools
    )


def count_tool(tool: dict[str, Any]) -> int:
    """Tokens one tool definition adds to a request."""
    return count_tools([tool])
