"""Token counting with tiktoken's ``cl100k_base``, offline.

The encoding is the one the SDK and the master share (``openagent._tokens``, which needs only
tiktoken and bpe-openai, not the RAG system): tiktoken downloads its encoding files on first
use, which fails without internet, so it is built from the ``cl100k_base`` ranks the
``bpe-openai`` package ships (the RAG chunker counts with the same one).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, cast

from master.caches import SizedLRU
from master.llm.chat_endpoint import SharedMessage, list_slice, shared_run, starts_with
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
    never changed) keeps its count, and the first of a run of them the run's (``run_tokens``), so
    a long session is not re-counted message by message.
    """
    if not isinstance(messages, Sequence):
        messages = list(messages)
    total = 0
    index = 0
    while index < len(messages):
        message = messages[index]
        if not isinstance(message, SharedMessage):
            total += _count_message(message)
            index += 1
            continue
        done, run_total = index, 0
        kept = message.run_tokens
        if kept is not None and starts_with(messages, kept[0], index):
            done, run_total = index + len(kept[0]), kept[1]
        end = shared_run(messages, done)
        for shared in cast("Sequence[SharedMessage]", messages[done:end]):
            if shared.tokens is None:
                shared.tokens = _count_message(shared)
            run_total += shared.tokens
        if kept is None or done != end:
            message.run_tokens = (list_slice(messages, index, end), run_total)
        total += run_total
        index = end
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
