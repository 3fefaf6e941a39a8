"""Tests for ``openagent.testing.ScriptedOpenAIServer``, driven through the real ``openai`` client."""

from __future__ import annotations

import http.client
import json
import math
import re
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

import openagent.testing
from openagent.testing import (
    ErrorReply,
    ScriptedOpenAIServer,
    TextReply,
    ToolCall,
    ToolCallReply,
    echo_handler,
)
from openagent.testing.__main__ import main

USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER_TOOL: ChatCompletionToolParam = {
    "type": "function",
    "function": {
        "name": "weather-agent__get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest.fixture
def llm() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture
def client(llm: ScriptedOpenAIServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=llm.base_url, api_key="test", max_retries=0, timeout=10) as c:
        yield c


@pytest.fixture
async def aclient(llm: ScriptedOpenAIServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=llm.base_url, api_key="test", max_retries=0, timeout=10) as c:
        yield c


def raw_request(llm: ScriptedOpenAIServer, method: str, path: str, body: bytes = b"") -> tuple[int, Any]:
    """Send one request with the standard library and return (status, parsed JSON body)."""
    conn = http.client.HTTPConnection("127.0.0.1", llm.port, timeout=10)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_public_api_is_pinned() -> None:
    assert openagent.testing.__all__ == sorted(openagent.testing.__all__)
    assert set(openagent.testing.__all__) >= {
        "ScriptedOpenAIServer",
        "TextReply",
        "ToolCallReply",
        "ErrorReply",
    }


def test_base_url_points_at_v1_on_loopback(llm: ScriptedOpenAIServer) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", llm.base_url)
    assert llm.port > 0
    assert llm.running


def test_base_url_before_start_explains_the_fix() -> None:
    with pytest.raises(RuntimeError, match="call start"):
        _ = ScriptedOpenAIServer().base_url


def test_text_reply(llm: ScriptedOpenAIServer, client: openai.OpenAI) -> None:
    llm.add_text("Sunny in Paris")
    completion = client.chat.completions.create(model="gpt-test", messages=USER)
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "Sunny in Paris"
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    assert completion.object == "chat.completion"
    assert completion.model == "gpt-test"
    assert completion.id.startswith("chatcmpl-")
    assert completion.usage is not None
    assert (
        completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    )
    assert completion.usage.completion_tokens > 0


def test_tool_call_reply(llm: ScriptedOpenAIServer, client: openai.OpenAI) -> None:
    queued = llm.add_tool_call("weather-agent__get_weather", {"city": "Paris"})
    completion = client.chat.completions.create(model="m", messages=USER, tools=[WEATHER_TOOL])
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert choice.message.tool_calls is not None
    [call] = choice.message.tool_calls
    assert call.type == "function"
    assert re.fullmatch(r"call_[0-9a-f]{24}", call.id)
    assert call.id == queued.calls[0].call_id
    assert call.function.name == "weather-agent__get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}


def test_several_tool_calls_in_one_reply(llm: ScriptedOpenAIServer, client: openai.OpenAI) -> None:
    llm.add_tool_calls([("a__x", {"n": 1}), ToolCall("b__y", {"n": 2}, call_id="call_fixed")])
    completion = client.chat.completions.create(model="m", messages=USER)
    calls = completion.choices[0].message.tool_calls
    assert calls is not None
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("a__x", {"n": 1}),
        ("b__y", {"n": 2}),
    ]
    assert calls[1].id == "call_fixed"
    assert calls[0].id != calls[1].id


def test_raw_string_arguments_are_sent_verbatim(llm: ScriptedOpenAIServer, client: openai.OpenAI) -> None:
    llm.add_tool_call("a__x", '{"city": ')
    completion = client.chat.completions.create(model="m", messages=USER)
    calls = completion.choices[0].message.tool_calls
    assert calls is not None
    assert calls[0].function.arguments == '{"city": '


async def test_streaming_text(llm: ScriptedOpenAIServer, aclient: openai.AsyncOpenAI) -> None:
    llm.add_text("It is sunny in Paris today")
    stream = await aclient.chat.completions.create(
        model="gpt-test",
        messages=USER,
        stream=True,
        stream_options={"include_usage": True},
    )
    deltas: list[str] = []
    roles: list[str] = []
    finish: list[str] = []
    usage = None
    async with stream:
        async for chunk in stream:
            assert chunk.object == "chat.completion.chunk"
            assert chunk.model == "gpt-test"
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                if choice.delta.role:
                    roles.append(choice.delta.role)
                if choice.delta.content:
                    deltas.append(choice.delta.content)
                if choice.finish_reason:
                    finish.append(choice.finish_reason)
    assert "".join(deltas) == "It is sunny in Paris today"
    assert len(deltas) == 6
    assert roles == ["assistant"]
    assert finish == ["stop"]
    assert usage is not None and usage.total_tokens > 0


async def test_streaming_without_include_usage_sends_no_usage(
    llm: ScriptedOpenAIServer, aclient: openai.AsyncOpenAI
) -> None:
    llm.add_text("hi")
    stream = await aclient.chat.completions.create(model="m", messages=USER, stream=True)
    async with stream:
        chunks = [chunk async for chunk in stream]
    assert all(chunk.usage is None for chunk in chunks)
    assert all(chunk.choices for chunk in chunks)


def test_streaming_tool_calls_reassemble_with_the_client_helper(
    llm: ScriptedOpenAIServer, client: openai.OpenAI
) -> None:
    llm.add_tool_calls([("weather-agent__get_weather", {"city": "Paris", "unit": "celsius"}), ("b__y", {})])
    with client.chat.completions.stream(model="m", messages=USER, tools=[WEATHER_TOOL]) as stream:
        argument_deltas = sum(1 for event in stream if event.type == "tool_calls.function.arguments.delta")
        final = stream.get_final_completion()
    assert argument_deltas > 2  # arguments really arrive in fragments
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert calls is not None
    assert [c.function.name for c in calls] == ["weather-agent__get_weather", "b__y"]
    assert json.loads(calls[0].function.arguments) == {"city": "Paris", "unit": "celsius"}
    assert json.loads(calls[1].function.arguments) == {}
    assert all(c.id.startswith("call_") for c in calls)


async def test_streaming_tool_call_deltas_by_hand(
    llm: ScriptedOpenAIServer, aclient: openai.AsyncOpenAI
) -> None:
    llm.add_tool_call("a__x", {"text": "a fairly long argument value"}, call_id="call_abc")
    stream = await aclient.chat.completions.create(model="m", messages=USER, stream=True)
    ids: dict[int, str] = {}
    names: dict[int, str] = {}
    arguments: dict[int, str] = {}
    async with stream:
        async for chunk in stream:
            for choice in chunk.choices:
                for delta in choice.delta.tool_calls or []:
                    if delta.id:
                        ids[delta.index] = delta.id
                    if delta.function and delta.function.name:
                        names[delta.index] = delta.function.name
                    if delta.function and delta.function.arguments:
                        arguments[delta.index] = arguments.get(delta.index, "") + delta.function.arguments
    assert ids == {0: "call_abc"}
    assert names == {0: "a__x"}
    assert json.loads(arguments[0]) == {"text": "a fairly long argument value"}


def test_error_injection_raises_rate_limit(llm: ScriptedOpenAIServer, client: openai.OpenAI) -> None:
    llm.add_error(429, "rate limited")
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="m", messages=USER)
    assert caught.value.status_code == 429
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["message"] == "rate limited"
    assert caught.value.body["type"] == "rate_limit_error"
    assert caught.value.body["code"] == "rate_limit_exceeded"


