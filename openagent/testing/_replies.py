"""The replies a :class:`~openagent.testing.ScriptedOpenAIServer` can play back.

A reply describes one answer to one ``POST /v1/chat/completions`` request:

- :class:`TextReply`: the assistant answers with text (``finish_reason: "stop"``).
- :class:`ToolCallReply`: the assistant asks for one or more :class:`ToolCall` s
  (``finish_reason: "tool_calls"``).
- :class:`ErrorReply`: the request fails with an HTTP status and an OpenAI-shaped error body.

Every reply may carry a ``delay`` in seconds that the server waits before answering,
which is how timeout paths are tested. Replies are immutable, so one reply object can
be queued or returned by a handler any number of times.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = [
    "EmptyReply",
    "ErrorReply",
    "Handler",
    "Reply",
    "TextReply",
    "ToolCall",
    "ToolCallReply",
    "echo_handler",
]


def new_call_id() -> str:
    """Return a fresh tool-call id shaped like OpenAI's (``call_<24 hex digits>``)."""
    return f"call_{secrets.token_hex(12)}"


@dataclass(frozen=True, slots=True)
class TextReply:
    """A chat completion whose assistant message is ``text``.

    Attributes:
        text: The assistant's content. When streamed, it is sent as one delta per word.
        delay: Seconds to wait before answering (before the first byte when streaming).
        token_delay: When streamed, seconds to wait before each word after the first (a
            model writing slowly).
        before_token: When streamed, called with ``n`` (1, 2, ...) on the server's thread
            before word ``n`` (counting from 0) is sent, after ``token_delay``: a test can hold
            the stream there until its client has seen the words before.
    """

    text: str
    delay: float = 0.0
    token_delay: float = 0.0
    before_token: Callable[[int], None] | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call the scripted assistant asks for.

    Attributes:
        name: The function (tool) name, e.g. ``"weather-agent__get_weather"``.
        arguments: A mapping, sent JSON-encoded; or a ``str`` sent verbatim, which is how
            malformed arguments (``'{"city": '``) are scripted.
        call_id: The tool-call id the client must echo back in its ``tool`` message.
            A fresh ``call_<hex>`` id is generated when omitted.
    """

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    call_id: str = field(default_factory=new_call_id)


@dataclass(frozen=True, slots=True)
class ToolCallReply:
    """A chat completion that asks for the tool calls in ``calls`` (in parallel when several).

    Attributes:
        calls: The calls, in the order they appear in ``message.tool_calls``.
        delay: Seconds to wait before answering.
    """

    calls: tuple[ToolCall, ...]
    delay: float = 0.0

    def __post_init__(self) -> None:
        if not self.calls:
            raise ValueError("ToolCallReply needs at least one ToolCall; use TextReply for a plain answer")


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """A failed request: HTTP ``status`` with body ``{"error": {"message", "type", "code", "param"}}``.

    The ``openai`` client maps the status to its exception classes (400
    ``BadRequestError``, 401 ``AuthenticationError``, 429 ``RateLimitError``, 5xx
    ``InternalServerError``...). Note that the client retries 408, 409, 429 and 5xx by
    default; pass ``max_retries=0`` to the client, or ``retry=False`` here, to fail at once.

    Attributes:
        status: The HTTP status code (400-599).
        message: The human-readable ``error.message``.
        type: ``error.type``; derived from ``status`` when omitted.
        code: ``error.code``; derived from ``status`` when omitted (may be ``None``).
        retry: When not ``None``, sent as the ``x-should-retry`` header, which the
            ``openai`` client obeys over its own retry rules.
        delay: Seconds to wait before answering.
    """

    status: int
    message: str
    type: str | None = None
    code: str | None = None
    retry: bool | None = None
    delay: float = 0.0

    def __post_init__(self) -> None:
        if not 400 <= self.status <= 599:
            raise ValueError(f"ErrorReply status must be 400-599, got {self.status}")


@dataclass(frozen=True, slots=True)
class EmptyReply:
    """A completion with nothing in it: a stream of only ``data: [DONE]``, or no ``choices``
    (a server that gave up without saying why).

    Attributes:
        delay: Seconds to wait before answering.
    """

    delay: float = 0.0


Reply: TypeAlias = TextReply | ToolCallReply | ErrorReply | EmptyReply
"""Any reply the server can play back."""

Handler: TypeAlias = Callable[[dict[str, Any]], Reply | str]
"""A function from a chat-completion request body to a reply; a ``str`` means ``TextReply(str)``."""


def text_of(content: Any) -> str:
    """Return the text of a message ``content``: a string, or a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def echo_handler(body: dict[str, Any]) -> Reply:
    """Answer ``"You said: <last user message>"``; the default of ``python -m openagent.testing``.

    Use it with :meth:`ScriptedOpenAIServer.set_handler` for a server that always answers.
    """
    messages = body.get("messages")
    last = ""
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                last = text_of(message.get("content"))
                break
    return TextReply(f"You said: {last}")
