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

from master.caches import SizedLRU
from master.llm.chat_endpoint import SharedMessage
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

    A :class:`~master.llm.chat_endpoint.SharedMessage` (a session's replayed history,
    never changed) keeps its count, so a long session is not re-counted message by message.
    """
    total = 0
    for message in messages:
        if isinstance(message, SharedMessage):
            if message.tokens is None:
                message.tokens = _count_message(message)
            total += message.tokens
        else:
            total += _count_message(message)
    return total


def _count_message(message: dict[str, Any]) -> int:
    total = _PER_MESSAGE
    content = message.get("content")
    if isinstance(content, str):
        total += count_text(content)
    for call in message.get("tool_calls") or ():
        function = call.get("function", {})
        total += count_text(function.get("name", "")) + count_text(function.get("arguments", ""))
    return total


def count_tools(tools: Sequence[dict[str, Any]]) -> int:
    """Tokens the tool definitions add to a request."""
    return sum(
        count_text(json.dumps(tool["function"], separators=(",", ":"))) + _PER_MESSAGE for tool in tools
    )


def count_tool(tool: dict[str, Any]) -> int:
    """Tokens one tool definition adds to a request."""
    return count_tools([tool])
