"""Offline token counting."""

from __future__ import annotations

from master.tokens import count_messages, count_text, count_tools, encoding


def test_cl100k_base_offline_matches_known_ids() -> None:
    assert encoding().name == "cl100k_base"
    assert encoding().encode("hello world") == [15339, 1917]
    assert count_text("") == 0


def test_counts_messages_and_tools() -> None:
    messages = [{"role": "user", "content": "hello world"}, {"role": "assistant", "content": None}]
    assert count_messages(messages) == 2 + 4 + 4
    tool = {"type": "function", "function": {"name": "x", "description": "d", "parameters": {}}}
    assert count_tools([tool]) > 4
