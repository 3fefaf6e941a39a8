"""The OpenAI-compatible API, through the official ``openai`` clients and the OpenAI Agents SDK.

A real master (lifespan, Redis, uvicorn on loopback) whose LLM is the scripted server, a
WebSocket agent of the SDK with a ``multiply`` tool, and the clients as a user runs them. The
sync client runs in a worker thread: the master serves in the test's own event loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest

from openagent import OrchestratorActionAgent, ToolSchema
from openagent.config import ClientConfig
from openagent.testing import ScriptedOpenAIServer, ToolCall
from tests.factories import EVERY_TENANT, InProcessMaster, in_process_master

KEY = "openai-door-key"
SESSION_HEADER = "X-OpenAgent-Session-Id"

MULTIPLY = ToolSchema(
    name="multiply",
    description="Multiply two numbers",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
)

CLOCK_TOOL = {
    "type": "function",
    "function": {
        "name": "local_time",
        "description": "The time where the user is",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@dataclass
class Hub:
    master: InProcessMaster
    llm: ScriptedOpenAIServer
    calls: list[dict[str, Any]]
    clients: list[Any]

    @property
    def base_url(self) -> str:
        return f"{self.master.base_url}/v1"

    def client(self, key: str = KEY) -> openai.OpenAI:
        client = openai.OpenAI(base_url=self.base_url, api_key=key, max_retries=0, timeout=60)
        self.clients.append(client)
        return client

    def async_client(self, key: str = KEY) -> openai.AsyncOpenAI:
        client = openai.AsyncOpenAI(base_url=self.base_url, api_key=key, max_retries=0, timeout=60)
        self.clients.append(client)
        return client

    async def aclose(self) -> None:
        for client in self.clients:
            if isinstance(client, openai.AsyncOpenAI):
                await client.close()
            else:
                client.close()


@pytest.fixture
async def hub(llm: ScriptedOpenAIServer) -> AsyncIterator[Hub]:
    calls: list[dict[str, Any]] = []

    async def handler(tool_name: str, arguments: dict[str, Any], *, progress_callback: Any) -> dict[str, Any]:
        calls.append(arguments)
        await progress_callback("multiplying", 0.5)
        return {"product": arguments["a"] * arguments["b"]}

    async with in_process_master(
        openai_base_url=llm.base_url, openai_api_key="scripted", openagent_api_key=KEY
    ) as master:
        config = ClientConfig(master_ws=master.ws_url, api_key=KEY)
        async with OrchestratorActionAgent("calc", [MULTIPLY], handler, config=config):
            async with asyncio.timeout(30):
                while "calc" not in master.services.agents.known_ids(EVERY_TENANT):
                    await asyncio.sleep(0.01)
            hub = Hub(master, llm, calls, [])
            try:
                yield hub
            finally:
                await hub.aclose()


def _script_multiplication(llm: ScriptedOpenAIServer, answer: str = "12 times 7 is 84.") -> None:
    llm.add_tool_call("calc__multiply", {"a": 12, "b": 7})
    llm.add_text(answer)


QUESTION = [{"role": "user", "content": "What is 12 times 7?"}]


async def test_models_name_the_hub_and_each_agent(hub: Hub) -> None:
    models = await asyncio.to_thread(lambda: hub.client().models.list())
    ids = [model.id for model in models.data]
    assert ids[0] == "openagent" and "openagent/calc" in ids
    assert all(model.object == "model" and model.owned_by == "openagent" for model in models.data)
    async_ids = [model.id async for model in hub.async_client().models.list()]
    assert async_ids == ids


async def test_sync_client_gets_an_answer_through_a_hub_agent(hub: Hub) -> None:
    _script_multiplication(hub.llm)

    def ask() -> Any:
        return hub.client().chat.completions.with_raw_response.create(model="openagent", messages=QUESTION)

    raw = await asyncio.to_thread(ask)
    completion = raw.parse()
    assert completion.object == "chat.completion" and completion.model == "openagent"
    choice = completion.choices[0]
    assert choice.message.role == "assistant" and choice.message.content == "12 times 7 is 84."
    assert choice.finish_reason == "stop" and not choice.message.tool_calls
    assert hub.calls == [{"a": 12, "b": 7}]
    extras = completion.model_extra["openagent"]
    assert extras["agents_used"] == [{"agent_id": "calc", "tool_name": "multiply"}]
    assert extras["steps"] == 1
    assert raw.headers[SESSION_HEADER] == extras["session_id"]
    # The usage sums both LLM rounds, as the scripted server reported them.
    assert completion.usage is not None
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0
    assert (
        completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    )
    # The question reached the LLM with the agent's tool.
    first = hub.llm.requests[0]
    assert first["messages"][-1] == {"role": "user", "content": "What is 12 times 7?"}
    assert "calc__multiply" in {tool["function"]["name"] for tool in first["tools"]}


async def test_async_client_scoped_to_one_agent_with_parameters(hub: Hub) -> None:
    _script_multiplication(hub.llm)
    completion = await hub.async_client().chat.completions.create(
        model="openagent/calc",
        messages=[{"role": "user", "content": [{"type": "text", "text": "What is 12 times 7?"}]}],
        temperature=0.2,
        top_p=0.9,
        max_tokens=300,
        stop=["END"],
        seed=5,
    )
    assert completion.model == "openagent/calc"
    assert completion.choices[0].message.content == "12 times 7 is 84."
    for request in hub.llm.requests:
        assert request["temperature"] == 0.2 and request["top_p"] == 0.9
        assert request["max_tokens"] == 300 and request["stop"] == ["END"]
        assert "seed" not in request  # ignored: it does not apply to an orchestrator


async def test_streaming_chunks_have_openai_shape_and_end_with_done(hub: Hub) -> None:
    _script_multiplication(hub.llm, "Twelve times seven is 84.")
    stream = await hub.async_client().chat.completions.create(
        model="openagent", messages=QUESTION, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    assert all(c.object == "chat.completion.chunk" and c.model == "openagent" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    first, finish, usage_chunk = chunks[0], chunks[-2], chunks[-1]
    assert first.choices[0].delta.role == "assistant"
    middle = chunks[1:-2]
    assert middle and all(len(c.choices) == 1 and c.choices[0].finish_reason is None for c in middle)
    content = "".join(c.choices[0].delta.content or "" for c in middle)
    reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in middle)
    assert content == "Twelve times seven is 84."
    assert "Calling calc.multiply" in reasoning and "calc.multiply returned" in reasoning
    assert "multiplying" in reasoning  # the agent's progress
    assert finish.choices[0].finish_reason == "stop" and finish.choices[0].delta.content is None
    assert finish.model_extra["openagent"]["agents_used"] == [{"agent_id": "calc", "tool_name": "multiply"}]
    assert usage_chunk.choices == [] and usage_chunk.usage is not None
    assert usage_chunk.usage.total_tokens > 0

    # On the wire: Server-Sent Events ending with data: [DONE], the session in the headers.
    _script_multiplication(hub.llm)
    async with httpx.AsyncClient(timeout=60, headers={"Authorization": f"Bearer {KEY}"}) as http:
        body = {"model": "openagent", "messages": QUESTION, "stream": True}
        async with http.stream("POST", f"{hub.base_url}/chat/completions", json=body) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers[SESSION_HEADER]
            lines = [line async for line in response.aiter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    assert all(line.startswith("data: ") for line in lines)
    for line in lines[:-1]:
        assert "usage" not in json.loads(line.removeprefix("data: "))  # not asked for


async def test_think_tags_carry_the_steps_in_the_content(hub: Hub) -> None:
    door = hub.master.services.openai
    assert door is not None
    door._settings = door._settings.model_copy(update={"openagent_openai_think_tags": True})
    _script_multiplication(hub.llm)
    stream = await hub.async_client().chat.completions.create(
        model="openagent", messages=QUESTION, stream=True
    )
    content = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert content.startswith("<think>\nCalling calc.multiply")
    assert content.endswith("</think>\n\n12 times 7 is 84.")


async def test_follow_up_through_the_returned_session_id(hub: Hub) -> None:
    _script_multiplication(hub.llm)
    client = hub.async_client()
    first = await client.chat.completions.create(model="openagent", messages=QUESTION)
    session_id = first.model_extra["openagent"]["session_id"]
    hub.llm.add_text("Half of 84 is 42.")
    follow = [
        {"role": "user", "content": "ignored: the session holds the history"},
        {"role": "user", "content": "And half of that?"},
    ]
    second = await client.chat.completions.create(
        model="openagent", messages=follow, extra_headers={SESSION_HEADER: session_id}
    )
    assert second.choices[0].message.content == "Half of 84 is 42."
    assert second.model_extra["openagent"]["session_id"] == session_id
    sent = hub.llm.requests[-1]["messages"]
    texts = [m.get("content") or "" for m in sent]
    assert "What is 12 times 7?" in texts and "And half of that?" == texts[-1]
    assert not any("ignored" in text for text in texts)
    assert any("12 times 7 is 84." in text for text in texts)
    # metadata.session_id works too
    hub.llm.add_text("Still 42.")
    third = await client.chat.completions.create(
        model="openagent",
        messages=[{"role": "user", "content": "Sure?"}],
        metadata={"session_id": session_id},
    )
    assert third.model_extra["openagent"]["session_id"] == session_id


async def test_stateless_follow_up_with_the_full_history(hub: Hub) -> None:
    hub.llm.add_text("Half of 84 is 42.")
    history = [
        {"role": "system", "content": "Answer in one sentence."},
        {"role": "user", "content": "What is 12 times 7?"},
        {"role": "assistant", "content": "12 times 7 is 84."},
        {"role": "user", "content": "And half of that?"},
    ]
    completion = await asyncio.to_thread(
        lambda: hub.client().chat.completions.create(model="openagent", messages=history)  # type: ignore[arg-type]
    )
    assert completion.choices[0].message.content == "Half of 84 is 42."
    sent = hub.llm.requests[-1]["messages"]
    roles_and_texts = [(m["role"], m.get("content")) for m in sent]
    assert ("system", "Answer in one sentence.") in roles_and_texts
    assert roles_and_texts[-3:] == [
        ("user", "What is 12 times 7?"),
        ("assistant", "12 times 7 is 84."),
        ("user", "And half of that?"),
    ]
    # The history became the new session's: a follow-up by id sees it.
    hub.llm.add_text("Yes.")
    session_id = completion.model_extra["openagent"]["session_id"]
    await hub.async_client().chat.completions.create(
        model="openagent",
        messages=[{"role": "user", "content": "Sure?"}],
        metadata={"session_id": session_id},
    )
    assert ("user", "What is 12 times 7?") in [
        (m["role"], m.get("content")) for m in hub.llm.requests[-1]["messages"]
    ]


async def test_client_tools_pause_the_run_and_the_tool_messages_continue_it(hub: Hub) -> None:
    hub.llm.add_tool_calls(
        [
            ToolCall("calc__multiply", {"a": 12, "b": 7}),
            ToolCall("local_time", {"city": "Paris"}, "call_clock1"),
        ]
    )
    hub.llm.add_text("84, and it is 10:30 in Paris.")
    client = hub.async_client()
    messages: list[Any] = [{"role": "user", "content": "12 times 7, and what time is it in Paris?"}]
    first = await client.chat.completions.create(model="openagent", messages=messages, tools=[CLOCK_TOOL])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls or []
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("call_clock1", "local_time", {"city": "Paris"})
    ]  # the hub's own tool ran in the hub: never returned as a tool call
    assert hub.calls == [{"a": 12, "b": 7}]
    offered = {tool["function"]["name"] for tool in hub.llm.requests[0]["tools"]}
    assert {"local_time", "calc__multiply"} <= offered
    # A stateless client sends it all back, with the result: the same run goes on.
    messages += [choice.message.model_dump(exclude_none=True)]
    messages += [{"role": "tool", "tool_call_id": "call_clock1", "content": "10:30"}]
    second = await client.chat.completions.create(model="openagent", messages=messages, tools=[CLOCK_TOOL])
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "84, and it is 10:30 in Paris."
    assert second.model_extra["openagent"]["session_id"] == first.model_extra["openagent"]["session_id"]
    run_id = first.model_extra["openagent"]["run_id"]
    assert run_id and second.model_extra["openagent"]["run_id"] == run_id  # one run, paused and gone on
    async with httpx.AsyncClient(
        base_url=hub.master.base_url, headers={"Authorization": f"Bearer {KEY}"}
    ) as http:
        record = (await http.get(f"/runs/{run_id}")).json()
    assert record["state"] == "completed"
    assert [call["tool_name"] for call in record["completed"]] == ["multiply", "local_time"]
    resumed = hub.llm.requests[-1]["messages"]
    results = {m["tool_call_id"]: m["content"] for m in resumed if m["role"] == "tool"}
    assert results["call_clock1"] == "10:30" and '"product": 84' in next(
        content for call_id, content in results.items() if call_id != "call_clock1"
    )
    # The session holds the run as one exchange: the hub's call, the pause, the client's call.
    turns = await hub.master.services.sessions.load(
        first.model_extra["openagent"]["session_id"], EVERY_TENANT
    )
    assert turns is not None
    assert [turn["decision"] for turn in turns] == ["call_tool", "awaiting_tool_results", "call_tool"]
    assert len({turn["query_id"] for turn in turns}) == 1
    assert turns[-1]["tool_agent_id"] == "client" and turns[-1]["answer"] == "84, and it is 10:30 in Paris."
    # The results were used once: sending them again is refused, clearly.
    with pytest.raises(openai.BadRequestError, match="waits for tool results"):
        await client.chat.completions.create(model="openagent", messages=messages, tools=[CLOCK_TOOL])


async def test_errors_raise_the_openai_exceptions(hub: Hub) -> None:
    client = hub.async_client()
    with pytest.raises(openai.AuthenticationError) as auth:
        await hub.async_client(key="wrong").chat.completions.create(model="openagent", messages=QUESTION)
    assert auth.value.body["code"] == "unauthorized"  # type: ignore[index]
    with pytest.raises(openai.AuthenticationError):
        await asyncio.to_thread(lambda: hub.client(key="wrong").models.list())
    with pytest.raises(openai.NotFoundError, match="'gpt-4o' does not exist") as missing:
        await client.chat.completions.create(model="gpt-4o", messages=QUESTION)
    assert missing.value.body["param"] == "model"  # type: ignore[index]
    with pytest.raises(openai.NotFoundError, match="ghost"):
        await client.chat.completions.create(model="openagent/ghost", messages=QUESTION)
    with pytest.raises(openai.BadRequestError, match="'n' must be 1"):
        await client.chat.completions.create(model="openagent", messages=QUESTION, n=2)
    image = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    with pytest.raises(openai.BadRequestError, match=r"content\[1\] is an image"):
        await client.chat.completions.create(model="openagent", messages=[{"role": "user", "content": image}])
    with pytest.raises(openai.BadRequestError, match="tool_choice"):
        await client.chat.completions.create(
            model="openagent", messages=QUESTION, tools=[CLOCK_TOOL], tool_choice="required"
        )
    with pytest.raises(openai.NotFoundError, match="unknown or expired session"):
        await client.chat.completions.create(
            model="openagent", messages=QUESTION, extra_headers={SESSION_HEADER: "no-such-session"}
        )

    admission = hub.master.services.entry.admission
    taken = 0
    while admission.in_flight < admission.limit:
        admission.enter()
        taken += 1
    try:
        with pytest.raises(openai.RateLimitError) as limited:
            await client.chat.completions.create(model="openagent", messages=QUESTION)
        assert limited.value.response.headers["retry-after"] == "1"
        with pytest.raises(openai.RateLimitError):
            await asyncio.to_thread(
                lambda: hub.client().chat.completions.create(model="openagent", messages=QUESTION)  # type: ignore[arg-type]
            )
    finally:
        for _ in range(taken):
            admission.leave()

    admission.close("the master is stopping; retry on another")
    with pytest.raises(openai.InternalServerError) as draining:
        await client.chat.completions.create(model="openagent", messages=QUESTION)
    assert draining.value.status_code == 503 and draining.value.response.headers["retry-after"]
    assert draining.value.body["code"] == "draining"  # type: ignore[index]


async def test_openai_agents_sdk_uses_the_hub_as_its_model(hub: Hub) -> None:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)  # no export to OpenAI's servers

    @function_tool
    def local_time(city: str) -> str:
        """The local time in a city."""
        return f"10:30 in {city}"

    hub.llm.add_tool_calls(
        [ToolCall("calc__multiply", {"a": 12, "b": 7}), ToolCall("local_time", {"city": "Paris"})]
    )

    def answer(body: dict[str, Any]) -> Any:
        from openagent.testing import TextReply

        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        return TextReply("Results: " + " | ".join(results))

    hub.llm.set_handler(answer)
    model = OpenAIChatCompletionsModel(model="openagent", openai_client=hub.async_client())
    agent = Agent(name="assistant", instructions="Use the tools.", model=model, tools=[local_time])
    result = await Runner.run(agent, "What is 12 times 7, and the time in Paris?")
    output = str(result.final_output)
    assert '"product": 84' in output and "10:30 in Paris" in output
    assert hub.calls == [{"a": 12, "b": 7}]
    system = hub.llm.requests[0]["messages"]
    assert any(m["role"] == "system" and m["content"] == "Use the tools." for m in system)


async def test_the_demo_llm_answers_12_times_7_through_the_calculator_agent() -> None:
    """What a fresh clone gives with ``run.sh`` and no LLM configured: the demo LLM picks the
    sample calculator agent's tool, and the answer says 84."""
    from openagent.testing import demo_handler
    from sample_agents.calculator import build_agent

    with ScriptedOpenAIServer() as demo:
        demo.set_handler(demo_handler)
        async with in_process_master(
            openai_base_url=demo.base_url, openai_api_key="demo", openagent_api_key=KEY
        ) as m:
            async with build_agent(ClientConfig(master_ws=m.ws_url, api_key=KEY)):
                async with asyncio.timeout(30):
                    while "calculator-agent" not in m.services.agents.known_ids(EVERY_TENANT):
                        await asyncio.sleep(0.01)

                def ask() -> Any:
                    with openai.OpenAI(base_url=f"{m.base_url}/v1", api_key=KEY, max_retries=0) as client:
                        return client.chat.completions.create(
                            model="openagent", messages=[{"role": "user", "content": "What is 12 times 7?"}]
                        )

                completion = await asyncio.to_thread(ask)
    assert "84" in (completion.choices[0].message.content or "")
    assert completion.model_extra["openagent"]["agents_used"] == [
        {"agent_id": "calculator-agent", "tool_name": "multiply"}
    ]


