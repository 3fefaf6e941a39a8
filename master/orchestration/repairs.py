"""Weak models' tool calls: finding the ones written as text, naming what is wrong with the others.

Small local models often call a tool the wrong way: as text in the answer
(``<tool_call>{"name": …, "arguments": …}</tool_call>``, or a fenced JSON object with ``name``
and ``arguments``), with arguments that are not JSON, with a tool name that does not exist, or
with arguments that fail the tool's schema. The orchestrator turns a text call into a real one
(:func:`text_calls`), and gives the model one repair round in which it sees the exact problem
(:func:`problem`); each case is logged and counted (``openagent_llm_tool_call_repairs_total``).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Literal

from master.agents.toolbox import Toolbox
from master.llm.model import ToolCallRequest

RepairKind = Literal["text_call", "bad_json", "unknown_tool", "bad_arguments"]
"""Why a call was repaired: written as text, arguments not JSON, no such tool, arguments off-schema."""

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
_FENCED = re.compile(r"```(?:json|tool_call)?\s*(\{.*?\})\s*```", re.S)
_NAMES_SHOWN = 20
"""Tool names an "unknown tool" error lists."""


def text_calls(content: str | None, offered: set[str]) -> tuple[list[ToolCallRequest], str | None]:
    """The tool calls written as text in ``content`` (in a known format), and the text left.

    Only objects with a ``name`` (a string) and ``arguments`` or ``parameters`` count; a fenced
    object counts only when its name is one of the ``offered`` function names (a fenced JSON
    example in an answer is not a call). Ids are derived from the text, so they are stable."""
    if not content:
        return [], content
    calls: list[ToolCallRequest] = []
    left = content
    for pattern, need_offered in ((_TAGGED, False), (_FENCED, True)):
        for match in pattern.finditer(content):
            call = _call(match.group(1), offered if need_offered else None, len(calls))
            if call is not None:
                calls.append(call)
                left = left.replace(match.group(0), "")
        if calls:
            break
    if not calls:
        return [], content
    return calls, left.strip() or None


def _call(text: str, offered: set[str] | None, index: int) -> ToolCallRequest | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    if offered is not None and data["name"] not in offered:
        return None
    arguments = data.get("arguments", data.get("parameters", {}))
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    digest = hashlib.blake2b(f"{index}:{text}".encode(), digest_size=8).hexdigest()
    return ToolCallRequest(id=f"call_{digest}", name=data["name"], arguments=raw)


def problem(toolbox: Toolbox, call: ToolCallRequest, known: set[str]) -> tuple[RepairKind, str] | None:
    """What is wrong with ``call`` as the model wrote it, in words the model can act on, or
    ``None`` when it can run. ``known``: the function names the run offers (the toolbox's, the
    master's own, the asker's)."""
    target = toolbox.resolve(call.name)
    if target is None:
        if call.name in known:
            return None
        names = sorted(known)
        shown = ", ".join(names[:_NAMES_SHOWN]) + (", …" if len(names) > _NAMES_SHOWN else "")
        return "unknown_tool", f"unknown tool {call.name!r}; the tools are: {shown}"
    _, tool = target
    try:
        arguments: Any = json.loads(call.arguments or "{}")
    except ValueError as exc:
        return "bad_json", f"arguments are not valid JSON: {exc}"
    if not isinstance(arguments, dict):
        return "bad_arguments", "arguments must be a JSON object"
    problems = tool.validate(arguments)
    if problems:
        return "bad_arguments", f"invalid arguments for {tool.schema.name!r}: " + "; ".join(problems)
    return None
