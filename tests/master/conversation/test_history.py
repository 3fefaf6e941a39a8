"""Stored turns replayed as chat messages."""

from __future__ import annotations

from collections.abc import Sequence

from master.conversation.history import context_messages, history_messages
from master.conversation.turn_log import SessionTurns, StoredTurn, TurnLog


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


def _expected(
    turns: Sequence[dict[str, object]], summaries: Sequence[dict[str, object]] = ()
) -> list[object]:
    """What context_messages must give, by rendering every turn again."""
    return [
        {"role": "system", "content": "s"},
        *history_messages([*summaries, *turns]),
        {"role": "user", "content": "q"},
    ]


def test_a_sessions_next_query_replays_only_its_new_turns_from_the_shared_run() -> None:
    """The stored turns' messages are kept on the session's log as one shared run, which each
    query's messages share and the next query extends; every query's messages are still those
    of a replay of every turn, with turns not stored yet, and for a query that loaded the session
    before the last turns were stored."""
    plain = _session(8)
    log = TurnLog([], 0)
    runs = []
    for end in range(1, len(plain) + 1):
        older = SessionTurns(log)
        log.extend(StoredTurn(turn) for turn in plain[len(log) : end])  # the store appends in place
        turns = SessionTurns(log)
        messages = context_messages("s", [], turns, [(0, len(turns))], "q")
        assert messages == _expected(plain[:end]), end
        if messages.run is not None:
            runs.append(messages.run)
            assert messages[messages.at : messages.at + messages.size] == messages.run.items
        pending = SessionTurns(log)
        pending += plain[end : end + 2]  # a query's own turns, not stored yet
        assert context_messages("s", [], pending, [(0, len(pending))], "q") == _expected(plain[: end + 2])
        assert context_messages("s", [], older, [(0, len(older))], "q") == _expected(plain[: len(older)])
    assert runs and all(run is runs[0] for run in runs)
    assert len(runs[0].items) > len(history_messages(plain)) - 4  # all but the last query's


def test_the_shared_run_skips_the_summary_turns_between_spans() -> None:
    """After a summary, the raw turns are two spans around the summary turn; the run is kept for
    them, and a later summary (another first span) starts another."""
    plain = _session(6)
    summary = {"decision": "summary", "summary": "later", "covers_through_index": 6}
    plain.insert(9, summary)
    log = TurnLog([], 0)
    for end in range(10, len(plain) + 1):
        log.extend(StoredTurn(turn) for turn in plain[len(log) : end])
        turns = SessionTurns(log)
        spans = [(7, 9), (10, len(turns))]
        raw = [*plain[7:9], *plain[10:end]]
        assert context_messages("s", [summary], turns, spans, "q") == _expected(raw, [summary]), end
    first = log.replay
    turns = SessionTurns(log)
    assert context_messages("s", [], turns, [(12, len(turns))], "q") == _expected(plain[12:])
    assert log.replay is not first


def test_the_shared_run_is_not_used_by_a_query_that_skips_a_turn_it_replayed() -> None:
    """A run kept for spans with no gap is not shared with a query whose spans skip one of the
    turns it holds (a summary turn it replayed as a system message)."""
    plain = _session(6)
    plain.insert(7, {"decision": "summary", "summary": "middle", "covers_through_index": -1})
    log = TurnLog([StoredTurn(turn) for turn in plain], 0)
    turns = SessionTurns(log)
    assert context_messages("s", [], turns, [(0, len(turns))], "q") == _expected(plain)
    spans = [(0, 7), (8, len(turns))]
    assert context_messages("s", [], turns, spans, "q") == _expected([*plain[:7], *plain[8:]])


def test_a_list_of_turns_that_is_not_a_sessions_shares_nothing() -> None:
    stored = _stored(_session(5))
    messages = context_messages("s", [], stored, [(0, len(stored))], "q")
    assert messages.run is None and messages == _expected(stored)
