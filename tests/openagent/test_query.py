"""QueryClient against a fake master: round trips, timeouts, errors, disconnects, concurrency."""

from __future__ import annotations

import asyncio

import pytest

from openagent import (
    ConfigurationError,
    ConnectionLostError,
    QueryClient,
    QueryError,
    QueryResult,
    QueryTimeoutError,
)
from protocol import AgentUsed, ErrorMessage, Query, RunEventFrame, StepEvent, ToolProgress
from tests.openagent.conftest import WAIT, FakeMaster, eventually, fast_config


def client_for(master: FakeMaster, **config: float) -> QueryClient:
    return QueryClient("asker", config=fast_config(master.url, **config))


async def next_query(master: FakeMaster) -> Query:
    agent_id, frame = await master.next_frame()
    assert agent_id == "asker"
    assert isinstance(frame, Query)
    return frame


def answer(query: Query, text: str) -> QueryResult:
    return QueryResult(query_id=query.query_id, session_id="s1", success=True, answer=text)


async def test_query_round_trip(fake_master: FakeMaster) -> None:
    async with client_for(fake_master) as client:
        registration = await fake_master.next_registration()
        assert (registration.agent_id, registration.role) == ("asker", "query")

        pending = asyncio.create_task(
            client.query("Weather in Paris?", allowed_agent_ids=["weather-agent"], auto_mode=True)
        )
        query = await next_query(fake_master)
        assert query.query == "Weather in Paris?"
        assert query.allowed_agent_ids == ["weather-agent"]
        assert query.auto_mode is True
        assert query.session_id is None
        used = [AgentUsed(agent_id="weather-agent", tool_name="get_weather")]
        await fake_master.send("asker", answer(query, "Sunny").model_copy(update={"agents_used": used}))

        async with asyncio.timeout(WAIT):
            result = await pending
    assert result.answer == "Sunny"
    assert result.agents_used == used


async def test_follow_up_sends_the_session_id(fake_master: FakeMaster) -> None:
    async with client_for(fake_master) as client:
        pending = asyncio.create_task(client.query("And tomorrow?", session_id="s1"))
        query = await next_query(fake_master)
        await fake_master.send("asker", answer(query, "Rainy"))
        async with asyncio.timeout(WAIT):
            assert (await pending).answer == "Rainy"
    assert query.session_id == "s1"


async def test_failed_query_is_a_result_not_an_exception(fake_master: FakeMaster) -> None:
    async with client_for(fake_master) as client:
        pending = asyncio.create_task(client.query("?"))
        query = await next_query(fake_master)
        failure = QueryResult(
            query_id=query.query_id, success=False, error="LLM down", error_code="llm_unavailable"
        )
        await fake_master.send("asker", failure)
        async with asyncio.timeout(WAIT):
            result = await pending
    assert (result.success, result.error_code) == (False, "llm_unavailable")


async def test_query_timeout_names_the_query_and_the_timeout(fake_master: FakeMaster) -> None:
    async with client_for(fake_master, query_timeout=0.1) as client:
        with pytest.raises(
            QueryTimeoutError, match=r"no answer to query \w+ \('Anyone there\?'\) within 0.1s"
        ):
            await client.query("Anyone there?")
        with pytest.raises(QueryTimeoutError, match="within 0.05s"):
            await client.query("Shorter", timeout=0.05)


async def test_late_answer_after_timeout_is_dropped(fake_master: FakeMaster) -> None:
    async with client_for(fake_master) as client:
        with pytest.raises(QueryTimeoutError) as caught:
            await client.query("slow", timeout=0.05)
        late = await next_query(fake_master)
        assert late.query_id == caught.value.query_id
        await fake_master.send("asker", answer(late, "too late"))

        pending = asyncio.create_task(client.query("next"))
        query = await next_query(fake_master)
        await fake_master.send("asker", answer(query, "on time"))
        async with asyncio.timeout(WAIT):
            assert (await pending).answer == "on time"


async def test_error_frame_fails_only_its_query(fake_master: FakeMaster) -> None:
    async with client_for(fake_master) as client:
        bad = asyncio.create_task(client.query("bad"))
        bad_query = await next_query(fake_master)
        good = asyncio.create_task(client.query("good"))
        good_query = await next_query(fake_master)

        error = ErrorMessage(message="unknown model 'gpt-9'", code="invalid_query", ref=bad_query.query_id)
        await fake_master.send("asker", error)
        with pytest.raises(QueryError, match="unknown model 'gpt-9'") as caught:
            async with asyncio.timeout(WAIT):
                await bad
        assert (caught.value.code, caught.value.query_id) == ("invalid_query", bad_query.query_id)

        await fake_master.send("asker", answer(good_query, "fine"))
        async with asyncio.timeout(WAIT):
            assert (await good).answer == "fine"


