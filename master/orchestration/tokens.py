"""Token counting with tiktoken's ``cl100k_base``, offline.

tiktoken downloads its encoding files on first use, which fails without
internet. The ``bpe-openai`` package ships the same ``cl100k_base`` ranks, so the
encoding is built from that file with tiktoken's split pattern and special tokens
(``tests/master/orchestration/test_tokens.py`` checks they match tiktoken's own
``cl100k_base`` constructor).
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterable, Sequence
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import tiktoken
from tiktoken_ext import openai_public

from master.caches import SizedLRU

_PER_MESSAGE = 4
"""Tokens of the chat framing around each message (OpenAI's cookbook estimate)."""


def _ranks() -> dict[bytes, int]:
    # Locate the file without importing bpe_openai (its import does work of its own we do not need).
    spec = find_spec("bpe_openai")
    if spec is None or spec.origin is None:
        raise RuntimeError("the bpe-openai package is missing: pip install bpe-openai")
    path = Path(spec.origin).parent / "data" / "cl100k_base.tiktoken.gz"
    raw = gzip.decompress(path.read_bytes())
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


# tiktoken_ext.openai_public.cl100k_base()'s pattern and special tokens (that function would
# download the ranks).
CL100K_PAT_STR = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
CL100K_SPECIAL_TOKENS = {
    openai_public.ENDOFTEXT: 100257,
    openai_public.FIM_PREFIX: 100258,
    openai_public.FIM_MIDDLE: 100259,
    openai_public.FIM_SUFFIX: 100260,
    openai_public.ENDOFPROMPT: 100276,
}


@cache
def encoding() -> tiktoken.Encoding:
    """The ``cl100k_base`` encoding, built without network access."""
    return tiktoken.Encoding(
        name="cl100k_base",
        pat_str=CL100K_PAT_STR,
        mergeable_ranks=_ranks(),
        special_tokens=CL100K_SPECIAL_TOKENS,
    )


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
    """Approximate prompt tokens of chat messages (content, tool calls and framing)."""
    total = 0
    for message in messages:
        total += _PER_MESSAGE
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
