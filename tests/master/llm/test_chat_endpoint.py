"""The master's OpenAI-compatible client against the scripted server: answers, streams, retries, errors."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator

import pytest

from master.errors import LLMError
from master.llm.chat_body import (
    RUN_PIECES,
    Messages,
    SharedMessage,
    SharedRun,
    chat_body,
    chat_pieces,
    shared_part,
)
from master.llm.chat_endpoint import ChatEndpoint
from master.llm.model import OpenAIChatModel
from openagent.testing import ScriptedOpenAIServer

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


def _model(
    base_url: str, *, retries: int = 0, timeout: float = 10.0, key: str = "sk-test"
) -> OpenAIChatModel:
    return OpenAIChatModel(ChatEndpoint(api_key=key, base_url=base_url, timeout=timeout, max_retries=retries))


@pytest.fixture
async def model(llm: ScriptedOpenAIServer) -> AsyncIterator[OpenAIChatModel]:
    chat = _model(llm.base_url)
    yield chat
    await chat.aclose()


async def test_text_answer_and_request_body(llm: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    llm.add_text("Sunny.")
    result = await model.complete(
        model="gpt-x", messages=[{"role": "user", "content": "weather? é"}], tools=TOOLS
    )
    assert result.content == "Sunny." and result.tool_calls == [] and result.total_tokens > 0
    sent = llm.requests[0]
    assert sent["model"] == "gpt-x" and sent["messages"][0]["content"] == "weather? é"
    assert sent["tools"] == TOOLS and "stream" not in sent


async def test_tool_calls_are_parsed(llm: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    reply = llm.add_tool_call("weather__get", {"city": "Oslo"})
    result = await model.complete(model="m", messages=[{"role": "user", "content": "hi"}], tools=TOOLS)
    assert result.content is None
    [call] = result.tool_calls
    assert call.id == reply.calls[0].call_id and call.name == "weather__get"
    assert json.loads(call.arguments) == {"city": "Oslo"}


async def test_streaming_delivers_text_and_tool_calls(
    llm: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    llm.add_text("one two three")
    pieces: list[str] = []
    result = await model.complete(
        model="m", messages=[{"role": "user", "content": "hi"}], on_token=pieces.append
    )
    assert result.content == "one two three" and "".join(pieces) == "one two three" and len(pieces) > 1
    assert result.total_tokens > 0
    assert llm.requests[0]["stream"] is True

    # Arguments longer than any line buffer arrive whole.
    long_text = "x" * 200_000
    llm.add_tool_call("weather__get", {"city": long_text})
    result = await model.complete(
        model="m", messages=[{"role": "user", "content": "hi"}], on_token=pieces.append
    )
    [call] = result.tool_calls
    assert call.name == "weather__get" and json.loads(call.arguments) == {"city": long_text}


async def test_a_long_shared_history_in_pieces_is_sent_whole_and_again_on_a_retry(
    llm: ScriptedOpenAIServer,
) -> None:
    """A body whose session history comes in long pieces reaches the provider as the whole JSON,
    also when the request is sent again after a 503, and when streaming."""
    run = _grown_run(400, accent=" " + "é" * 100)  # ~50 KB of JSON, one piece once joined
    run.encoded(len(run.items) - 2)
    run.encoded(len(run.items))  # the run's JSON: a long piece, then a short one
    pieces = chat_pieces("m", _shared_messages(run, len(run.items)), TOOLS)
    assert max(map(len, pieces)) >= 16 * 1024
    llm.add_error(503, "overloaded")
    llm.add_text("Seen.")
    llm.add_text("Streamed.")
    chat = _model(llm.base_url, retries=1)
    try:
        messages = _shared_messages(run, len(run.items), query="last")
        assert (await chat.complete(model="m", messages=messages, tools=TOOLS)).content == "Seen."
        streamed = await chat.complete(model="m", messages=messages, on_token=lambda _: None)
    finally:
        await chat.aclose()
    assert streamed.content == "Streamed."
    plain = [dict(m) for m in messages]
    assert len(llm.requests) == 3 and all(sent["messages"] == plain for sent in llm.requests)


async def test_a_stream_is_sent_again_after_a_503(llm: ScriptedOpenAIServer) -> None:
    llm.add_error(503, "overloaded")
    llm.add_text("Streamed.")
    chat = _model(llm.base_url, retries=1)
    try:
        tokens: list[str] = []
        result = await chat.complete(
            model="m", messages=[{"role": "user", "content": "hi"}], on_token=tokens.append
        )
    finally:
        await chat.aclose()
    assert result.content == "Streamed." and "".join(tokens) == "Streamed." and len(llm.requests) == 2


async def test_the_environment_s_proxy_is_used(
    llm: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``HTTP_PROXY`` names the proxy requests go through: here the scripted server, which answers a
    proxied request for ``http://llm.invalid/v1/...`` as its own; without it the name would not
    resolve."""
    for name in ("HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{llm.port}")
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    llm.add_text("Through the proxy.")
    chat = _model("http://llm.invalid/v1")
    try:
        result = await chat.complete(model="m", messages=[{"role": "user", "content": "hi"}])
    finally:
        await chat.aclose()
    assert result.content == "Through the proxy."


async def test_retries_then_answer(llm: ScriptedOpenAIServer) -> None:
    llm.add_error(429, "slow down")
    llm.add_error(503, "overloaded")
    llm.add_text("Recovered.")
    chat = _model(llm.base_url, retries=2)
    try:
        result = await chat.complete(model="m", messages=[{"role": "user", "content": "hi"}])
    finally:
        await chat.aclose()
    assert result.content == "Recovered." and len(llm.requests) == 3


