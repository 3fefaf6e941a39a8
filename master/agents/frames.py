"""The ``tool_call`` frame a WebSocket agent gets, built without the pydantic model (every
WebSocket tool call sends one)."""

from __future__ import annotations

from typing import Any

from master.storage.json_bytes import dump_json


def tool_call_frame(
    call_id: str,
    tool_name: str,
    arguments: dict[str, Any],
    traceparent: str | None,
    *,
    arguments_json: str | None = None,
) -> str:
    """The :class:`protocol.ToolCall` frame, as ``ToolCall(...).model_dump_json(exclude_none=True)``
    writes it (the same fields in the same order), encoded by :func:`dump_json` without building
    the model: every WebSocket tool call sends one (the arguments are the model's, parsed from
    JSON, or the master's own). ``arguments_json`` (a JSON object's text) replaces ``arguments``,
    spliced in as it is."""
    if arguments_json is not None:
        head = dump_json({"type": "tool_call", "call_id": call_id, "tool_name": tool_name}).decode()
        tail = f',"traceparent":{dump_json(traceparent).decode()}}}' if traceparent is not None else "}"
        return f'{head[:-1]},"arguments":{arguments_json}{tail}'
    frame: dict[str, Any] = {
        "type": "tool_call",
        "call_id": call_id,
        "tool_name": tool_name,
        "arguments": arguments,
    }
    if traceparent is not None:
        frame["traceparent"] = traceparent
    return dump_json(frame).decode()