async def test_a_streamed_answer_ends_with_the_client_tool_calls(hub: Hub) -> None:
    hub.llm.add_tool_calls([ToolCall("local_time", {"city": "Paris"}, "call_clock2")])
    hub.llm.add_text("It is 10:30 in Paris.")
    client = hub.async_client()
    messages: list[Any] = [{"role": "user", "content": "What time is it in Paris?"}]
    stream = await client.chat.completions.create(
        model="openagent", messages=messages, tools=[CLOCK_TOOL], stream=True
    )
    chunks = [chunk async for chunk in stream]
    calls = [call for c in chunks for call in c.choices[0].delta.tool_calls or []]
    assert [(call.index, call.id, call.function and call.function.name) for call in calls] == [
        (0, "call_clock2", "local_time")
    ]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    messages += [
        {"role": "assistant", "tool_calls": [c.model_dump(exclude={"index"}) for c in calls]},
        {"role": "tool", "tool_call_id": "call_clock2", "content": "10:30"},
    ]
    stream = await client.chat.completions.create(
        model="openagent", messages=messages, tools=[CLOCK_TOOL], stream=True
    )
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "It is 10:30 in Paris."
    assert chunks[-1].choices[0].finish_reason == "stop"


async def test_a_failure_after_the_stream_began_is_raised_by_the_client(hub: Hub) -> None:
    hub.llm.add_error(500, "the provider broke")
    stream = await hub.async_client().chat.completions.create(
        model="openagent", messages=QUESTION, stream=True
    )
    with pytest.raises(openai.APIError, match="the provider broke"):
        async for _ in stream:
            pass


async def test_tool_choice_none_and_parallel_tool_calls_false(hub: Hub) -> None:
    hub.llm.add_text("No tools needed.")
    client = hub.async_client()
    await client.chat.completions.create(
        model="openagent", messages=QUESTION, tools=[CLOCK_TOOL], tool_choice="none"
    )
    assert "tools" not in hub.llm.requests[-1]
    _script_multiplication(hub.llm)
    await client.chat.completions.create(
        model="openagent", messages=QUESTION, tools=[CLOCK_TOOL], parallel_tool_calls=False
    )
    with_tools, answer = hub.llm.requests[-2:]
    assert with_tools["parallel_tool_calls"] is False and "parallel_tool_calls" not in answer
