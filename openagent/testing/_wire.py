"""JSON payloads in the exact shapes the OpenAI API (and so the ``openai`` client) uses.

Pure functions, no I/O: the HTTP handler turns replies into these dicts and bytes.
Token counts are approximations (about four characters per token), which is all
a test double needs.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import secrets
import struct
import time
from collections.abc import Iterator, Sequence
from typing import Any

from ._replies import TextReply, ToolCall, ToolCallReply

DEFAULT_DIMENSIONS = 64
"""Embedding size when the request does not ask for ``dimensions``."""

MAX_DIMENSIONS = 8192
"""The largest ``dimensions`` an embeddings request may ask for."""

_ARGUMENT_FRAGMENT = 8
"""Characters of tool-call arguments per streamed delta."""

_ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "not_found"),
    408: ("timeout_error", None),
    409: ("conflict_error", None),
    422: ("invalid_request_error", None),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")
"""The function names the OpenAI API accepts (at most :data:`MAX_FUNCTION_NAME` characters)."""

MAX_FUNCTION_NAME = 64


class WireError(ValueError):
    """A request the server rejects with HTTP 400; the message goes to ``error.message``.

    ``param`` and ``code`` fill ``error.param`` and ``error.code``, as the OpenAI API does
    for invalid values (e.g. ``"tools[0].function.name"``, ``"invalid_value"``).
    """

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.param = param
        self.code = code


def tokens(text: str) -> int:
    """Approximate the token count of ``text`` (at least 1 for non-empty text)."""
    return max(1, len(text) // 4) if text else 0


def error_body(
    status: int, message: str, type_: str | None = None, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """Return ``{"error": {...}}`` as OpenAI sends it, deriving ``type``/``code`` from ``status``."""
    default_type, default_code = _ERROR_KINDS.get(
        status, ("server_error" if status >= 500 else "api_error", None)
    )
    return {
        "error": {
            "message": message,
            "type": type_ or default_type,
            "param": param,
            "code": code if code is not None else default_code,
        }
    }


def check_function_names(body: dict[str, Any]) -> None:
    """Reject function names the OpenAI API rejects, in ``tools`` and in earlier ``tool_calls``.

    Raises:
        WireError: with OpenAI's message, ``param`` (e.g. ``tools[0].function.name``) and ``code``.
    """
    tools = body.get("tools")
    for index, tool in enumerate(tools if isinstance(tools, list) else []):
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict):
            _check_function_name(f"tools[{index}].function.name", function.get("name"))
    messages = body.get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call_index, call in enumerate(calls if isinstance(calls, list) else []):
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                param = f"messages[{index}].tool_calls[{call_index}].function.name"
                _check_function_name(param, function.get("name"))


def _check_function_name(param: str, name: Any) -> None:
    if not isinstance(name, str):
        raise WireError(
            f"Invalid type for '{param}': expected a string, but got {type(name).__name__} instead.",
            param=param,
            code="invalid_type",
        )
    if not name:
        raise WireError(
            f"Invalid '{param}': empty string. Expected a string with minimum length 1, "
            "but got an empty string instead.",
            param=param,
            code="empty_string",
        )
    if len(name) > MAX_FUNCTION_NAME:
        raise WireError(
            f"Invalid '{param}': string too long. Expected a string with maximum length "
            f"{MAX_FUNCTION_NAME}, but got a string with length {len(name)} instead.",
            param=param,
            code="string_above_max_length",
        )
    if not FUNCTION_NAME.fullmatch(name):
        raise WireError(
            f"Invalid '{param}': string does not match pattern. Expected a string that matches "
            f"the pattern '{FUNCTION_NAME.pattern}'.",
            param=param,
            code="invalid_value",
        )


def prompt_tokens(body: dict[str, Any]) -> int:
    """Approximate the prompt tokens of a chat request from its messages and tools."""
    return tokens(json.dumps(body.get("messages", [])) + json.dumps(body.get("tools", [])))


def _arguments(call: ToolCall) -> str:
    """Return the call's arguments as the JSON string sent on the wire (verbatim if already a str)."""
    if isinstance(call.arguments, str):
        return call.arguments
    return json.dumps(dict(call.arguments))


def _completion_tokens(reply: TextReply | ToolCallReply) -> int:
    if isinstance(reply, TextReply):
        return tokens(reply.text)
    return sum(tokens(call.name + _arguments(call)) for call in reply.calls)


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _completion_id() -> str:
    return f"chatcmpl-{secrets.token_hex(12)}"


