"""Offline token counting."""

from __future__ import annotations

import pytest

from master.llm import tokens
from master.llm.chat_body import Messages, SharedMessage, SharedRun
from master.llm.tokens import count_messages, count_text, count_tools, encoding


def test_cl100k_base_offline_matches_known_ids() -> None:
    assert encoding().name == "cl100k_base"
    assert encoding().encode("hello world") == [15339, 1917]
    assert count_text("") == 0


def test_counts_messages_and_tools() -> None:
    messages = [{"role": "user", "content": "hello world"}, {"role": "assistant", "content": None}]
    assert count_messages(messages) == 2 + 4 + 4
    tool = {"type": "function", "function": {"name": "x", "description": "d", "parameters": {}}}
    assert count_tools([tool]) > 4


def test_the_encoding_matches_tiktokens_own_cl100k_constructor() -> None:
    """The pattern and special tokens copied into tokens.py are tiktoken's (only the ranks' download is skipped)."""
    from unittest import mock

    from tiktoken_ext import openai_public

    from openagent import _tokens as tokens

    ranks = tokens._ranks()
    with mock.patch.object(openai_public, "load_tiktoken_bpe", lambda *args, **kwargs: ranks):
        params = openai_public.cl100k_base()
    assert params["pat_str"] == tokens._PAT_STR
    assert params["special_tokens"] == tokens._SPECIAL_TOKENS
    assert encoding().encode("hello world") == [15339, 1917]


def test_a_shared_message_is_counted_once_and_like_a_plain_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A session's replayed history (SharedMessage) keeps its count: later queries read it."""
    history = [
        SharedMessage(role="user", content="What is 12 times 7?"),
        SharedMessage(role="assistant", content="84"),
    ]
    plain = [dict(message) for message in history]
    assert count_messages(history) == count_messages(plain)
    assert [message.tokens for message in history] == [count_messages([m]) for m in plain]

    def fail(text: str) -> int:
        raise AssertionError(f"counted again: {text!r}")

    monkeypatch.setattr(tokens, "count_text", fail)
    assert count_messages(history) == count_messages(plain[:0]) + sum(m.tokens or 0 for m in history)


def test_the_master_counts_tokens_without_the_rag_system() -> None:
    """The tokenizer is shared with the SDK's RAG chunker, but importing it loads no RAG module."""
    import subprocess
    import sys

    from tests.factories import ROOT

    code = (
        "import sys, master.llm.tokens as tokens\n"
        "assert tokens.count_text('hello world') == 2\n"
        "leaked = sorted(m for m in sys.modules if m.startswith('openagent.rag') or m in ('numpy', 'pypdf'))\n"
        "assert not leaked, leaked\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0, completed.stderr


def test_a_grown_history_is_counted_as_if_nothing_were_kept() -> None:
    """A shared run keeps the running counts of its messages; a request that shares its first
    messages (a longer, or an older and shorter one) counts as plain messages do."""
    run = SharedRun()
    run.items += (SharedMessage(role="user", content=f"message number {i}") for i in range(8))
    for end in (2, 2, 5, 8, 3):
        messages = Messages([{"role": "system", "content": "s"}])
        messages.share(run)
        del messages[1 + end :]
        messages.size = end
        messages.append({"role": "user", "content": "q"})
        assert count_messages(messages) == count_messages([dict(m) for m in messages])
    assert len(run.token_sums) == 9
    other = [run.items[0], SharedMessage(role="user", content="a different one, longer"), *run.items[2:4]]
    assert count_messages(other) == count_messages([dict(m) for m in other])
