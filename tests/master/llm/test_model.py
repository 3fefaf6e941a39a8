"""The LLM seam: the OpenAI-compatible model through the master's client (chat_endpoint), and the function model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import Any

import pytest

from master.errors import LLMError
from master.llm.chat_endpoint import ChatEndpoint
from master.llm.model import ChatResult, FunctionChatModel, OpenAIChatModel, ToolCallRequest
from master.settings import Settings
from openagent.testing import ScriptedOpenAIServer

USER = [{"role": "user", "content": "hi"}]
TOOL = {"type": "function", "function": {"name": "w__get", "parameters": {"type": "object"}}}


@pytest.fixture
async def model(llm: ScriptedOpenAIServer) -> AsyncIterator[OpenAIChatModel]:
    chat = OpenAIChatModel(ChatEndpoint(api_key="t", base_url=llm.base_url, timeout=30, max_retries=0))
    yield chat
    await chat.aclose()


@pytest.mark.parametrize("streamed", [False, True])
async def test_text_and_tool_calls_come_back(
    llm: ScriptedOpenAIServer, model: OpenAIChatModel, streamed: bool
) -> None:
    tokens: list[str] = []
    on_token = tokens.append if streamed else None
    llm.add_tool_calls([("w__get", {"city": "Oslo"}), ("w__get", {"city": "Rome"})])
    llm.add_text("Both are cold.")
    first = await model.complete(model="m", messages=USER, tools=[TOOL], on_token=on_token)
    assert [(c.name, c.arguments) for c in first.tool_calls] == [
        ("w__get", '{"city": "Oslo"}'),
        ("w__get", '{"city": "Rome"}'),
    ]
    assert all(c.id for c in first.tool_calls) and first.content is None
    second = await model.complete(model="m", messages=USER, on_token=on_token)
    assert second.content == "Both are cold." and second.tool_calls == [] and second.total_tokens > 0
    assert "".join(tokens) == ("Both are cold." if streamed else "")
    assert llm.requests[0]["tools"] == [TOOL] and "tools" not in llm.requests[1]


@pytest.mark.parametrize(
    ("status", "code", "needle"),
    [
        (401, "llm_auth_failed", "OPENAI_API_KEY"),
        (404, "llm_model_not_found", "does not know model 'm'"),
        (429, "llm_rate_limited", "rate-limiting"),
        (500, "llm_error", "HTTP 500: boom"),
    ],
)
async def test_provider_errors_become_llm_errors_with_stable_codes(
    llm: ScriptedOpenAIServer, model: OpenAIChatModel, status: int, code: str, needle: str
) -> None:
    llm.add_error(status, "boom")
    with pytest.raises(LLMError) as info:
        await model.complete(model="m", messages=USER)
    assert info.value.code == code and needle in str(info.value)


async def test_timeout_and_unreachable_provider(llm: ScriptedOpenAIServer) -> None:
    llm.add_text("late", delay=3)
    impatient = OpenAIChatModel(ChatEndpoint(api_key="t", base_url=llm.base_url, timeout=0.2, max_retries=0))
    try:
        with pytest.raises(LLMError) as info:
            await impatient.complete(model="m", messages=USER)
        assert info.value.code == "llm_timeout"
    finally:
        await impatient.aclose()
    nowhere = OpenAIChatModel(
        ChatEndpoint(api_key="t", base_url="http://127.0.0.1:9/v1", timeout=30, max_retries=0)
    )
    try:
        with pytest.raises(LLMError) as info:
            await nowhere.complete(model="m", messages=USER)
        assert info.value.code == "llm_unavailable"
    finally:
        await nowhere.aclose()


def test_from_settings_uses_the_configured_endpoint_and_retries() -> None:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        openai_base_url="http://127.0.0.1:9/v1",
        openai_api_key="",
        openagent_llm_max_retries=4,
        openagent_llm_timeout=7,
    )
    endpoint = OpenAIChatModel.from_settings(settings)._endpoint
    assert endpoint.url == "http://127.0.0.1:9/v1/chat/completions" and endpoint._max_retries == 4
    assert endpoint._timeout == timedelta(seconds=7)
    assert endpoint._headers["Authorization"] == "Bearer not-needed"  # local servers take any key


async def test_function_model_sync_or_async_and_streams_its_text() -> None:
    seen: list[Any] = []

    def sync(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> ChatResult:
        seen.append((list(messages), tools))
        return ChatResult("hello", [ToolCallRequest("c", "f", "{}")])

    async def later(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> ChatResult:
        return ChatResult("later")

    tokens: list[str] = []
    result = await FunctionChatModel(sync).complete(
        model="m", messages=USER, tools=[TOOL], on_token=tokens.append
    )
    assert result.content == "hello" and tokens == ["hello"] and seen == [(USER, [TOOL])]
    assert (await FunctionChatModel(later).complete(model="m", messages=USER)).content == "later"
