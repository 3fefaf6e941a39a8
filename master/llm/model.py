"""The LLM behind a small provider interface.

:class:`ChatModel` is the seam: the orchestrator only calls ``complete``. The real
implementation, :class:`OpenAIChatModel`, speaks the OpenAI-compatible chat API
(OpenAI, Ollama, vLLM, llama.cpp, ...) through :mod:`master.llm.chat_endpoint`. Tests and
benchmarks use :class:`FunctionChatModel`, or the real one pointed at
``openagent.testing.ScriptedOpenAIServer``.
"""

from __future__ import annotations

import inspect
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from master.errors import LLMError
from master.llm import tokens

# The message lists the session context builds, re-exported: the domain reaches the LLM only
# through this module (the wall in [tool.importlinter]), never the client's modules.
from master.llm.chat_body import Messages as Messages
from master.llm.chat_body import SharedMessage as SharedMessage
from master.llm.chat_body import SharedRun as SharedRun
from master.llm.chat_body import chat_pieces
from master.llm.chat_endpoint import ChatEndpoint
from master.llm.compat import Compat
from master.settings import Settings

logger = logging.getLogger("master.llm.model")

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
    prompt_tokens: int = 0
    completion_tokens: int = 0


LLMOptions = Mapping[str, Any]
"""Sampling parameters passed through to the provider as they are (``temperature``, ``top_p``,
``stop``, ``parallel_tool_calls``, ``tool_choice``), and the output bound ``max_tokens`` (or
``max_completion_tokens``), sent under the name the server takes; ``max_tokens: None`` sends no
bound (else ``OPENAGENT_LLM_MAX_TOKENS`` is sent)."""


class ChatModel(Protocol):
    """What the orchestrator needs from an LLM."""

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        on_token: TokenSink | None = None,
        options: LLMOptions | None = None,
    ) -> ChatResult:
        """One chat completion. With ``on_token`` the text is streamed to it as it arrives;
        ``options`` (:data:`LLMOptions`) go into the request as they are.

        Raises :class:`LLMError` when the provider fails.
        """
        ...


class OpenAIChatModel:
    """:class:`ChatModel` over the OpenAI-compatible chat API (:mod:`master.llm.chat_endpoint`).

    Timeouts, 429 and 5xx answers are retried with exponential backoff
    (``OPENAGENT_LLM_MAX_RETRIES``), each attempt bounded by ``OPENAGENT_LLM_TIMEOUT``;
    what still fails becomes an :class:`LLMError`. Requests are built as JSON bytes and
    answers read as plain dicts: no typed client models on the path of every query.
    """

    def __init__(self, endpoint: ChatEndpoint, *, max_tokens: int = 0) -> None:
        self._endpoint = endpoint
        self._max_tokens = max_tokens

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAIChatModel:
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else ""
        endpoint = ChatEndpoint(
            # Local servers (Ollama, llama.cpp) accept any key but a key is sent anyway.
            api_key=key or "not-needed",
            base_url=settings.openai_base_url or None,
            timeout=settings.openagent_llm_timeout,
            connect_timeout=settings.openagent_llm_connect_timeout,
            total_timeout=settings.openagent_llm_total_timeout,
            max_retries=settings.openagent_llm_max_retries,
            compat=settings.openagent_llm_compat,
        )
        return cls(endpoint, max_tokens=settings.openagent_llm_max_tokens)

    @property
    def endpoint(self) -> ChatEndpoint:
        return self._endpoint

    def _options(
        self, options: LLMOptions | None, tools: Sequence[dict[str, Any]] | None, compat: Compat
    ) -> LLMOptions | None:
        """``options`` with the master's defaults: ``tool_choice: "auto"`` when tools are offered
        (llama-cpp-python's function calling ignores tools without it), and the per-round output
        bound (``OPENAGENT_LLM_MAX_TOKENS``) unless the caller set one (``None``: no bound), under
        the name the server takes (``max_completion_tokens`` for the OpenAI API)."""
        given = dict(options or {})
        if tools and "tool_choice" not in given:
            given["tool_choice"] = "auto"
        bound = given.pop("max_tokens", given.pop("max_completion_tokens", self._max_tokens or None))
        if bound is not None:
            given[compat.max_tokens_field] = bound
        return given or None

    async def aclose(self) -> None:
        await self._endpoint.aclose()

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        on_token: TokenSink | None = None,
        options: LLMOptions | None = None,
    ) -> ChatResult:
        compat = await self._endpoint.compat()
        options = self._options(options, tools, compat)
        if on_token is not None and (compat.stream_tools or not tools):
            body = chat_pieces(model, messages, tools, stream=True, options=options, compat=compat)
            result = await self._stream(model, body, on_token)
        else:
            data = await self._endpoint.complete(
                model, chat_pieces(model, messages, tools, options=options, compat=compat)
            )
            try:
                result = _parse_completion(model, data)
            except (LookupError, TypeError, AttributeError) as exc:
                raise LLMError(
                    f"model {model!r} returned an unexpected answer: {str(data)[:200]}",
                    code="llm_bad_response",
                ) from exc
            if on_token is not None and result.content:  # a server that does not stream this round
                on_token(result.content)
        return result if result.total_tokens else _estimated(result, messages, tools)

    async def _stream(self, model: str, body: list[bytes], on_token: TokenSink) -> ChatResult:
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        usage: dict[str, Any] = {}
        answered = False
        async for chunk in self._endpoint.stream(model, body):
            if isinstance(chunk.get("usage"), dict):
                usage = chunk["usage"]
            for choice in chunk.get("choices") or ():
                answered = True
                delta = choice.get("delta") or {}
                content = delta.get("content")
                if content:
                    text.append(content)
                    on_token(content)
                for part in delta.get("tool_calls") or ():
                    call = calls.setdefault(
                        int(part.get("index", 0)), {"id": "", "name": "", "arguments": ""}
                    )
                    call["id"] = part.get("id") or call["id"]
                    function = part.get("function")
                    if function:
                        call["name"] += function.get("name") or ""
                        call["arguments"] += function.get("arguments") or ""
        if not answered:
            raise LLMError(
                f"model {model!r} at {self._endpoint.base_url} ended its stream without an answer",
                code="llm_empty_answer",
            )
        return ChatResult(
            content="".join(text) or None,
            tool_calls=[
                ToolCallRequest(
                    id=c["id"] or _new_call_id(), name=c["name"], arguments=c["arguments"] or "{}"
                )
                for _, c in sorted(calls.items())
            ],
            **_usage(usage),
        )


