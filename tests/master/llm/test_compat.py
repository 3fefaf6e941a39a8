"""Requests any OpenAI-compatible server takes: each quirk imitated by the scripted server.

Each test runs the master's real client against a :class:`ScriptedOpenAIServer` with the
:class:`Quirks` of llama.cpp, Ollama, vLLM or a Mistral template, and checks what is sent.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from master.errors import LLMError
from master.llm.chat_endpoint import ChatEndpoint
from master.llm.compat import MAX_CALL_ID, wire_call_id
from master.llm.model import OpenAIChatModel
from master.llm.windows import server_tokenizer
from openagent.testing import EmptyReply, Quirks, ScriptedOpenAIServer, TextReply
from tests.factories import free_port

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "weather__get",
            "description": "Weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
LONG_ID = "call__0_weather-agent__get_weather_cmpl-78c618cb-1d5e-4a8e-9d0b-5f0a2c6e7b11_extra"


def history(call_id: str = LONG_ID) -> list[dict[str, Any]]:
    """A question, the model's tool call (content null, a long id) and the tool's result."""
    return [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "weather__get", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": '{"sky": "clear"}'},
    ]


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[ScriptedOpenAIServer]:
    quirks: Quirks = getattr(request, "param", Quirks())
    with ScriptedOpenAIServer(quirks=quirks) as llm:
        yield llm


def chat(server: ScriptedOpenAIServer, compat: Any = "auto", **endpoint: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        ChatEndpoint(
            api_key="k", base_url=server.base_url, timeout=10, max_retries=0, compat=compat, **endpoint
        ),
        max_tokens=256,
    )


@pytest.fixture
async def model(server: ScriptedOpenAIServer) -> AsyncIterator[OpenAIChatModel]:
    chat_model = chat(server)
    yield chat_model
    await chat_model.aclose()


def test_call_ids_are_short_stable_and_nine_alphanumerics_for_mistral() -> None:
    short = wire_call_id(LONG_ID, "smollm2")
    assert len(short) <= MAX_CALL_ID and short == wire_call_id(LONG_ID, "smollm2")
    assert wire_call_id("call_abc", "gpt-4o") == "call_abc"  # a plain short id stays
    mistral = wire_call_id(LONG_ID, "mistral-small-3.1")
    assert len(mistral) == 9 and mistral.isalnum() and mistral == wire_call_id(LONG_ID, "Mistral-7B")
    assert wire_call_id("abcDEF123", "mixtral") == "abcDEF123"
    assert wire_call_id(LONG_ID, "a") != wire_call_id(LONG_ID + "x", "a")


@pytest.mark.parametrize("server", [Quirks.llamacpp()], indirect=True)
async def test_llamacpp_gets_empty_content_and_short_ids_and_is_detected(
    server: ScriptedOpenAIServer, model: OpenAIChatModel, caplog: pytest.LogCaptureFixture
) -> None:
    server.add_text("Clear.")
    server.add_text("Still clear.")
    with caplog.at_level(logging.INFO, logger="master.llm.chat_endpoint"):
        result = await model.complete(model="smollm2", messages=history(), tools=TOOLS)
        await model.complete(model="smollm2", messages=history(), tools=TOOLS)
    assert result.content == "Clear."
    compat = await model.endpoint.compat()
    assert compat.name == "llamacpp" and compat.context_size == 8192
    choices = [r for r in caplog.records if "dialect" in r.getMessage()]
    assert len(choices) == 1 and "llamacpp" in choices[0].getMessage()  # logged once
    sent = server.requests[0]["messages"]
    assert sent[1]["content"] == "" and sent[1]["tool_calls"][0]["id"] == sent[2]["tool_call_id"]
    assert len(sent[2]["tool_call_id"]) <= MAX_CALL_ID
    assert server.requests[0]["tool_choice"] == "auto" and server.requests[0]["max_tokens"] == 256


@pytest.mark.parametrize("server", [Quirks.llamacpp()], indirect=True)
async def test_the_quirk_is_real_null_content_fails_on_llamacpp(server: ScriptedOpenAIServer) -> None:
    openai_dialect = chat(server, compat="openai")
    try:
        with pytest.raises(LLMError) as caught:
            await openai_dialect.complete(model="smollm2", messages=history())
    finally:
        await openai_dialect.aclose()
    assert "has no attribute 'content'" in str(caught.value) and server.base_url in str(caught.value)


@pytest.mark.parametrize("server", [Quirks(call_id_exactly=9)], indirect=True)
async def test_a_mistral_template_gets_nine_character_ids(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    server.add_text("Clear.")
    assert (await model.complete(model="mistral-small", messages=history())).content == "Clear."
    sent = server.requests[0]["messages"]
    assert (
        len(sent[1]["tool_calls"][0]["id"]) == 9 and sent[2]["tool_call_id"] == sent[1]["tool_calls"][0]["id"]
    )


@pytest.mark.parametrize("server", [Quirks(common_subset_only=True, stream_usage=False)], indirect=True)
async def test_an_unknown_server_gets_only_the_common_subset_and_its_usage_is_counted(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    server.add_text("Clear skies over Paris.")
    tokens: list[str] = []
    result = await model.complete(model="m", messages=history(), tools=TOOLS, on_token=tokens.append)
    assert "".join(tokens) == "Clear skies over Paris."
    assert (await model.endpoint.compat()).name == "generic"
    assert "stream_options" not in server.requests[0]
    # The server sent no usage: the master counted the prompt and the answer itself.
    assert result.prompt_tokens > 0 and result.completion_tokens > 0
    assert result.total_tokens == result.prompt_tokens + result.completion_tokens


@pytest.mark.parametrize("server", [Quirks(kind="llama-cpp-python", no_streamed_tools=True)], indirect=True)
async def test_llama_cpp_python_gets_rounds_with_tools_unstreamed(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    """llama-cpp-python's function calling refuses a streamed round with tools (HTTP 500): such a
    round is asked unstreamed and its text handed on as one token; a round without tools streams."""
    server.add_tool_call("weather__get", {"city": "Paris"})
    server.add_text("Clear skies over Paris.")
    server.add_text("Hello there.")
    tokens: list[str] = []
    called = await model.complete(model="m", messages=history()[:1], tools=TOOLS, on_token=tokens.append)
    assert [call.name for call in called.tool_calls] == ["weather__get"] and tokens == []
    answered = await model.complete(model="m", messages=history(), tools=TOOLS, on_token=tokens.append)
    assert answered.content == "Clear skies over Paris." and tokens == ["Clear skies over Paris."]
    await model.complete(model="m", messages=history()[:1], on_token=tokens.append)
    assert "".join(tokens[1:]) == "Hello there."
    assert [bool(body.get("stream")) for body in server.requests] == [False, False, True]
    assert all(body.get("tool_choice") == "auto" for body in server.requests[:2])


@pytest.mark.parametrize(
    ("server", "name", "window"),
    [
        (Quirks(kind="ollama"), "ollama", None),
        (Quirks(kind="vllm", context_size=4096), "vllm", 4096),
        (Quirks(kind="llama-cpp-python"), "llamacpp", None),
        (Quirks(), "generic", None),
    ],
    indirect=["server"],
)
async def test_auto_detects_the_server(
    server: ScriptedOpenAIServer, model: OpenAIChatModel, name: str, window: int | None
) -> None:
    compat = await model.endpoint.compat()
    assert (compat.name, compat.context_size) == (name, window)


async def test_auto_falls_back_to_the_common_subset_when_nothing_answers() -> None:
    endpoint = ChatEndpoint(
        api_key="k", base_url=f"http://127.0.0.1:{free_port()}/v1", timeout=5, max_retries=0, compat="auto"
    )
    try:
        assert (await endpoint.compat()).name == "generic"
    finally:
        await endpoint.aclose()


async def test_the_openai_dialect_bounds_output_with_max_completion_tokens(
    server: ScriptedOpenAIServer,
) -> None:
    server.add_text("ok")
    openai_dialect = chat(server, compat="openai")
    try:
        await openai_dialect.complete(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        await_sent = server.requests[0]
    finally:
        await openai_dialect.aclose()
    assert await_sent["max_completion_tokens"] == 256 and "max_tokens" not in await_sent
    assert "tool_choice" not in await_sent  # no tools offered


async def test_a_stream_without_data_is_an_error_not_an_empty_answer(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    server.add(EmptyReply())
    with pytest.raises(LLMError) as caught:
        await model.complete(model="m", messages=history(), on_token=lambda _: None)
    assert caught.value.code == "llm_empty_answer" and server.base_url in str(caught.value)


async def test_the_stream_reaches_the_caller_token_by_token(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    seen_first = threading.Event()
    held: list[bool] = []

    def before(word: int) -> None:
        if word == 1:  # the second word waits until the client has the first one
            held.append(seen_first.wait(30))

    server.add(TextReply("one two three", token_delay=0.1, before_token=before))
    tokens: list[str] = []

    def on_token(text: str) -> None:
        tokens.append(text)
        seen_first.set()

    await model.complete(model="m", messages=history(), on_token=on_token)
    assert held == [True] and "".join(tokens) == "one two three"


@pytest.mark.parametrize("server", [Quirks(single_slot=True, busy_retry_ms=20)], indirect=True)
async def test_a_busy_single_slot_server_is_waited_for(server: ScriptedOpenAIServer) -> None:
    second_refused = threading.Event()

    def before(word: int) -> None:
        if word == 1:  # hold the slot until the other request has been turned away once
            server.wait_for_requests(2, timeout=30)
            second_refused.set()

    server.add(TextReply("first answer", before_token=before))
    server.add_text("second answer")
    patient = chat(server, total_timeout=60)
    try:
        first = asyncio.create_task(patient.complete(model="m", messages=history(), on_token=lambda _: None))
        await asyncio.to_thread(server.wait_for_requests, 1, 30)
        second = await patient.complete(model="m", messages=history())
        assert (await first).content == "first answer"
    finally:
        await patient.aclose()
    assert second.content == "second answer" and second_refused.is_set()
    assert len(server.requests) >= 3  # the refused attempt, then the one answered


@pytest.mark.parametrize("server", [Quirks(single_slot=True, busy_retry_ms=20)], indirect=True)
async def test_errors_name_the_model_server_and_the_cause(server: ScriptedOpenAIServer) -> None:
    server.add_error(400, "request (9992 tokens) exceeds the available context size (8192 tokens)")
    model = chat(server)
    try:
        with pytest.raises(LLMError) as caught:
            await model.complete(model="m", messages=history())
    finally:
        await model.aclose()
    assert caught.value.code == "llm_context_overflow" and server.base_url in str(caught.value)
    unreachable = ChatEndpoint(
        api_key="k",
        base_url=f"http://127.0.0.1:{free_port()}/v1",
        timeout=5,
        connect_timeout=2,
        max_retries=0,
    )
    try:
        with pytest.raises(LLMError) as refused:
            await unreachable.complete("m", b"{}")
    finally:
        await unreachable.aclose()
    assert refused.value.code == "llm_unavailable" and "127.0.0.1" in str(refused.value)


@pytest.mark.parametrize(
    ("server", "compat", "counted"),
    [
        (Quirks(kind="llamacpp", tokenize_ratio=1.6), "auto", True),  # POST /tokenize {content}
        (Quirks(kind="llama-cpp-python", tokenize_ratio=1.6), "auto", True),  # POST /extras/tokenize
        (Quirks(kind="llama-cpp-python", tokenize_ratio=1.6), "llamacpp", True),  # the second one tried
        (Quirks(kind="vllm", tokenize_ratio=1.6), "auto", True),  # POST /tokenize {prompt}
        (Quirks(kind="ollama", tokenize_ratio=1.6), "auto", False),  # Ollama offers none
        (Quirks(kind="llamacpp"), "auto", False),  # no tokenize endpoint: 404
    ],
    indirect=["server"],
)
async def test_the_servers_tokenizer_counts_where_it_offers_one(
    server: ScriptedOpenAIServer, compat: str, counted: bool
) -> None:
    chat_model = chat(server, compat)
    text = "You are an orchestrator. Call weather-agent__get_weather for the weather of Paris."
    try:
        count = await server_tokenizer(chat_model.endpoint)("smollm2", text)
    finally:
        await chat_model.aclose()
    assert count == (server.quirks.model_tokens(text) if counted else None)
    assert server.quirks.tokenize_calls == (1 if counted else 0)
