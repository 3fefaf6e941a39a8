"""Stored turns replayed as chat messages."""

from __future__ import annotations

from master.conversation.history import history_messages
from master.conversation.store import StoredTurn


def test_a_query_and_its_tool_calls_become_one_exchange() -> None:
    turns = [
        {
            "query_id": "q1",
            "query": "Weather?",
            "decision": "call_tool",
            "tool_agent_id": "w",
            "tool_name": "get",
            "tool_args": {"city": "Oslo"},
            "result": {"c": 3},
        },
        {
            "query_id": "q1",
            "query": "Weather?",
            "decision": "call_tool",
            "tool_agent_id": "w",
            "tool_name": "get",
            "tool_args": {"city": "Rome"},
            "error": "down",
            "answer": "Oslo 3, Rome unknown.",
        },
        {"query_id": "q2", "query": "Thanks", "decision": "answer_directly", "answer": "You're welcome."},
    ]
    assert history_messages(turns) == [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": '[called w.get({"city": "Oslo"}) returned {"c": 3}]\n'
            '[called w.get({"city": "Rome"}) failed: down]\nOslo 3, Rome unknown.',
        },
        {"role": "user", "content": "Thanks"},
        {"role": "assistant", "content": "You're welcome."},
    ]


def test_summaries_are_system_messages_and_split_exchanges() -> None:
    turns = [
        {"query_id": "q1", "query": "a", "decision": "answer_directly", "answer": "A"},
        {"decision": "summary", "summary": "talked about a", "covers_through_index": 0},
        {"query_id": "q2", "query": "b", "decision": "answer_directly", "answer": "B"},
    ]
    assert [m["role"] for m in history_messages(turns)] == [
        "user",
        "assistant",
        "system",
        "user",
        "assistant",
    ]
    assert history_messages(turns)[2]["content"] == "Summary of the earlier conversation: talked about a"


def test_a_collaboration_without_a_query_is_a_system_note() -> None:
    turn = {
        "decision": "collaboration",
        "agents": ["b", "s"],
        "task": "price",
        "message_count": 4,
        "reason": "completed",
        "summary": "75 per unit",
    }
    assert history_messages([turn]) == [
        {
            "role": "system",
            "content": "[collaboration of b, s on 'price' (4 messages, completed): 75 per unit]",
        }
    ]


def test_long_tool_results_are_cut() -> None:
    turn = {
        "query_id": "q",
        "query": "big",
        "decision": "call_tool",
        "tool_agent_id": "a",
        "tool_name": "t",
        "tool_args": {},
        "result": "x" * 10_000,
        "answer": "done",
    }
    content = history_messages([turn])[1]["content"]
    assert len(content) < 2200 and content.endswith("]\ndone")


def test_unanswered_query_has_no_assistant_message() -> None:
    assert history_messages([{"query_id": "q", "query": "hm", "decision": "plan"}]) == [
        {"role": "user", "content": "hm"}
    ]


def test_a_stateless_clients_messages_become_turns_replayed_as_they_were() -> None:
    from master.conversation.history import turns_from_messages

    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Time in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "function": {"name": "local_time", "arguments": '{"city":"Paris"}'}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "10:30"},
        {"role": "assistant", "content": "10:30."},
    ]
    turns = turns_from_messages(messages)
    assert turns[0] == {"decision": "instructions", "content": "Be brief."}
    assert turns[2]["tool_agent_id"] == "client" and turns[2]["tool_name"] == "local_time"
    replayed = history_messages(turns)
    assert replayed[0] == {"role": "system", "content": "Be brief."}
    assert replayed[1] == {"role": "user", "content": "Time in Paris?"}
    assert replayed[2]["role"] == "assistant"
    assert "[called client.local_time" in replayed[2]["content"] and replayed[2]["content"].endswith("10:30.")


def _stored(turns: list[dict[str, object]]) -> list[StoredTurn]:
    return [StoredTurn(turn) for turn in turns]


def _session(queries: int) -> list[dict[str, object]]:
    turns: list[dict[str, object]] = [{"decision": "summary", "summary": "earlier talk"}]
    for i in range(queries):
        turns.append(
            {
                "query_id": f"q{i}",
                "query": f"Q{i}",
                "decision": "call_tool",
                "tool_agent_id": "a",
                "tool_name": "t",
                "tool_args": {"i": i},
                "result": i,
            }
        )
        turns.append(
            {"query_id": f"q{i}", "query": f"Q{i}", "decision": "answer_directly", "answer": f"A{i}"}
        )
        if i % 3 == 1:
            turns.append({"decision": "collaboration", "agents": ["a", "b"], "task": "x", "summary": f"c{i}"})
    return turns


def test_a_sessions_next_query_replays_the_same_messages_from_the_kept_prefix() -> None:
    plain = _session(6)
    stored = _stored(plain)
    assert history_messages(stored[:9]) == history_messages(plain[:9])
    assert isinstance(stored[0].prefix, tuple)
    # The next query: the same stored turns and more (the last query's answer among them).
    for end in range(9, len(plain) + 1):
        assert history_messages(stored[:end]) == history_messages(plain[:end]), end
    assert history_messages(stored) == history_messages(stored)


def test_the_prefix_is_not_used_for_another_list_of_turns() -> None:
    stored = _stored(_session(5))
    history_messages(stored)
    shifted = [stored[0], *stored[3:]]  # the same first turn, then other turns (a context window)
    assert history_messages(shifted) == history_messages([dict(turn) for turn in shifted])
    changed = [*stored[:4], StoredTurn({"query_id": "new", "query": "N", "decision": "answer_directly"})]
    assert history_messages(changed) == history_messages([dict(turn) for turn in changed])