async def test_concurrent_queries_are_matched_by_query_id(fake_master: FakeMaster) -> None:
    async with client_for(fake_master) as client:
        questions = [f"question {i}" for i in range(10)]
        tasks = [asyncio.create_task(client.query(q)) for q in questions]
        queries = [await next_query(fake_master) for _ in questions]
        assert len({q.query_id for q in queries}) == len(questions)
        for query in reversed(queries):  # answered out of order
            await fake_master.send("asker", answer(query, f"answer to {query.query}"))
        async with asyncio.timeout(WAIT):
            results = await asyncio.gather(*tasks)
    assert [r.answer for r in results] == [f"answer to {q}" for q in questions]


async def test_disconnect_fails_pending_queries_then_the_client_recovers(fake_master: FakeMaster) -> None:
    async with client_for(fake_master) as client:
        await fake_master.next_registration()
        tasks = [asyncio.create_task(client.query(f"q{i}")) for i in range(3)]
        for _ in tasks:
            await next_query(fake_master)

        fake_master.abort_connection("asker")
        async with asyncio.timeout(WAIT):
            outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(outcome, ConnectionLostError) for outcome in outcomes), outcomes

        await fake_master.next_registration()
        await eventually(lambda: client.connected)
        pending = asyncio.create_task(client.query("again"))
        query = await next_query(fake_master)
        await fake_master.send("asker", answer(query, "back"))
        async with asyncio.timeout(WAIT):
            assert (await pending).answer == "back"


async def test_query_while_disconnected_fails_at_once(fake_master: FakeMaster) -> None:
    client = client_for(fake_master)
    with pytest.raises(ConnectionLostError, match="'asker' is not connected"):
        await client.query("hello?")


async def test_close_fails_pending_queries(fake_master: FakeMaster) -> None:
    client = client_for(fake_master)
    await client.connect()
    pending = asyncio.create_task(client.query("never answered"))
    await next_query(fake_master)
    await client.close()
    with pytest.raises(ConnectionLostError, match="closed"):
        async with asyncio.timeout(WAIT):
            await pending


async def test_relayed_progress_reaches_on_progress(fake_master: FakeMaster) -> None:
    updates: asyncio.Queue[ToolProgress] = asyncio.Queue()

    async def on_progress(update: ToolProgress) -> None:
        await updates.put(update)

    async with QueryClient("asker", config=fast_config(fake_master.url), on_progress=on_progress):
        await fake_master.next_registration()
        await fake_master.send("asker", ToolProgress(call_id="c1", message="indexing", progress=0.3))
        async with asyncio.timeout(WAIT):
            assert await updates.get() == ToolProgress(call_id="c1", message="indexing", progress=0.3)


async def test_run_events_reach_on_event_and_the_query_asks_for_them(fake_master: FakeMaster) -> None:
    frames: asyncio.Queue[RunEventFrame] = asyncio.Queue()

    async def on_event(frame: RunEventFrame) -> None:
        await frames.put(frame)

    async with QueryClient("asker", config=fast_config(fake_master.url), on_event=on_event) as client:
        await fake_master.next_registration()
        pending = asyncio.create_task(client.query("Plan it"))
        query = await next_query(fake_master)
        assert query.stream is True
        step = RunEventFrame(query_id=query.query_id, event=StepEvent(step=1, tool_calls=["a__t"]))
        await fake_master.send("asker", RunEventFrame(query_id="someone-else", event=StepEvent(step=9)))
        await fake_master.send("asker", step)
        await fake_master.send("asker", answer(query, "Done"))
        async with asyncio.timeout(WAIT):
            assert (await pending).answer == "Done"
            assert await frames.get() == step  # the other query's event was not handed on
        assert frames.empty()


async def test_invalid_arguments_are_configuration_errors(fake_master: FakeMaster) -> None:
    async with client_for(fake_master) as client:
        with pytest.raises(ConfigurationError, match="unknown query field.*'allowed_agents'"):
            await client.query("hi", allowed_agents=["x"])
        with pytest.raises(ConfigurationError, match="invalid query"):
            await client.query("")
        with pytest.raises(ConfigurationError, match="timeout must be greater than 0"):
            await client.query("hi", timeout=0)


def test_default_agent_id_is_random() -> None:
    config = fast_config("ws://127.0.0.1:1/ws")
    first, second = QueryClient(config=config), QueryClient(config=config)
    assert first.agent_id.startswith("query-client-")
    assert first.agent_id != second.agent_id
    with pytest.raises(ConfigurationError, match="invalid agent_id 'no spaces'"):
        QueryClient("no spaces", config=config)