def test_error_then_success_with_client_retries(llm: ScriptedOpenAIServer) -> None:
    llm.add(ErrorReply(503, "overloaded"))
    llm.add(TextReply("recovered"))
    with openai.OpenAI(base_url=llm.base_url, api_key="t", max_retries=1, timeout=10) as retrying:
        completion = retrying.chat.completions.create(model="m", messages=USER)
    assert completion.choices[0].message.content == "recovered"
    assert len(llm.requests) == 2


def test_empty_queue_is_a_bad_request_without_retries(llm: ScriptedOpenAIServer) -> None:
    with openai.OpenAI(base_url=llm.base_url, api_key="t", timeout=10) as default_retries:
        with pytest.raises(openai.BadRequestError, match="no scripted reply"):
            default_retries.chat.completions.create(model="m", messages=USER)
    assert len(llm.requests) == 1


def test_replies_are_consumed_in_order_and_counted(llm: ScriptedOpenAIServer, client: openai.OpenAI) -> None:
    llm.add_text("one")
    llm.add_text("two")
    assert llm.pending == 2
    first = client.chat.completions.create(model="m", messages=USER)
    assert llm.pending == 1
    second = client.chat.completions.create(model="m", messages=USER)
    assert [first.choices[0].message.content, second.choices[0].message.content] == ["one", "two"]
    assert llm.pending == 0