def _new_call_id() -> str:
    """An id for a tool call the server sent without one."""
    return f"call_{secrets.token_hex(8)}"


def _estimated(
    result: ChatResult, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None
) -> ChatResult:
    """``result`` with the master's own token counts, for a server that sent none (llama-cpp-python
    in streams): the budget and the metrics still count what the model read and wrote."""
    prompt = tokens.count_messages(messages) + (tokens.count_tools(tools) if tools else 0)
    completion = tokens.count_text(result.content or "") + sum(
        tokens.count_text(call.name) + tokens.count_text(call.arguments) for call in result.tool_calls
    )
    return ChatResult(
        content=result.content,
        tool_calls=result.tool_calls,
        total_tokens=prompt + completion,
        prompt_tokens=prompt,
        completion_tokens=completion,
    )


def _parse_completion(model: str, data: dict[str, Any]) -> ChatResult:
    """The first choice of a chat-completion answer (raises LookupError/TypeError when malformed)."""
    choices = data["choices"]
    if not choices:
        raise LLMError(f"model {model!r} returned no choices", code="llm_empty_answer")
    message = choices[0]["message"]
    calls = [
        ToolCallRequest(
            id=call.get("id") or _new_call_id(),
            name=call["function"]["name"],
            arguments=call["function"].get("arguments") or "{}",
        )
        for call in message.get("tool_calls") or ()
        if call.get("type", "function") == "function"
    ]
    usage = data.get("usage")
    return ChatResult(
        content=message.get("content"), tool_calls=calls, **_usage(usage if isinstance(usage, dict) else {})
    )


def _usage(usage: dict[str, Any]) -> dict[str, int]:
    """The token counts of a provider's ``usage`` object (0 for those it leaves out)."""
    try:
        return {
            "total_tokens": int(usage.get("total_tokens") or 0),
            "prompt_tokens": int(usage.get("prompt_tokens") or 0),
            "completion_tokens": int(usage.get("completion_tokens") or 0),
        }
    except (TypeError, ValueError):
        return {}


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
        options: LLMOptions | None = None,
    ) -> ChatResult:
        result = self._function(messages, tools)
        if inspect.isawaitable(result):
            result = await result
        if on_token is not None and result.content:
            on_token(result.content)
        return result