def completion(reply: TextReply | ToolCallReply, *, model: str, prompt: int) -> dict[str, Any]:
    """Return a non-streaming ``chat.completion`` object for ``reply``."""
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
    if isinstance(reply, TextReply):
        message["content"] = reply.text
        finish_reason = "stop"
    else:
        message["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": _arguments(call)},
            }
            for call in reply.calls
        ]
        finish_reason = "tool_calls"
    return {
        "id": _completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
        "usage": _usage(prompt, _completion_tokens(reply)),
    }


def _words(text: str) -> list[str]:
    """Split ``text`` into word deltas that concatenate back to ``text`` exactly."""
    return re.findall(r"\s*\S+\s*|\s+", text)


def _tool_call_deltas(calls: Sequence[ToolCall]) -> Iterator[dict[str, Any]]:
    """Yield the ``delta`` objects for ``calls``: id and name first, then argument fragments."""
    for index, call in enumerate(calls):
        head = {"index": index, "id": call.call_id, "type": "function"}
        yield {"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]}
        arguments = _arguments(call)
        for start in range(0, len(arguments), _ARGUMENT_FRAGMENT):
            fragment = arguments[start : start + _ARGUMENT_FRAGMENT]
            yield {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}


def stream_events(
    reply: TextReply | ToolCallReply, *, model: str, prompt: int, include_usage: bool
) -> Iterator[bytes]:
    """Yield the server-sent events of a streamed completion, ending with ``data: [DONE]``.

    The sequence is OpenAI's: a role chunk, content or tool-call deltas, a chunk with
    ``finish_reason``, a usage chunk with empty ``choices`` when ``include_usage``, then ``[DONE]``.
    """
    base: dict[str, Any] = {
        "id": _completion_id(),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
    }
    if include_usage:
        base["usage"] = None

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return _event({**base, "choices": [choice]})

    if isinstance(reply, TextReply):
        yield chunk({"role": "assistant", "content": "", "refusal": None})
        for word in _words(reply.text):
            yield chunk({"content": word})
        yield chunk({}, "stop")
    else:
        yield chunk({"role": "assistant", "content": None, "refusal": None})
        for delta in _tool_call_deltas(reply.calls):
            yield chunk(delta)
        yield chunk({}, "tool_calls")
    if include_usage:
        yield _event({**base, "choices": [], "usage": _usage(prompt, _completion_tokens(reply))})
    yield b"data: [DONE]\n\n"


def _event(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


def embed(text: str, dimensions: int) -> list[float]:
    """Return a deterministic unit-length pseudo-embedding of ``text``.

    The values are rounded to float32, so they are identical whether the client asks
    for ``encoding_format="float"`` or ``"base64"`` (the ``openai`` client's default).
    """
    raw = b""
    block = 0
    while len(raw) < 4 * dimensions:
        raw += hashlib.sha256(f"{block}:{text}".encode()).digest()
        block += 1
    values = [n / 2**31 - 1.0 for n in struct.unpack(f"<{dimensions}I", raw[: 4 * dimensions])]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return list(struct.unpack(f"<{dimensions}f", struct.pack(f"<{dimensions}f", *(v / norm for v in values))))


def embeddings(body: dict[str, Any]) -> dict[str, Any]:
    """Return the ``/v1/embeddings`` response for ``body``; raise :class:`WireError` if it is invalid."""
    raw_input = body.get("input")
    if isinstance(raw_input, str):
        inputs: list[Any] = [raw_input]
    elif isinstance(raw_input, list) and raw_input:
        inputs = raw_input
    else:
        raise WireError("'input' must be a non-empty string or list")
    dimensions = body.get("dimensions", DEFAULT_DIMENSIONS)
    if (
        not isinstance(dimensions, int)
        or isinstance(dimensions, bool)
        or not 1 <= dimensions <= MAX_DIMENSIONS
    ):
        raise WireError(f"'dimensions' must be an integer from 1 to {MAX_DIMENSIONS}, got {dimensions!r}")
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise WireError(f"'encoding_format' must be 'float' or 'base64', got {encoding!r}")
    data = []
    used = 0
    for index, item in enumerate(inputs):
        text = item if isinstance(item, str) else json.dumps(item)
        used += tokens(text)
        vector = embed(text, dimensions)
        encoded: list[float] | str = vector
        if encoding == "base64":
            encoded = base64.b64encode(struct.pack(f"<{dimensions}f", *vector)).decode("ascii")
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    model = body.get("model")
    return {
        "object": "list",
        "data": data,
        "model": model if isinstance(model, str) else "scripted-embedding",
        "usage": {"prompt_tokens": used, "total_tokens": used},
    }


def models_list(models: Sequence[str]) -> dict[str, Any]:
    """Return the ``/v1/models`` response listing ``models``."""
    return {
        "object": "list",
        "data": [
            {"id": model, "object": "model", "created": 0, "owned_by": "openagent-testing"}
            for model in models
        ],
    }