def test_handler_answers_when_queue_is_empty(llm: ScriptedOpenAIServer, client: openai.OpenAI) -> None:
    seen: list[dict[str, Any]] = []

    def handler(body: dict[str, Any]) -> ToolCallReply | str:
        seen.append(body)
        if len(seen) == 1:
            return ToolCallReply((ToolCall("a__x", {"q": body["messages"][-1]["content"]}),))
        return "done"

    llm.set_handler(handler)
    llm.add_text("queued first")
    replies = [client.chat.completions.create(model="m", messages=USER) for _ in range(3)]
    assert replies[0].choices[0].message.content == "queued first"
    calls = replies[1].choices[0].message.tool_calls
    assert calls is not None and json.loads(calls[0].function.arguments) == {"q": USER[0]["content"]}
    assert replies[2].choices[0].message.content == "done"
    assert len(seen) == 2


def test_echo_handler(llm: ScriptedOpenAIServer, client: openai.OpenAI) -> None:
    llm.set_handler(echo_handler)
    completion = client.chat.completions.create(model="m", messages=USER)
    assert completion.choices[0].message.content == "You said: What is the weather in Paris?"


def test_failing_handler_is_a_500_naming_the_exception(llm: ScriptedOpenAIServer) -> None:
    def handler(body: dict[str, Any]) -> str:
        raise KeyError("boom")

    llm.set_handler(handler)
    with openai.OpenAI(base_url=llm.base_url, api_key="t", timeout=10) as default_retries:
        with pytest.raises(openai.InternalServerError, match="handler raised KeyError"):
            default_retries.chat.completions.create(model="m", messages=USER)
    assert len(llm.requests) == 1  # x-should-retry: false stopped the client's retries


def test_requests_are_recorded(llm: ScriptedOpenAIServer, client: openai.OpenAI) -> None:
    llm.add_tool_call("weather-agent__get_weather", {"city": "Paris"})
    client.chat.completions.create(model="m", messages=USER, tools=[WEATHER_TOOL], temperature=0)
    [body] = llm.requests
    assert body["messages"] == USER
    assert body["tools"] == [WEATHER_TOOL]
    assert body["model"] == "m"
    assert body["temperature"] == 0
    assert llm.wait_for_requests(1, timeout=1) == [body]


def test_wait_for_requests_times_out(llm: ScriptedOpenAIServer) -> None:
    with pytest.raises(TimeoutError, match="expected 1 chat request"):
        llm.wait_for_requests(1, timeout=0.05)