async def test_should_retry_header_is_obeyed(llm: ScriptedOpenAIServer) -> None:
    llm.add_error(503, "do not retry me", retry=False)
    llm.add_text("never reached")
    chat = _model(llm.base_url, retries=3)
    try:
        with pytest.raises(LLMError) as caught:
            await chat.complete(model="m", messages=[{"role": "user", "content": "hi"}])
    finally:
        await chat.aclose()
    assert caught.value.code == "llm_error" and "HTTP 503" in str(caught.value)
    assert "do not retry me" in str(caught.value) and len(llm.requests) == 1


@pytest.mark.parametrize(
    ("status", "code"),
    [(401, "llm_auth_failed"), (404, "llm_model_not_found"), (429, "llm_rate_limited"), (400, "llm_error")],
)
async def test_status_errors_have_codes(
    llm: ScriptedOpenAIServer, model: OpenAIChatModel, status: int, code: str
) -> None:
    llm.add_error(status, "scripted failure")
    with pytest.raises(LLMError) as caught:
        await model.complete(model="m", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.code == code


async def test_wrong_api_key_is_reported() -> None:
    with ScriptedOpenAIServer(api_key="right") as server:
        chat = _model(server.base_url, key="wrong")
        try:
            with pytest.raises(LLMError) as caught:
                await chat.complete(model="m", messages=[{"role": "user", "content": "hi"}])
        finally:
            await chat.aclose()
        assert caught.value.code == "llm_auth_failed" and "OPENAI_API_KEY" in str(caught.value)
        server.add_text("ok")
        chat = _model(server.base_url, key="right")
        try:
            assert (
                await chat.complete(model="m", messages=[{"role": "user", "content": "hi"}])
            ).content == "ok"
        finally:
            await chat.aclose()


async def test_timeout_is_reported(llm: ScriptedOpenAIServer) -> None:
    llm.add_text("too late", delay=3)
    chat = _model(llm.base_url, timeout=0.3)
    try:
        with pytest.raises(LLMError) as caught:
            await chat.complete(model="m", messages=[{"role": "user", "content": "hi"}])
    finally:
        await chat.aclose()
    assert caught.value.code == "llm_timeout" and "'m'" in str(caught.value)


async def test_an_answer_that_is_not_json_is_reported() -> None:
    """A provider that answers 200 with something other than JSON: ``llm_bad_response``, quoting it."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 9\r\n\r\n<html>hi!")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        error = await _failure(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1")
    finally:
        server.close()
    assert error.code == "llm_bad_response" and "<html>hi!" in str(error)


async def test_unreachable_provider_is_reported() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    error = await _failure(f"http://127.0.0.1:{port}/v1")
    assert error.code == "llm_unavailable" and "cannot reach" in str(error)


async def _failure(base_url: str) -> LLMError:
    """The error a one-message completion against ``base_url`` ends in."""
    chat = _model(base_url)
    try:
        with pytest.raises(LLMError) as caught:
            await chat.complete(model="m", messages=[{"role": "user", "content": "hi"}])
    finally:
        await chat.aclose()
    return caught.value


def _shared_messages(run: SharedRun, count: int, *, query: str = "q") -> Messages:
    """A request's messages as a query of the session builds them: system, history, query."""
    messages = Messages([{"role": "system", "content": "s"}])
    messages.share(run)
    del messages[1 + count :]
    messages.size = min(messages.size, count)
    messages.append({"role": "user", "content": query})
    return messages


def _grown_run(size: int, *, accent: str = "") -> SharedRun:
    run = SharedRun()
    run.items += (
        SharedMessage(role="user" if i % 2 == 0 else "assistant", content=f"m{i}{accent}")
        for i in range(size)
    )
    return run


def test_a_grown_history_is_encoded_as_if_nothing_were_kept() -> None:
    """A shared run keeps its JSON; the next, longer request reuses it and still encodes exactly
    what a body of plain messages gives, also for an older, shorter request, and when the shared
    part was changed after all."""
    run = _grown_run(9, accent=" é")
    tools = [{"type": "function", "function": {"name": "a__t", "parameters": {}}}]
    for end in (3, 3, 5, 9, 9, 4, 9):
        messages = _shared_messages(run, end)
        assert shared_part(messages) == (run, 1, end)
        body = chat_body("m", messages, tools)
        assert body == chat_body("m", [dict(m) for m in messages], tools)
        assert json.loads(body)["messages"] == [dict(m) for m in messages]
    messages = _shared_messages(run, 9)
    messages[9] = SharedMessage(role="assistant", content="other")  # no longer the run's
    assert shared_part(messages) is None
    assert chat_body("m", messages, None) == chat_body("m", [dict(m) for m in messages], None)
    messages.insert(1, {"role": "system", "content": "moved"})
    assert shared_part(messages) is None
    assert chat_body("m", messages, None) == chat_body("m", [dict(m) for m in messages], None)


def test_a_history_growing_query_by_query_keeps_its_json_in_few_pieces() -> None:
    """Each query adds its messages to the run's kept pieces; past RUN_PIECES they are joined into
    one, and every body is still the one plain messages give."""
    run = _grown_run(100)
    sizes = []
    for end in range(100, 301, 2):  # a query's user and assistant messages at a time
        run.items += (
            SharedMessage(role="user", content=f"m{end}"),
            SharedMessage(role="assistant", content="a"),
        )
        messages = _shared_messages(run, len(run.items))
        assert chat_body("m", messages, None) == chat_body("m", [dict(m) for m in messages], None)
        sizes.append(len(run.encoded(len(run.items))))
    assert max(sizes) <= RUN_PIECES and min(sizes) == 1 and sizes.count(1) < len(sizes) // 4
