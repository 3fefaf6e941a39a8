"""The ways real OpenAI-compatible servers differ, for :class:`ScriptedOpenAIServer` to imitate.

A :class:`Quirks` object given to the server makes it answer as llama.cpp, Ollama or vLLM do
where they differ from the OpenAI API: what it says about itself, what requests it refuses,
what it leaves out of its answers.
"""

from __future__ import annotations

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
    _busy: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def llamacpp(cls, context_size: int = 8192) -> Quirks:
        """``llama-server`` with a Jinja template: refuses null content, reports its window."""
        return cls(kind="llamacpp", reject_null_content=True, context_size=context_size)

    def check(self, body: dict[str, Any]) -> tuple[int, str] | None:
        """The HTTP status and message this server refuses ``body`` with, or ``None``."""
        if self.common_subset_only:
            extra = sorted(set(body) - COMMON_FIELDS)
            if extra:
                return 400, f"unsupported request fields: {', '.join(extra)}"
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
            used = _wire.prompt_tokens(body)
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