def test_reset_forgets_everything(llm: ScriptedOpenAIServer, client: openai.OpenAI) -> None:
    llm.add_text("one")
    client.chat.completions.create(model="m", messages=USER)
    llm.add_text("two")
    llm.set_handler(echo_handler)
    llm.reset()
    assert (llm.pending, llm.requests) == (0, [])
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m", messages=USER)


def test_delay_makes_the_client_time_out(llm: ScriptedOpenAIServer) -> None:
    llm.add_text("too late", delay=2.0)
    llm.add_text("on time")
    with openai.OpenAI(base_url=llm.base_url, api_key="t", max_retries=0, timeout=0.2) as impatient:
        with pytest.raises(openai.APITimeoutError):
            impatient.chat.completions.create(model="m", messages=USER)
        completion = impatient.chat.completions.create(model="m", messages=USER)
    assert completion.choices[0].message.content == "on time"


def test_stop_does_not_wait_for_delayed_replies() -> None:
    server = ScriptedOpenAIServer().start()
    server.add_text("never sent", delay=3600)  # were it awaited, the test would time out
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("POST", "/v1/chat/completions", body=b'{"messages": []}')
        server.wait_for_requests(1, timeout=30)
        server.stop()
        assert not server.running
    finally:
        conn.close()
    server.stop()  # idempotent


def test_embeddings_are_deterministic_unit_vectors(llm: ScriptedOpenAIServer, client: openai.OpenAI) -> None:
    first = client.embeddings.create(model="emb", input=["hello", "world"], dimensions=16)
    again = client.embeddings.create(model="emb", input="hello", dimensions=16, encoding_format="float")
    assert [d.index for d in first.data] == [0, 1]
    hello, world = (d.embedding for d in first.data)
    assert len(hello) == 16
    assert math.isclose(math.fsum(v * v for v in hello), 1.0, rel_tol=1e-5)
    assert again.data[0].embedding == hello  # same text, same vector, whatever the encoding
    assert world != hello
    assert first.model == "emb"
    assert first.usage.total_tokens > 0
    assert [r["input"] for r in llm.embedding_requests] == [["hello", "world"], "hello"]


def test_embeddings_default_dimension(client: openai.OpenAI) -> None:
    response = client.embeddings.create(model="emb", input="hello")
    assert len(response.data[0].embedding) == openagent.testing.DEFAULT_DIMENSIONS


def test_embeddings_reject_bad_dimensions(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="dimensions"):
        client.embeddings.create(model="emb", input="hello", dimensions=0)


def test_models_are_listed(client: openai.OpenAI) -> None:
    ids = [model.id for model in client.models.list()]
    assert ids == list(openagent.testing.DEFAULT_MODELS)


def test_api_key_is_enforced() -> None:
    with ScriptedOpenAIServer(api_key="sk-right") as llm:
        llm.add_text("welcome")
        with openai.OpenAI(base_url=llm.base_url, api_key="sk-wrong", max_retries=0, timeout=10) as wrong:
            with pytest.raises(openai.AuthenticationError, match="incorrect API key"):
                wrong.chat.completions.create(model="m", messages=USER)
            with pytest.raises(openai.AuthenticationError):
                wrong.models.list()
        assert llm.requests == []
        status, body = raw_request(llm, "GET", "/v1/models")
        assert status == 401 and "missing" in body["error"]["message"]
        with openai.OpenAI(base_url=llm.base_url, api_key="sk-right", max_retries=0, timeout=10) as right:
            completion = right.chat.completions.create(model="m", messages=USER)
        assert completion.choices[0].message.content == "welcome"


def test_malformed_json_and_unknown_paths(llm: ScriptedOpenAIServer) -> None:
    status, body = raw_request(llm, "POST", "/v1/chat/completions", b"{not json")
    assert status == 400
    assert "not valid JSON" in body["error"]["message"]
    assert body["error"]["type"] == "invalid_request_error"
    status, body = raw_request(llm, "POST", "/v1/chat/completions", b"[1, 2]")
    assert status == 400 and "JSON object" in body["error"]["message"]
    status, body = raw_request(llm, "POST", "/v1/responses", b"{}")
    assert status == 404 and "/v1/responses" in body["error"]["message"]
    status, body = raw_request(llm, "GET", "/v2/models")
    assert status == 404
    assert llm.requests == []


