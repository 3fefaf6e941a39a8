"""The ways real OpenAI-compatible servers differ, for :class:`ScriptedOpenAIServer` to imitate.

A :class:`Quirks` object given to the server makes it answer as llama.cpp, Ollama or vLLM do
where they differ from the OpenAI API: what it says about itself, what requests it refuses,
what it leaves out of its answers.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from . import _wire

ServerKind = Literal["openai", "llamacpp", "llama-cpp-python", "ollama", "vllm"]

COMMON_FIELDS = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "stream",
        "temperature",
        "top_p",
        "max_tokens",
        "stop",
        "n",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "response_format",
    }
)
"""The request fields every OpenAI-compatible server takes (:attr:`Quirks.common_subset_only`)."""


@dataclass
class Quirks:
    """How a :class:`ScriptedOpenAIServer` departs from the OpenAI API.

    Attributes:
        kind: What the server says it is: ``llamacpp`` answers ``GET /props`` (with its
            ``n_ctx``) as ``llama-server`` does, ``llama-cpp-python`` lists its models
            ``owned_by: "me"``, ``ollama`` answers ``GET /api/version``, ``vllm`` lists its
            models ``owned_by: "vllm"`` with ``max_model_len``.
        reject_null_content: An assistant message with ``tool_calls`` and ``"content": null``
            fails with HTTP 500 ``'dict object' has no attribute 'content'`` (llama.cpp's Jinja
            chat templates).
        max_call_id: Tool-call ids longer than this are refused with HTTP 400.
        call_id_exactly: Tool-call ids must be this many letters or digits (Mistral templates: 9).
        context_size: The model's window: a request whose prompt is estimated larger is refused
            with HTTP 400 ``request (N tokens) exceeds the available context size (M tokens)``.
        stream_usage: ``False``: streams carry no ``usage``, even when asked (llama-cpp-python).
        common_subset_only: A request with a field outside :data:`COMMON_FIELDS` is refused
            with HTTP 400.
        single_slot: One request at a time; another one meanwhile gets HTTP 503 ``server is
            busy`` with ``retry-after-ms`` (a busy llama.cpp slot).
        tokenize_ratio: The server has a tokenizer of its own, which counts this many tokens per
            ``cl100k_base`` token (rounded up; about four characters a token without tiktoken).
            It answers the tokenize endpoint of its ``kind`` (``llamacpp``: ``POST /tokenize``
            with ``content``; ``llama-cpp-python``: ``POST /extras/tokenize`` with ``input``;
            ``vllm``: ``POST /tokenize`` with ``prompt``), and ``context_size`` is checked with
            it (each message's text and tool calls, four tokens of framing each, and the
            tools' JSON). ``None``: no tokenize endpoint.
        tokenize_calls: How many tokenize requests the server answered.
        no_streamed_tools: A streamed request that offers tools fails with HTTP 500 ``Automatic
            streaming tool choice is not supported`` (llama-cpp-python's function calling).
    """

    kind: ServerKind = "openai"
    reject_null_content: bool = False
    max_call_id: int | None = None
    call_id_exactly: int | None = None
    context_size: int | None = None
    stream_usage: bool = True
    common_subset_only: bool = False
    single_slot: bool = False
    busy_retry_ms: int = 50
    tokenize_ratio: float | None = None
    tokenize_calls: int = 0
    no_streamed_tools: bool = False
    _busy: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def llamacpp(cls, context_size: int = 8192, tokenize_ratio: float | None = None) -> Quirks:
        """``llama-server`` with a Jinja template: refuses null content, reports its window (and,
        with ``tokenize_ratio``, tokenizes as a model whose tokenizer counts that much more)."""
        return cls(
            kind="llamacpp",
            reject_null_content=True,
            context_size=context_size,
            tokenize_ratio=tokenize_ratio,
        )

    def check(self, body: dict[str, Any]) -> tuple[int, str] | None:
        """The HTTP status and message this server refuses ``body`` with, or ``None``."""
        if self.common_subset_only:
            extra = sorted(set(body) - COMMON_FIELDS)
            if extra:
                return 400, f"unsupported request fields: {', '.join(extra)}"
        if self.no_streamed_tools and body.get("stream") and body.get("tools"):
            return 500, "Automatic streaming tool choice is not supported"
        messages = body.get("messages")
        for index, message in enumerate(messages if isinstance(messages, list) else []):
            if not isinstance(message, dict):
                continue
            calls = message.get("tool_calls") or []
            if calls and self.reject_null_content and message.get("content") is None:
                return 500, f"messages[{index}]: 'dict object' has no attribute 'content'"
            ids = [call.get("id") for call in calls if isinstance(call, dict)]
            if message.get("role") == "tool":
                ids.append(message.get("tool_call_id"))
            for call_id in ids:
                problem = self._bad_id(call_id)
                if problem:
                    return 400, f"messages[{index}]: {problem}"
        if self.context_size is not None:
            used = _wire.prompt_tokens(body) if self.tokenize_ratio is None else self.prompt_tokens(body)
            if used > self.context_size:
                return 400, (
                    f"request ({used} tokens) exceeds the available context size "
                    f"({self.context_size} tokens), try increasing it"
                )
        return None

    def _bad_id(self, call_id: Any) -> str | None:
        if not isinstance(call_id, str):
            return None
        if self.max_call_id is not None and len(call_id) > self.max_call_id:
            return f"tool call id {call_id!r} is longer than {self.max_call_id} characters"
        if self.call_id_exactly is not None and not (
            len(call_id) == self.call_id_exactly and call_id.isascii() and call_id.isalnum()
        ):
            return f"tool call id {call_id!r} must be {self.call_id_exactly} letters or digits"
        return None

    def describe(self, path: str, models: tuple[str, ...]) -> dict[str, Any] | None:
        """The answer to ``GET path`` this kind of server gives, or ``None`` (404)."""
        if path == "/props" and self.kind == "llamacpp":
            return {"default_generation_settings": {"n_ctx": self.context_size or 4096}, "total_slots": 1}
        if path == "/api/version" and self.kind == "ollama":
            return {"version": "0.5.7"}
        if path == "/v1/models":
            listed = _wire.models_list(models)
            for entry in listed["data"]:
                if self.kind == "vllm":
                    entry["owned_by"] = "vllm"
                    entry["max_model_len"] = self.context_size or 4096
                elif self.kind == "llama-cpp-python":
                    entry["owned_by"] = "me"
                elif self.kind == "llamacpp":
                    entry["owned_by"] = "llamacpp"
            return listed
        return None

    def model_tokens(self, text: str) -> int:
        """Tokens of ``text`` in this server's tokenizer (:attr:`tokenize_ratio`)."""
        base = _cl100k(text)
        return math.ceil(base * (self.tokenize_ratio or 1.0))

    def prompt_tokens(self, body: dict[str, Any]) -> int:
        """A chat request's prompt in this server's tokenizer, as its chat template frames it."""
        total = 0
        messages = body.get("messages")
        for message in messages if isinstance(messages, list) else []:
            if not isinstance(message, dict):
                continue
            total += 4
            if isinstance(message.get("content"), str):
                total += self.model_tokens(message["content"])
            for call in message.get("tool_calls") or []:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict):
                    total += self.model_tokens(
                        str(function.get("name", "")) + str(function.get("arguments", ""))
                    )
        tools = body.get("tools")
        for tool in tools if isinstance(tools, list) else []:
            function = tool.get("function") if isinstance(tool, dict) else None
            total += 4 + self.model_tokens(json.dumps(function, separators=(",", ":")))
        return total

    def tokenize(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """The answer to ``POST path`` when it is this server's tokenize endpoint (``None``: it is not)."""
        if self.tokenize_ratio is None:
            return None
        field = {
            ("llamacpp", "/tokenize"): "content",
            ("llama-cpp-python", "/extras/tokenize"): "input",
            ("vllm", "/tokenize"): "prompt",
        }.get((self.kind, path))
        if field is None:
            return None
        text = body.get(field)
        if not isinstance(text, str):
            return 400, _wire.error_body(400, f"{path}: {field!r} must be a string")
        self.tokenize_calls += 1
        tokens = list(range(self.model_tokens(text)))
        if self.kind == "vllm":
            return 200, {"count": len(tokens), "max_model_len": self.context_size or 4096, "tokens": tokens}
        return 200, {"tokens": tokens}


def _cl100k(text: str) -> int:
    """``cl100k_base`` tokens of ``text`` when tiktoken is installed, else about four characters each."""
    try:
        from openagent._tokens import encoding
    except ImportError:  # the SDK without the rag or master extra
        return _wire.tokens(text)
    return len(encoding().encode(text, disallowed_special=()))
