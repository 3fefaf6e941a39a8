"""OpenAI's chat-completions wire format: the request read into a query, the answers written.

:func:`parse_chat_request` turns a ``POST /v1/chat/completions`` body into a
:class:`ChatRequest` (a :class:`protocol.QueryRequest` and the door's
:class:`master.runs.extras.RunExtras`), or raises :class:`OpenAIError` naming the offending
field (``param``) as the OpenAI API does. The other functions write OpenAI's objects as plain
dicts: ``chat.completion``, ``chat.completion.chunk``, the model list and the error body.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from master.runs.extras import RunExtras
from protocol import ErrorCode, QueryRequest, QueryResponse

MODEL = "openagent"
"""The orchestrator with every agent on offer; ``openagent/<agent_id>`` scopes it to one agent."""
SESSION_HEADER = "X-OpenAgent-Session-Id"
FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

PASSED = ("temperature", "top_p", "max_tokens", "max_completion_tokens", "stop")
"""Parameters passed to the LLM of every round as they are (``parallel_tool_calls: false`` too)."""
IGNORED = (
    "frequency_penalty",
    "presence_penalty",
    "seed",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "response_format",
    "user",
    "store",
    "service_tier",
    "reasoning_effort",
    "modalities",
    "prediction",
    "audio",
    "web_search_options",
    "verbosity",
    "prompt_cache_key",
    "safety_identifier",
)
"""Accepted and ignored: they do not apply to an orchestrator that answers through tools."""

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}


class OpenAIError(Exception):
    """A refusal in OpenAI's shape: ``status``, ``code`` (an OpenAgent error code), ``param``."""

    def __init__(self, code: ErrorCode, message: str, *, param: str | None = None, status: int | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.param = param
        self.status = status if status is not None else code.status


def error_body(code: ErrorCode | str, message: str, status: int, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error body; ``error_code`` beside it is the master's usual field (clients ignore it)."""
    return {
        "error": {
            "message": message,
            "type": _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error"),
            "param": param,
            "code": str(code),
        },
        "error_code": str(code),
    }


@dataclass
class ChatRequest:
    """A chat-completions request, read."""

    model: str
    query: QueryRequest
    extras: RunExtras
    stream: bool = False
    include_usage: bool = False
    agent_scope: str | None = None
    """The agent of an ``openagent/<agent_id>`` model."""
    session_given: bool = False


def parse_chat_request(
    raw: bytes, session_header: str | None, *, auto_mode: bool, new_session_id: Callable[[], str]
) -> ChatRequest:
    """Read a ``POST /v1/chat/completions`` body (see the module docstring); ``session_header``
    is the request's :data:`SESSION_HEADER`, ``new_session_id`` names a new session."""
    return read_chat_body(read_body(raw), session_header, auto_mode=auto_mode, new_session_id=new_session_id)


def read_body(raw: bytes) -> dict[str, Any]:
    """A request's body: a JSON object, or the error that names what it is not."""
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise OpenAIError(ErrorCode.INVALID_BODY, f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise OpenAIError(ErrorCode.INVALID_BODY, "the body must be a JSON object")
    return body


def read_chat_body(
    body: dict[str, Any], session_header: str | None, *, auto_mode: bool, new_session_id: Callable[[], str]
) -> ChatRequest:
    """:func:`parse_chat_request` of a body read already (the Responses API's, translated)."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _invalid("'model' is required: 'openagent' or 'openagent/<agent_id>' (GET /v1/models)", "model")
    scope = _scope(model)
    n = body.get("n")
    if n is not None and n != 1:
        raise _invalid(f"'n' must be 1: the hub writes one answer per request (got {n!r})", "n")
    stream = body.get("stream") or False
    if not isinstance(stream, bool):
        raise _invalid("'stream' must be a boolean", "stream")
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream_options, dict):
        raise _invalid("'stream_options' must be an object", "stream_options")
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise _invalid("'metadata' must be an object", "metadata")
    session_id = (session_header or "").strip() or metadata.get("session_id") or None
    messages = _messages(body.get("messages"))
    client_tools = _tools(body.get("tools"))
    offer_tools = _tool_choice(body.get("tool_choice"))
    options = {name: body[name] for name in PASSED if body.get(name) is not None}
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise _invalid("'parallel_tool_calls' must be a boolean", "parallel_tool_calls")
    if parallel is False:
        options["parallel_tool_calls"] = False
    _check_options(options)

    results: dict[str, str] | None = None
    if messages[-1]["role"] == "tool":
        results = {}
        for message in reversed(messages):
            if message["role"] != "tool":
                break
            results[str(message.get("tool_call_id"))] = message["content"]
        results = dict(reversed(list(results.items())))
        questions = [m["content"] for m in messages if m["role"] == "user" and m["content"]]
        question = questions[-1] if questions else "(tool results)"
        history: list[dict[str, Any]] = []
    elif messages[-1]["role"] == "user":
        question = messages[-1]["content"]
        if not question.strip():
            raise _invalid(f"messages[{len(messages) - 1}]: the question is empty", "messages")
        history = messages[:-1]
    else:
        raise _invalid(
            "the last message must be the user's question (role 'user') or the results of the tools "
            f"the hub asked for (role 'tool'), not {messages[-1]['role']!r}",
            "messages",
        )
    try:
        query = QueryRequest(
            query=question,
            session_id=session_id,
            allowed_agent_ids=[scope] if scope is not None else None,
            auto_mode=auto_mode,
        )
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        param = "messages" if where == "query" else "metadata.session_id"
        raise _invalid(f"{where}: {problem['msg']}", param) from None
    extras = RunExtras(
        history=history if session_id is None else (),
        client_tools=client_tools,
        tool_results=results,
        llm_options=options,
        offer_tools=offer_tools,
        new_session_id=new_session_id() if session_id is None else None,
    )
    return ChatRequest(
        model=model,
        query=query,
        extras=extras,
        stream=stream,
        include_usage=bool(stream_options.get("include_usage")),
        agent_scope=scope,
        session_given=session_id is not None,
    )


def _invalid(message: str, param: str | None) -> OpenAIError:
    return OpenAIError(ErrorCode.INVALID_REQUEST, message, param=param)


def _scope(model: str) -> str | None:
    if model == MODEL:
        return None
    prefix = MODEL + "/"
    if model.startswith(prefix) and len(model) > len(prefix):
        return model[len(prefix) :]
    raise OpenAIError(
        ErrorCode.UNKNOWN_MODEL,
        f"the model {model!r} does not exist: the hub serves 'openagent' and 'openagent/<agent_id>' "
        "(GET /v1/models lists them)",
        param="model",
    )


def _text(content: Any, where: str) -> str:
    """A message's content as text: a string, or the text parts of the array form."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _invalid(f"{where}.content must be a string or an array of content parts", "messages")
    texts = []
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind in ("image_url", "input_image", "image"):
            raise _invalid(
                f"{where}.content[{index}] is an image: the hub's orchestrator reads text only; "
                "send the question as text",
                "messages",
            )
        else:
            raise _invalid(
                f"{where}.content[{index}]: content parts of type {kind!r} are not supported (only 'text')",
                "messages",
            )
    return "\n".join(texts)


def _messages(raw: Any) -> list[dict[str, Any]]:
    """The messages, checked, with text content (assistant tool calls and tool call ids kept)."""
    if not isinstance(raw, list) or not raw:
        raise _invalid("'messages' must be a non-empty array", "messages")
    messages: list[dict[str, Any]] = []
    for index, message in enumerate(raw):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise _invalid(f"{where} must be an object", "messages")
        role = message.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise _invalid(
                f"{where}.role must be 'system', 'developer', 'user', 'assistant' or 'tool' (got {role!r})",
                "messages",
            )
        item: dict[str, Any] = {"role": role, "content": _text(message.get("content"), where)}
        if role == "assistant" and message.get("tool_calls"):
            if not isinstance(message["tool_calls"], list):
                raise _invalid(f"{where}.tool_calls must be an array", "messages")
            item["tool_calls"] = message["tool_calls"]
        if role == "tool":
            if not isinstance(message.get("tool_call_id"), str) or not message["tool_call_id"]:
                raise _invalid(f"{where}.tool_call_id is required for a tool message", "messages")
            item["tool_call_id"] = message["tool_call_id"]
        messages.append(item)
    return messages


def _tools(raw: Any) -> list[dict[str, Any]]:
    """The client's function tools, in the shape the orchestrator offers tools."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _invalid("'tools' must be an array", "tools")
    tools: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, tool in enumerate(raw):
        where = f"tools[{index}]"
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(function, dict):
            raise _invalid(
                f"{where}: only function tools are supported ({{'type': 'function', ...}})", "tools"
            )
        name = function.get("name")
        if not isinstance(name, str) or not FUNCTION_NAME.fullmatch(name):
            raise _invalid(
                f"{where}.function.name must match ^[a-zA-Z0-9_-]{{1,64}}$ (got {name!r})", "tools"
            )
        if name in seen:
            raise _invalid(f"{where}: two tools are named {name!r}", "tools")
        seen.add(name)
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise _invalid(f"{where}.function.parameters must be a JSON Schema object", "tools")
        definition: dict[str, Any] = {"name": name}
        if isinstance(function.get("description"), str):
            definition["description"] = function["description"]
        definition["parameters"] = parameters or {"type": "object", "properties": {}}
        if function.get("strict") is not None:
            definition["strict"] = bool(function["strict"])
        tools.append({"type": "function", "function": definition})
    return tools


def _tool_choice(choice: Any) -> bool:
    """Whether tools are offered: ``auto`` (the default) and ``none`` are honoured."""
    if choice is None or choice == "auto":
        return True
    if choice == "none":
        return False
    raise _invalid(
        f"tool_choice {choice!r} is not supported: the hub's orchestrator decides which tools to call; "
        "send 'auto' or 'none'",
        "tool_choice",
    )


def _check_options(options: dict[str, Any]) -> None:
    for name in ("temperature", "top_p"):
        value = options.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise _invalid(f"'{name}' must be a number", name)
    for name in ("max_tokens", "max_completion_tokens"):
        value = options.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise _invalid(f"'{name}' must be a positive integer", name)
    stop = options.get("stop")
    if stop is not None and not (
        isinstance(stop, str) or (isinstance(stop, list) and all(isinstance(s, str) for s in stop))
    ):
        raise _invalid("'stop' must be a string or an array of strings", "stop")


# --------------------------------------------------------------------------- answers


def model_entry(model_id: str, created: int) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": created, "owned_by": "openagent"}


def usage(response: QueryResponse) -> dict[str, int]:
    used = response.usage
    if used is None:
        return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    return {
        "prompt_tokens": used.prompt_tokens,
        "completion_tokens": used.completion_tokens,
        "total_tokens": used.total_tokens,
    }


def extras(response: QueryResponse) -> dict[str, Any]:
    """The hub's own fields (``openagent``), which OpenAI clients ignore."""
    return {
        "session_id": response.session_id,
        "query_id": response.query_id,
        "run_id": response.run_id,
        "agents_used": [{"agent_id": u.agent_id, "tool_name": u.tool_name} for u in response.agents_used],
        "steps": response.steps,
        "status": response.status,
        "stopped_by": response.stopped_by,
    }


def tool_calls(response: QueryResponse) -> list[dict[str, Any]]:
    return [
        {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
        for call in response.tool_calls or ()
    ]


def completion(completion_id: str, model: str, response: QueryResponse) -> dict[str, Any]:
    """A ``chat.completion`` object."""
    message: dict[str, Any] = {"role": "assistant", "content": response.answer or None, "refusal": None}
    calls = tool_calls(response)
    if calls:
        message["tool_calls"] = calls
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": usage(response),
        "system_fingerprint": None,
        "openagent": extras(response),
    }


def chunk(
    completion_id: str,
    model: str,
    created: int,
    delta: dict[str, Any],
    finish_reason: str | None = None,
    **more: Any,
) -> bytes:
    """One server-sent event carrying a ``chat.completion.chunk``."""
    body = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
        **more,
    }
    return event(body)


def compact(value: Any) -> str:
    """A value as compact JSON text (for the tool steps shown as reasoning)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def event(body: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(body, separators=(",", ":"), default=str).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"
