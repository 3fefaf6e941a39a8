"""``POST /query`` end to end: real master, real Redis, scripted LLM through the real openai client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from master.conversation.context import split_turns
from master.conversation.history import context_messages
from master.llm.model import ChatResult, FunctionChatModel, ToolCallRequest
from openagent.testing import ScriptedOpenAIServer, TextReply
from tests.conftest import master_env
from tests.factories import WEATHER_TOOL, MasterProcess, RawPeer, free_port, in_process_master
from tests.master.conversation.test_context import faithful, summarized_session
from tests.master.orchestration.test_orchestrator import counter_agent


@pytest.fixture
async def http(master: MasterProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=15) as client:
        yield client


async def serve_one_call(peer: RawPeer, reply: dict[str, Any]) -> dict[str, Any]:
    call = await peer.recv()
    assert call["type"] == "tool_call"
    await peer.send({"type": "tool_result", "call_id": call["call_id"], **reply})
    return call


async def test_direct_answer_and_follow_up_sees_first_turn(
    http: httpx.AsyncClient, llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    llm.add_text("Paris is the capital of France.")
    first = (await http.post("/query", json={"query": "What is the capital of France?"})).json()
    assert first["success"] is True and first["agents_used"] == []
    session_id = first["session_id"]

    llm.add_text("About 2.1 million people.")
    second = (
        await http.post("/query", json={"query": "How many people live there?", "session_id": session_id})
    ).json()
    assert second["session_id"] == session_id
    messages = llm.requests[1]["messages"]
    assert {"role": "user", "content": "What is the capital of France?"} in messages
    assert {"role": "assistant", "content": "Paris is the capital of France."} in messages
    assert messages[-1] == {"role": "user", "content": "How many people live there?"}

    stored = json.loads(await redis_client.get(f"session:{session_id}"))
    assert [t["decision"] for t in stored] == ["answer_directly", "answer_directly"]
    assert (
        stored[0]["query"] == "What is the capital of France?" and stored[0]["query_id"] == first["query_id"]
    )
    assert 0 < await redis_client.ttl(f"session:{session_id}") <= 86400


async def test_tool_turn_is_stored_and_replayed(
    master: MasterProcess, http: httpx.AsyncClient, llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    peer = await RawPeer.connect(master.ws_url)
    try:
        await peer.register("weather-turns", tools=[WEATHER_TOOL])
        llm.add_tool_call("weather-turns__get_weather", {"city": "Paris"})
        llm.add_text("Sunny, 21 °C.")
        pending = asyncio.create_task(http.post("/query", json={"query": "Weather in Paris?"}))
        await serve_one_call(peer, {"success": True, "result": {"temperature_c": 21}})
        body = (await pending).json()
        assert body["agents_used"] == [{"agent_id": "weather-turns", "tool_name": "get_weather"}]
        turns = json.loads(await redis_client.get(f"session:{body['session_id']}"))
        assert turns == [
            {
                "query": "Weather in Paris?",
                "query_id": body["query_id"],
                "model": "gpt-4o-mini",
                "run_id": body["run_id"],
                "ts": turns[0]["ts"],
                "decision": "call_tool",
                "tool_agent_id": "weather-turns",
                "tool_name": "get_weather",
                "tool_args": {"city": "Paris"},
                "result": {"temperature_c": 21},
                "answer": "Sunny, 21 °C.",
            }
        ]
        llm.add_text("Yes, take sunglasses.")
        await http.post("/query", json={"query": "Sunglasses?", "session_id": body["session_id"]})
        history = llm.requests[-1]["messages"]
        assert any("temperature_c" in str(m.get("content")) for m in history if m["role"] == "assistant")
    finally:
        await peer.close()


async def test_invalid_arguments_go_back_to_the_model(
    master: MasterProcess, http: httpx.AsyncClient, llm: ScriptedOpenAIServer
) -> None:
    peer = await RawPeer.connect(master.ws_url)
    try:
        await peer.register("weather-strict", tools=[WEATHER_TOOL])
        llm.add_tool_call("weather-strict__get_weather", {"town": "Paris"})
        llm.add_text("I could not look that up.")
        body = (
            await http.post("/query", json={"query": "Weather?", "allowed_agent_ids": ["weather-strict"]})
        ).json()
        assert body["success"] is True and body["agents_used"] == []
        error = json.loads(llm.requests[1]["messages"][-1]["content"])["error"]
        assert '"city" is a required property' in error and error.startswith(
            "invalid arguments for 'get_weather'"
        )
        # Nothing was sent to the agent: the next frame it gets is the answer to its own ping.
        await peer.send({"type": "ping"})
        assert await peer.recv() == {"type": "pong"}
    finally:
        await peer.close()


async def test_failing_tool_is_reported_not_500(
    master: MasterProcess, http: httpx.AsyncClient, llm: ScriptedOpenAIServer
) -> None:
    peer = await RawPeer.connect(master.ws_url)
    try:
        await peer.register("weather-broken", tools=[WEATHER_TOOL])
        llm.add_tool_call("weather-broken__get_weather", {"city": "Paris"})
        llm.add_text("The weather service failed: upstream down.")
        pending = asyncio.create_task(http.post("/query", json={"query": "Weather?"}))
        await serve_one_call(peer, {"success": False, "error": "upstream down"})
        response = await pending
        assert response.status_code == 200
        error = json.loads(llm.requests[1]["messages"][-1]["content"])["error"]
        assert error == "tool 'get_weather' on agent 'weather-broken' failed: upstream down"
    finally:
        await peer.close()


async def test_agent_killed_mid_call_fails_the_call_at_once(
    master: MasterProcess, http: httpx.AsyncClient, llm: ScriptedOpenAIServer
) -> None:
    peer = await RawPeer.connect(master.ws_url)
    await peer.register("weather-dies", tools=[WEATHER_TOOL])
    llm.add_tool_call("weather-dies__get_weather", {"city": "Paris"})
    llm.add_text("The weather agent went away.")
    pending = asyncio.create_task(http.post("/query", json={"query": "Weather?"}))
    await peer.recv()  # the tool_call: the agent now dies without answering
    peer.ws.transport.abort()
    response = await pending
    assert response.status_code == 200
    # Ended by the disconnect handler (TOOL_CALL_TIMEOUT is 120 s here), not by the timeout.
    error = json.loads(llm.requests[1]["messages"][-1]["content"])["error"]
    assert error == "agent 'weather-dies' disconnected while running tool 'get_weather'"


async def test_websocket_query_uses_the_same_path(master: MasterProcess, llm: ScriptedOpenAIServer) -> None:
    peer = await RawPeer.connect(master.ws_url)
    try:
        await peer.register("raw-asker", role="query")
        llm.add_text("Hello!")
        await peer.send({"type": "query", "query_id": "q-1", "query": "Hi"})
        result = await peer.recv()
        assert result["type"] == "query_result" and result["query_id"] == "q-1"
        assert result["success"] is True and result["answer"] == "Hello!" and result["session_id"]
        await peer.send({"type": "query", "query_id": "q-2", "query": "Hi", "orchestrator_model": "gpt-9"})
        failed = await peer.recv()
        assert failed["success"] is False and failed["error_code"] == "invalid_model"
    finally:
        await peer.close()


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        ({"query": "x", "orchestrator_model": "gpt-9"}, 400, "allowed models: gpt-4o-mini"),
        (
            {"query": "x", "session_id": "no-such-session"},
            404,
            "unknown or expired session 'no-such-session'",
        ),
        ({"query": "x", "auto_plan_execute": {"plan_id": "p1"}}, 400, "needs the session_id"),
        (
            {"query": "x", "attachments": [{"filename": "a.txt", "content_base64": "not base64!"}]},
            400,
            "attachment 'a.txt': content_base64 is not valid base64",
        ),
        (
            {
                "query": "x",
                "attachments": [{"filename": f"{n}.txt", "content_base64": "aGk="} for n in range(6)],
            },
            413,
            "6 files attached; at most 5 per query (RAG_MAX_ATTACHMENTS)",
        ),
    ],
)
async def test_rejected_queries(
    http: httpx.AsyncClient, body: dict[str, Any], status: int, needle: str
) -> None:
    response = await http.post("/query", json=body)
    assert response.status_code == status
    data = response.json()
    assert data["success"] is False and needle in data["error"]


@pytest.mark.parametrize(
    "body",
    [
        {"query": ""},
        {},
        {"query": "x", "orchestrator_prompt_profile": "pirate"},
        {"query": "x", "auto_mode": 3},
    ],
)
async def test_invalid_bodies_are_422(http: httpx.AsyncClient, body: dict[str, Any]) -> None:
    assert (await http.post("/query", json=body)).status_code == 422


async def test_malformed_json_body(http: httpx.AsyncClient) -> None:
    response = await http.post("/query", content=b"{oops", headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert "JSON" in json.dumps(response.json())


async def test_prompt_profile_reaches_the_model(http: httpx.AsyncClient, llm: ScriptedOpenAIServer) -> None:
    llm.add_text("ok")
    await http.post("/query", json={"query": "x", "orchestrator_prompt_profile": "reasoning"})
    assert "step by step" in llm.requests[0]["messages"][0]["content"]


async def test_orchestrator_models(http: httpx.AsyncClient) -> None:
    data = (await http.get("/query/orchestrator-models")).json()
    assert data["default_model"] == "gpt-4o-mini"
    assert data["prompt_profiles"] == ["default", "auto_multi", "reasoning", "roles"]
    assert data["attachment_limits"] == {"max_bytes": 2097152, "max_count": 5}


async def test_no_llm_configured_gives_503_naming_the_variables() -> None:
    async with in_process_master() as m, httpx.AsyncClient(base_url=m.base_url, timeout=30) as http:
        assert (await http.get("/agents")).status_code == 200
        response = await http.post("/query", json={"query": "hi"})
        assert response.status_code == 503
        assert "OPENAI_API_KEY" in response.json()["error"] and "OPENAI_BASE_URL" in response.json()["error"]


async def test_remote_llm_is_refused_under_test_guard() -> None:
    guarded = {"openai_base_url": "https://api.openai.com/v1", "openagent_llm_loopback_only": True}
    async with in_process_master(**guarded) as m, httpx.AsyncClient(base_url=m.base_url, timeout=30) as http:
        response = await http.post("/query", json={"query": "hi"})
        assert response.status_code == 503 and "OPENAGENT_LLM_LOOPBACK_ONLY" in response.json()["error"]


async def test_provider_errors_are_retried_then_reported(llm: ScriptedOpenAIServer) -> None:
    async with (
        in_process_master(openai_base_url=llm.base_url, openagent_llm_max_retries=2) as m,
        httpx.AsyncClient(base_url=m.base_url, timeout=60) as http,
    ):
        llm.add_error(429, "slow down")
        llm.add_error(503, "overloaded")
        llm.add_text("Recovered.")
        response = await http.post("/query", json={"query": "hi"})
        assert response.status_code == 200 and response.json()["answer"] == "Recovered."

        for _ in range(3):
            llm.add_error(500, "broken")
        response = await http.post("/query", json={"query": "hi"})
        assert response.status_code == 502
        body = response.json()
        assert body["error_code"] == "llm_error" and "HTTP 500" in body["error"] and "broken" in body["error"]


async def test_llm_timeout_is_reported(llm: ScriptedOpenAIServer) -> None:
    async with (
        in_process_master(openai_base_url=llm.base_url, openagent_llm_timeout=0.5) as m,
        httpx.AsyncClient(base_url=m.base_url, timeout=60) as http,
    ):
        llm.add_text("too late", delay=3)  # the client gives up at 0.5 s, however busy the machine
        response = await http.post("/query", json={"query": "hi"})
        assert response.status_code == 502 and response.json()["error_code"] == "llm_timeout"


async def test_oversized_body_is_413(llm: ScriptedOpenAIServer) -> None:
    async with (
        in_process_master(openai_base_url=llm.base_url, openagent_http_max_body_bytes=1000) as m,
        httpx.AsyncClient(base_url=m.base_url, timeout=30) as http,
    ):
        response = await http.post("/query", json={"query": "x" * 2000})
        assert response.status_code == 413


# In-process master, function-driven model: the promises of the query path.


def replayed_questions(messages: Sequence[dict[str, Any]]) -> list[str]:
    """The earlier questions replayed to the model, by number ("question N ...")."""
    return [m["content"].split(" ")[1] for m in messages[:-1] if m["role"] == "user"]


async def test_long_session_never_resends_summarized_turns(redis_client: aioredis.Redis) -> None:
    requests: list[list[dict[str, Any]]] = []

    def model(messages: Sequence[dict[str, Any]], tools: Any) -> ChatResult:
        if messages[0]["content"].startswith("Summarize"):
            return ChatResult("NEW SUMMARY " + faithful(messages[-1]["content"]))
        requests.append(list(messages))
        return ChatResult(f"answer {len(requests)}")

    session = summarized_session(30, 30)  # 61 turns: 30, their summary, 30 more
    session_id = "long-session-61"
    await redis_client.set(f"session:{session_id}", json.dumps(session), ex=600)
    limits = {"orchestrator_context_max_tokens": 1200, "orchestrator_recent_turns": 2}
    async with in_process_master(FunctionChatModel(model), **limits) as m:
        async with httpx.AsyncClient(base_url=m.base_url, timeout=30) as http:
            first = await http.post("/query", json={"query": "question 61 next", "session_id": session_id})
            assert first.status_code == 200, first.text
            second = await http.post("/query", json={"query": "question 62 again", "session_id": session_id})
            assert second.status_code == 200, second.text
    stored = json.loads(await redis_client.get(f"session:{session_id}"))
    new_summaries = [(i, t) for i, t in enumerate(stored) if t.get("summary", "").startswith("NEW SUMMARY")]
    assert [(i, t["covers_through_index"]) for i, t in new_summaries] == [(61, 58)]
    assert stored[58]["query"].startswith("question 57 ")
    # First query: both summaries, then the 2 recent turns; second: the turns after index 58.
    assert replayed_questions(requests[0]) == ["58", "59"]
    assert replayed_questions(requests[1]) == ["58", "59", "61"]
    summaries = [m["content"] for m in requests[1] if m["role"] == "system"][1:]
    assert summaries == [
        "Summary of the earlier conversation: EARLIER",
        f"Summary of the earlier conversation: {new_summaries[0][1]['summary']}",
    ]


async def test_each_query_of_a_growing_session_sends_the_history_a_replay_of_every_turn_gives(
    redis_client: aioredis.Redis,
) -> None:
    """A session's history is kept and extended query by query (its log, its shared run); what
    each query sends the model is still what rendering every stored turn again gives, through
    summaries made along the way and the raw turns on both sides of a summary turn."""
    requests: list[list[dict[str, Any]]] = []

    def model(messages: Sequence[dict[str, Any]], tools: Any) -> ChatResult:
        if messages[0]["content"].startswith("Summarize"):
            return ChatResult(f"SUMMARY {len(requests)} " + faithful(messages[-1]["content"]))
        requests.append([dict(message) for message in messages])
        return ChatResult(f"answer {len(requests)}: " + "words " * 20)

    session_id = "growing-session"
    await redis_client.set(f"session:{session_id}", json.dumps(summarized_session(6, 6)), ex=600)
    queries = [f"question {n} " + "padding " * 10 for n in range(12)]
    limits = {"orchestrator_context_max_tokens": 600, "orchestrator_recent_turns": 3}
    async with in_process_master(FunctionChatModel(model), **limits) as m:
        async with httpx.AsyncClient(base_url=m.base_url, timeout=30) as http:
            for query in queries:
                answer = await http.post("/query", json={"query": query, "session_id": session_id})
                assert answer.status_code == 200, answer.text
    stored = json.loads(await redis_client.get(f"session:{session_id}"))
    assert sum(turn.get("decision") == "summary" for turn in stored) >= 3  # summaries made on the way
    for query, sent in zip(queries, requests, strict=True):
        before = next(i for i, turn in enumerate(stored) if turn.get("query") == query)
        split = split_turns(stored[:before])
        expected = context_messages(sent[0]["content"], split.summaries, stored[:before], split.spans, query)
        assert sent == expected, query


async def test_a_stored_plan_runs_by_plan_id_alone(redis_client: aioredis.Redis) -> None:
    steps = [
        {"agent_id": "byid-agent", "tool_name": "step", "intent": "first", "arguments": {"n": 1}},
        {"agent_id": "byid-agent", "tool_name": "step", "intent": "second", "arguments": {"n": 2}},
    ]

    replayed: list[str] = []

    def model(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> ChatResult:
        replayed.extend(c["function"]["name"] for m in messages for c in m.get("tool_calls") or [])
        if [t["function"]["name"] for t in tools or []] == ["submit_plan"]:
            plan = json.dumps({"summary": "count to two", "steps": steps})
            return ChatResult(None, [ToolCallRequest("p1", "submit_plan", plan)])
        return ChatResult("Counted to two.")

    calls: list[int] = []
    async with in_process_master(FunctionChatModel(model)) as m, counter_agent(m, "byid-agent", calls):  # type: ignore[arg-type]
        async with httpx.AsyncClient(base_url=m.base_url, timeout=30) as http:
            proposed = (
                await http.post(
                    "/query",
                    json={"query": "count", "auto_mode": True, "auto_require_plan_approval": True},
                )
            ).json()
            assert proposed["status"] == "awaiting_approval" and calls == []
            execute = {"plan_id": proposed["plan"]["plan_id"]}  # no edited steps: the stored ones run
            done = await http.post(
                "/query",
                json={"query": "go", "session_id": proposed["session_id"], "auto_plan_execute": execute},
            )
    body = done.json()
    assert done.status_code == 200 and body["success"], body
    assert calls == [1, 2] and body["answer"] == "Counted to two."
    # The steps are replayed to the model as tool calls under valid OpenAI function names.
    assert replayed == ["byid-agent__step", "byid-agent__step"]
    assert body["agents_used"] == [{"agent_id": "byid-agent", "tool_name": "step"}]
    turns = json.loads(await redis_client.get(f"session:{proposed['session_id']}"))
    assert [t["decision"] for t in turns] == ["plan", "call_tool", "call_tool", "plan_executed"]
    assert [t["tool_args"] for t in turns[1:3]] == [{"n": 1}, {"n": 2}]


async def test_redis_down_fails_fast_before_the_llm_or_any_tool(
    scripted_llm: ScriptedOpenAIServer,
) -> None:
    """Defect 2: with Redis unreachable, the query is refused (503 naming Redis) before the model or a
    tool runs, instead of running both and answering "answered, but not stored"."""
    scripted_llm.reset()
    dead_redis = f"redis://127.0.0.1:{free_port()}/0"
    async with MasterProcess(master_env(scripted_llm, REDIS_URL=dead_redis)) as m:
        peer = await RawPeer.connect(m.ws_url)
        try:
            await peer.register("weather-no-redis", tools=[WEATHER_TOOL])
            scripted_llm.add_tool_call("weather-no-redis__get_weather", {"city": "Oslo"})
            scripted_llm.add_text("Cold.")
            async with httpx.AsyncClient(base_url=m.base_url, timeout=15) as http:
                response = await http.post("/query", json={"query": "Weather in Oslo?"})
            body = response.json()
            assert response.status_code == 503, body
            assert body["error_code"] == "session_store_unavailable" and "Redis" in body["error"]
            assert scripted_llm.requests == []
            with pytest.raises(TimeoutError):  # no tool call reached the agent
                await peer.recv(timeout=0.3)
        finally:
            await peer.close()
    scripted_llm.reset()


async def test_concurrent_executions_of_one_plan_run_it_once(
    master: MasterProcess, http: httpx.AsyncClient, llm: ScriptedOpenAIServer
) -> None:
    """Defect 3: of N concurrent ``auto_plan_execute`` requests for one plan, exactly one runs it
    (the tool runs once); the others get 409 ``plan_already_executed``."""
    peer = await RawPeer.connect(master.ws_url)
    calls: list[dict[str, Any]] = []

    async def serve() -> None:
        while True:
            call = await peer.recv(timeout=60)
            calls.append(call)
            await peer.send({"type": "tool_result", "call_id": call["call_id"], "success": True, "result": 1})

    await peer.register("plan-once", tools=[WEATHER_TOOL])
    server = asyncio.create_task(serve())
    try:
        step = {"agent_id": "plan-once", "tool_name": "get_weather", "arguments": {"city": "Rome"}}
        llm.add_tool_call("submit_plan", {"summary": "weather", "steps": [step]})
        proposed = (
            await http.post(
                "/query", json={"query": "weather", "auto_mode": True, "auto_require_plan_approval": True}
            )
        ).json()
        assert proposed["status"] == "awaiting_approval", proposed
        for _ in range(8):
            llm.add_text("Done.")
        execute = {
            "query": "go",
            "session_id": proposed["session_id"],
            "auto_plan_execute": {"plan_id": proposed["plan"]["plan_id"]},
        }
        responses = await asyncio.gather(*(http.post("/query", json=execute) for _ in range(8)))
        statuses = [r.status_code for r in responses]
        assert statuses.count(409) == 7, [r.text for r in responses]
        refused = next(r.json() for r in responses if r.status_code == 409)
        assert refused["error_code"] == "plan_already_executed"
        assert [c["arguments"] for c in calls] == [{"city": "Rome"}]
    finally:
        server.cancel()
        await asyncio.gather(server, return_exceptions=True)
        await peer.close()


async def test_concurrent_queries_on_a_long_session_write_one_summary(
    scripted_llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    """Defect 13: 16 concurrent queries on a session over the context limit make one summary (one
    summarizer call); the others wait for it and reuse it."""
    from master.conversation.context import SUMMARY_PROMPT

    scripted_llm.reset()
    scripted_llm.set_handler(
        lambda request: TextReply(
            faithful(request["messages"][-1]["content"])
            if request["messages"][0]["content"] == SUMMARY_PROMPT
            else "ok"
        )
    )
    session_id = "long-session-summary-once"
    history = [
        {
            "query": f"question {n} " + "word " * 60,
            "query_id": f"old{n}",
            "decision": "answer_directly",
            "answer": "a",
        }
        for n in range(40)
    ]
    await redis_client.set(f"session:{session_id}", json.dumps(history), ex=600)
    env = master_env(scripted_llm, ORCHESTRATOR_CONTEXT_MAX_TOKENS="1500", ORCHESTRATOR_RECENT_TURNS="2")
    try:
        async with MasterProcess(env) as m, httpx.AsyncClient(base_url=m.base_url, timeout=60) as http:
            responses = await asyncio.gather(
                *(
                    http.post("/query", json={"query": f"follow-up {n}", "session_id": session_id})
                    for n in range(16)
                )
            )
        assert [r.status_code for r in responses] == [200] * 16, [
            r.text for r in responses if r.status_code != 200
        ]
        stored = json.loads(await redis_client.get(f"session:{session_id}"))
        assert [t for t in stored if t.get("decision") == "summary"] != []
        assert len([t for t in stored if t.get("decision") == "summary"]) == 1
        summarizer_calls = [r for r in scripted_llm.requests if r["messages"][0]["content"] == SUMMARY_PROMPT]
        assert len(summarizer_calls) == 1
    finally:
        await redis_client.delete(f"session:{session_id}")
        scripted_llm.reset()


async def test_a_plan_with_no_linked_tool_is_refused_before_the_model_runs(
    http: httpx.AsyncClient, llm: ScriptedOpenAIServer
) -> None:
    """Found by the fuzzer: a plan request with no tool to plan with was a 502 (the model's plan was
    unusable); it is a 400 naming the reason, and the model is not asked."""
    body = {"query": "plan it", "auto_require_plan_approval": True, "allowed_agent_ids": []}
    response = await http.post("/query", json=body)
    assert response.status_code == 400 and response.json()["error_code"] == "invalid_query"
    assert "nothing to plan" in response.json()["error"] and llm.requests == []


async def test_a_query_that_leaves_no_room_for_a_tool_is_refused_before_the_llm() -> None:
    """Issue 20: a query that filled the context ran with none of the tools on offer ("offering
    the 0 most relevant of N tools") and the answer repeated it; it is refused with 400
    ``invalid_query`` naming ``ORCHESTRATOR_CONTEXT_MAX_TOKENS``, and the model is never asked."""
    asked: list[int] = []

    def model(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> ChatResult:
        asked.append(1)
        return ChatResult(str(messages[-1]["content"]))

    async with in_process_master(FunctionChatModel(model), orchestrator_context_max_tokens=2000) as m:  # type: ignore[arg-type]
        peer = await RawPeer.connect(m.ws_url)
        try:
            await peer.register("roomless-agent", tools=[WEATHER_TOOL])
            async with httpx.AsyncClient(base_url=m.base_url, timeout=60) as http:
                response = await http.post("/query", json={"query": "weather " * 2500})
        finally:
            await peer.close()
    body = response.json()
    assert response.status_code == 400 and body["error_code"] == "invalid_query", body
    assert "ORCHESTRATOR_CONTEXT_MAX_TOKENS" in body["error"] and "1 tool(s) on offer" in body["error"]
    assert asked == []