def test_concurrent_requests_each_get_one_reply(llm: ScriptedOpenAIServer, client: openai.OpenAI) -> None:
    for n in range(8):
        llm.add_text(f"reply {n}")
    results: list[str | None] = []
    lock = threading.Lock()

    def ask() -> None:
        content = client.chat.completions.create(model="m", messages=USER).choices[0].message.content
        with lock:
            results.append(content)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(r or "" for r in results) == [f"reply {n}" for n in range(8)]
    assert len(llm.requests) == 8


def test_main_serves_echo_until_stopped(capsys: pytest.CaptureFixture[str]) -> None:
    stop = threading.Event()
    runner = threading.Thread(target=main, args=(["--port", "0"],), kwargs={"stop": stop})
    runner.start()
    try:
        deadline = time.monotonic() + 60
        output = ""
        while (found := re.search(r"http://127\.0\.0\.1:\d+/v1", output)) is None:
            assert time.monotonic() < deadline, f"no URL printed: {output!r}"
            time.sleep(0.02)
            output += capsys.readouterr().out
        with openai.OpenAI(base_url=found.group(0), api_key="t", max_retries=0, timeout=10) as c:
            completion = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert completion.choices[0].message.content == "You said: hi"
    finally:
        stop.set()
        runner.join(10)
    assert not runner.is_alive()


@pytest.mark.parametrize(
    ("name", "code", "message"),
    [
        ("weather.agent__get_weather", "invalid_value", "string does not match pattern"),
        ("weather:get", "invalid_value", "'^[a-zA-Z0-9_-]+$'"),
        ("", "empty_string", "empty string"),
        ("a" * 65, "string_above_max_length", "maximum length 64, but got a string with length 65"),
    ],
)
def test_invalid_function_names_are_refused_as_openai_does(
    llm: ScriptedOpenAIServer, client: openai.OpenAI, name: str, code: str, message: str
) -> None:
    llm.add_text("never sent")
    bad = {**WEATHER_TOOL, "function": {**WEATHER_TOOL["function"], "name": name}}
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="m", messages=USER, tools=[WEATHER_TOOL, bad])
    assert caught.value.status_code == 400
    assert caught.value.body == {
        "message": caught.value.body["message"],  # type: ignore[index]
        "type": "invalid_request_error",
        "param": "tools[1].function.name",
        "code": code,
    }
    assert message in caught.value.body["message"]  # type: ignore[index]
    assert llm.pending == 1, "a refused request must not consume a scripted reply"
    assert len(llm.requests) == 1, "a refused request is still recorded"


def test_invalid_function_names_in_earlier_tool_calls_are_refused(
    llm: ScriptedOpenAIServer, client: openai.OpenAI
) -> None:
    messages: list[ChatCompletionMessageParam] = [
        *USER,
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "weather agent", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "{}"},
    ]
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="m", messages=messages)
    assert caught.value.body["param"] == "messages[1].tool_calls[0].function.name"  # type: ignore[index]


@pytest.mark.parametrize("name", ["a", "A-z_09", "x" * 64, "weather-agent__get_weather"])
def test_valid_function_names_pass(llm: ScriptedOpenAIServer, client: openai.OpenAI, name: str) -> None:
    llm.add_tool_call(name, {"city": "Paris"})
    ok = {**WEATHER_TOOL, "function": {**WEATHER_TOOL["function"], "name": name}}
    completion = client.chat.completions.create(model="m", messages=USER, tools=[ok])
    assert completion.choices[0].finish_reason == "tool_calls"
