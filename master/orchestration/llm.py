"""The LLM behind a small provider interface.

:class:`ChatModel` is the seam: the orchestrator only calls ``complete``. The real
implementation, :class:`OpenAIChatModel`, speaks the OpenAI-compatible chat API
through the ``openai`` package (OpenAI, Ollama, vLLM, llama.cpp, ...). Tests and
benchmarks use :class:`FunctionChatModel`, or the real one pointed at
``openagent.testing.ScriptedOpenAIServer``.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import openai

from master.errors import LLMError
from master.settings import Settings

logger = logging.getLogger("master.orchestration.llm")

ChatMessage = dict[str, Any]
"""One message in OpenAI chat format (``role``, ``content``, ``tool_calls``, ...)."""

TokenSink = Callable[[str], None]
"""Receives each piece of the answer's text as the model produces it."""


@dataclass(frozen=True)
class ToolCallRequest:
    """The model asks for one tool call."""

    id: str
    name: str
    arguments: str
    """Raw JSON text, as the model produced it (may be malformed)."""


@dataclass(frozen=True)
class ChatResult:
    """One completion."""

    content: str | None
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    total_tokens: int = 0


class ChatModel(Protocol):
    """What the orchestrator needs from an LLM."""

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        on_token: TokenSink | None = None,
    ) -> ChatResult:
        """One chat completion. With ``on_token`` the text is streamed to it as it arrives.

        Raises :class:`LLMError` when the provider fails.
        """
        ...


class OpenAIChatModel:
    """:class:`ChatModel` over the OpenAI-compatible API.

    Timeouts, 429 and 5xx answers are retried by the ``openai`` client with
    exponential backoff (``OPENAGENT_LLM_MAX_RETRIES``), each attempt bounded by
    ``OPENAGENT_LLM_TIMEOUT``; what still fails becomes an :class:`LLMError`.
    """

    def __init__(self, client: openai.AsyncOpenAI) -> None:
        self._client = client

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAIChatModel:
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else ""
        client = openai.AsyncOpenAI(
            # Local servers (Ollama, llama.cpp) accept any key but the client needs one.
            api_key=key or "not-needed",
            base_url=settings.openai_base_url or None,
            timeout=settings.openagent_llm_timeout,
            max_retries=settings.openagent_llm_max_retries,
        )
        return cls(client)

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        on_token: TokenSink | None = None,
    ) -> ChatResult:
        kwargs: dict[str, Any] = {"model": model, "messages": list(messages)}
        if tools:
            kwargs["tools"] = list(tools)
        try:
            if on_token is not None:
                return await self._stream(kwargs, on_token)
            response = await self._client.chat.completions.create(**kwargs)
        except openai.APITimeoutError as exc:
            raise LLMError(
                f"LLM request to model {model!r} timed out after retries", code="llm_timeout"
            ) from exc
        except openai.APIConnectionError as exc:
            raise LLMError(f"cannot reach the LLM provider: {exc}", code="llm_unavailable") from exc
        except openai.AuthenticationError as exc:
            raise LLMError(
                "the LLM provider rejected the API key; check OPENAI_API_KEY", code="llm_auth_failed"
            ) from exc
        except openai.RateLimitError as exc:
            raise LLMError(
                f"the LLM provider is rate-limiting requests (429) after retries: {_message(exc)}",
                code="llm_rate_limited",
            ) from exc
        except openai.NotFoundError as exc:
            raise LLMError(
                f"the LLM provider does not know model {model!r}: {_message(exc)}", code="llm_model_not_found"
            ) from exc
        except openai.APIStatusError as exc:
            raise LLMError(
                f"the LLM provider answered HTTP {exc.status_code}: {_message(exc)}", code="llm_error"
            ) from exc
        if not response.choices:
            raise LLMError(f"model {model!r} returned no choices", code="llm_bad_response")
        message = response.choices[0].message
        calls = [
            ToolCallRequest(id=call.id, name=call.function.name, arguments=call.function.arguments or "{}")
            for call in message.tool_calls or []
            if call.type == "function"
        ]
        tokens = response.usage.total_tokens if response.usage else 0
        return ChatResult(content=message.content, tool_calls=calls, total_tokens=tokens)

    async def _stream(self, kwargs: dict[str, Any], on_token: TokenSink) -> ChatResult:
        stream = await self._client.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True}
        )
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        tokens = 0
        async for chunk in stream:
            if chunk.usage is not None:
                tokens = chunk.usage.total_tokens
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    text.append(delta.content)
                    on_token(delta.content)
                for part in delta.tool_calls or []:
                    call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                    call["id"] = part.id or call["id"]
                    if part.function is not None:
                        call["name"] += part.function.name or ""
                        call["arguments"] += part.function.arguments or ""
        return ChatResult(
            content="".join(text) or None,
            tool_calls=[
                ToolCallRequest(id=c["id"], name=c["name"], arguments=c["arguments"] or "{}")
                for _, c in sorted(calls.items())
            ],
            total_tokens=tokens,
        )


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return str(exc.message)


ChatFunction = Callable[
    [Sequence[ChatMessage], Sequence[dict[str, Any]] | None], ChatResult | Awaitable[ChatResult]
]


class FunctionChatModel:
    """:class:`ChatModel` driven by a Python function ``(messages, tools) -> ChatResult``.

    For benchmarks and unit tests: decides instantly. With ``on_token`` the text is
    delivered in one piece.
    """

    def __init__(self, function: ChatFunction) -> None:
        self._function = function

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        on_token: TokenSink | None = None,
    ) -> ChatResult:
        result = self._function(messages, tools)
        if inspect.isawaitable(result):
            result = await result
        if on_token is not None and result.content:
            on_token(result.content)
        return result
