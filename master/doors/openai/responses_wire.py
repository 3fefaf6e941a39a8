"""OpenAI's Responses wire format: a ``POST /v1/responses`` body read, the response objects and
their stream events written.

A Responses request is read as the chat-completions request it amounts to
(:func:`read_request` builds the chat body that :func:`master.doors.openai.wire.read_chat_body`
checks): ``instructions`` is the system message, ``input`` (a string, or items) the messages, a
``function_call`` item an assistant message's tool call, a ``function_call_output`` item a
``tool`` message, the flat ``function`` tools the chat API's nested ones, ``max_output_tokens``
its ``max_completion_tokens``. ``mcp_approval_response`` items are decisions on approvals
(:attr:`ResponsesRequest.decisions`), taken by the door.

An answer is a ``response`` object (:func:`response_object`): the text as a ``message`` item, the
asker's tool calls as ``function_call`` items, the calls that wait for a person as
``mcp_approval_request`` items (the item's id is the approval's id), the usage in the Responses
shape, and ``status`` ``completed``, ``incomplete`` (a budget stopped the run), ``failed``,
``cancelled``, ``queued`` or ``in_progress``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from master.doors.openai.wire import PASSED, OpenAIError, compact, read_body
from protocol import ErrorCode, QueryResponse

ECHOED = ("model", "instructions", "tools", "tool_choice", "parallel_tool_calls", "temperature", "top_p")
"""Request fields the response object repeats as they were sent."""
STATUSES = ("queued", "in_progress", "completed", "incomplete", "failed", "cancelled")
UNFINISHED = ("queued", "in_progress")


@dataclass
class ResponsesRequest:
    """A ``POST /v1/responses`` body, read (see the module docstring)."""

    body: dict[str, Any]
    """The request as sent (what the response object echoes)."""
    chat: dict[str, Any] | None
    """The chat-completions body it amounts to; ``None`` when it decides approvals (the paused run
    goes on from its session: the other items, a stateless client's history, are not needed)."""
    stream: bool = False
    background: bool = False
    store: bool = True
    previous_response_id: str | None = None
    decisions: list[dict[str, Any]] = field(default_factory=list)
    """``{"approval_id", "decision": "approve" | "reject", "message"}`` per ``mcp_approval_response``."""


def read_request(raw: bytes) -> ResponsesRequest:
    """Read a ``POST /v1/responses`` body, or raise :class:`OpenAIError` naming the field."""
    body = read_body(raw)
    stream = _flag(body, "stream", False)
    background = _flag(body, "background", False)
    store = _flag(body, "store", True)
    if background and not store:
        raise _invalid("a background response is stored: 'background': true needs 'store' true", "store")
    previous = body.get("previous_response_id")
    if previous is not None and (not isinstance(previous, str) or not previous):
        raise _invalid("'previous_response_id' must be a response id", "previous_response_id")
    messages, decisions = _input(body.get("input"), body.get("instructions"))
    chat: dict[str, Any] | None = None
    if messages and not decisions:  # with decisions, the run goes on from its session
        chat = {"model": body.get("model"), "messages": messages, "stream": stream}
        for name in PASSED:
            if name in body:
                chat[name] = body[name]
        for name in ("tool_choice", "parallel_tool_calls", "metadata"):
            if body.get(name) is not None:
                chat[name] = body[name]
        if body.get("max_output_tokens") is not None:
            chat["max_completion_tokens"] = body["max_output_tokens"]
        if body.get("tools") is not None:
            chat["tools"] = _tools(body["tools"])
    elif not decisions:
        raise _invalid("'input' is required: the question as a string, or input items", "input")
    return ResponsesRequest(
        body=body,
        chat=chat,
        stream=stream,
        background=background,
        store=store,
        previous_response_id=previous,
        decisions=decisions,
    )


def _flag(body: dict[str, Any], name: str, default: bool) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _invalid(f"'{name}' must be a boolean", name)
    return value


def _invalid(message: str, param: str | None) -> OpenAIError:
    return OpenAIError(ErrorCode.INVALID_REQUEST, message, param=param)


def _input(raw: Any, instructions: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The chat messages of ``instructions`` and ``input``, and the approval decisions."""
    messages: list[dict[str, Any]] = []
    decisions: list[dict[str, Any]] = []
    if instructions is not None:
        if not isinstance(instructions, str):
            raise _invalid("'instructions' must be a string", "instructions")
        if instructions:
            messages.append({"role": "system", "content": instructions})
    if raw is None:
        return (messages if len(messages) > 1 else []), decisions
    if isinstance(raw, str):
        return [*messages, {"role": "user", "content": raw}], decisions
    if not isinstance(raw, list):
        raise _invalid("'input' must be a string or an array of input items", "input")
    asked = False
    for index, item in enumerate(raw):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise _invalid(f"{where} must be an object", "input")
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            messages.append({"role": role, "content": _content(item.get("content"), where)})
            asked = asked or role in ("user", "assistant")
        elif kind == "function_call":
            call = {
                "id": str(item.get("call_id") or ""),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": _arguments(item.get("arguments"))},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and "tool_calls" in last:
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            if not isinstance(item.get("call_id"), str) or not item["call_id"]:
                raise _invalid(f"{where}.call_id is required for a function_call_output", "input")
            output = item.get("output")
            text = output if isinstance(output, str) else _content(output, where)
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": text})
            asked = True
        elif kind == "mcp_approval_response":
            approval_id = item.get("approval_request_id")
            if not isinstance(approval_id, str) or not approval_id:
                raise _invalid(f"{where}.approval_request_id is required", "input")
            if not isinstance(item.get("approve"), bool):
                raise _invalid(f"{where}.approve must be a boolean", "input")
            reason = item.get("reason")
            decisions.append(
                {
                    "approval_id": approval_id,
                    "decision": "approve" if item["approve"] else "reject",
                    "message": reason if isinstance(reason, str) and reason else None,
                }
            )
        elif kind in ("reasoning", "mcp_approval_request", "item_reference"):
            continue  # the hub's own output sent back by a stateless client: the session has it
        else:
            raise _invalid(
                f"{where}: input items of type {kind!r} are not supported (message, function_call, "
                "function_call_output, mcp_approval_response)",
                "input",
            )
    return (messages if asked else []), decisions


def _content(content: Any, where: str) -> str | list[dict[str, Any]]:
    """A message's content in the chat API's form (text parts; images kept, refused by the chat
    reader with its usual message)."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise _invalid(f"{where}.content must be a string or an array of content parts", "input")
    parts: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "refusal":
            parts.append({"type": "text", "text": str(part.get("refusal") or "")})
        else:
            parts.append(part if isinstance(part, dict) else {"type": None})
    return parts


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else compact(value if value is not None else {})


def _tools(raw: Any) -> Any:
    """The Responses API's flat function tools in the chat API's nested form (anything else is
    passed on for the chat reader to refuse by name)."""
    if not isinstance(raw, list):
        return raw
    tools: list[Any] = []
    for tool in raw:
        if isinstance(tool, dict) and tool.get("type") == "function" and "function" not in tool:
            function = {k: tool[k] for k in ("name", "description", "parameters", "strict") if k in tool}
            tools.append({"type": "function", "function": function})
        else:
            tools.append(tool)
    return tools


def param(chat_param: str | None) -> str | None:
    """The Responses field a chat reader's ``param`` names."""
    return {"messages": "input", "max_completion_tokens": "max_output_tokens"}.get(
        chat_param or "", chat_param
    )


# --------------------------------------------------------------------------- answers


def usage(response: QueryResponse | None) -> dict[str, Any]:
    used = response.usage if response is not None else None
    prompt, completion = (used.prompt_tokens, used.completion_tokens) if used is not None else (0, 0)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


def message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": content if status == "completed" else [],
    }


def function_call_items(response: QueryResponse) -> list[dict[str, Any]]:
    """The asker's tools the run waits for, as ``function_call`` items."""
    return [
        {
            "id": f"fc_{call.id}",
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
            "status": "completed",
        }
        for call in response.tool_calls or ()
    ]


def approval_items(response: QueryResponse) -> list[dict[str, Any]]:
    """The calls waiting for a person, as ``mcp_approval_request`` items (id: the approval's)."""
    return [
        {
            "id": approval.approval_id,
            "type": "mcp_approval_request",
            "server_label": approval.agent_id,
            "name": approval.tool_name,
            "arguments": compact(approval.arguments),
        }
        for approval in response.approvals or ()
        if approval.status == "pending"
    ]


def output_of(response: QueryResponse, message_id: str, text: str | None = None) -> list[dict[str, Any]]:
    """A finished run's output items: its text, then the calls it waits for."""
    text = response.answer if text is None else text
    items = [message_item(message_id, text)] if text else []
    return [*items, *function_call_items(response), *approval_items(response)]


def status_of(response: QueryResponse) -> str:
    if not response.success:
        return "failed"
    return "incomplete" if response.status == "stopped" else "completed"


def response_object(
    response_id: str,
    request: dict[str, Any],
    *,
    created_at: float,
    status: str,
    output: list[dict[str, Any]] | None = None,
    answer: QueryResponse | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``response`` object: the request's echoed fields, the status, the output and usage, and
    the hub's own fields (``openagent``) once the run has ended."""
    body: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "created_at": int(created_at),
        "status": status,
        "background": bool(request.get("background")),
        "error": error,
        "incomplete_details": None,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "metadata": request.get("metadata") or {},
        "model": request.get("model"),
        "output": output or [],
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "previous_response_id": request.get("previous_response_id"),
        "store": request.get("store", True),
        "temperature": request.get("temperature"),
        "text": {"format": {"type": "text"}},
        "tool_choice": request.get("tool_choice") or "auto",
        "tools": request.get("tools") or [],
        "top_p": request.get("top_p"),
        "truncation": "disabled",
        "usage": None,
    }
    if answer is not None:
        body["usage"] = usage(answer)
        body["completed_at"] = int(time.time())
        if answer.status == "stopped":
            reason = "max_output_tokens" if answer.stopped_by == "max_tokens" else answer.stopped_by
            body["incomplete_details"] = {"reason": reason}
        body["openagent"] = {
            "session_id": answer.session_id,
            "query_id": answer.query_id,
            "run_id": answer.run_id,
            "agents_used": [{"agent_id": u.agent_id, "tool_name": u.tool_name} for u in answer.agents_used],
            "steps": answer.steps,
            "status": answer.status,
            "stopped_by": answer.stopped_by,
        }
    return body


def error_object(code: ErrorCode | str, message: str) -> dict[str, Any]:
    """A failed response's ``error``."""
    return {"code": str(code), "message": message}


def sse(kind: str, sequence: int, fields: dict[str, Any]) -> bytes:
    """One event of the Responses stream (``event:`` and ``data:`` with its ``type``)."""
    data = json.dumps(
        {"type": kind, "sequence_number": sequence, **fields}, separators=(",", ":"), default=str
    )
    return f"event: {kind}\ndata: {data}\n\n".encode()
