"""The demo LLM's answer to the agent builder: the builder's own template, filled in.

The master's agent builder (``POST /generate-agent``) sends a system prompt holding a module
template in a ``python`` block and a JSON brief (``name``, ``description``, ``tools``). A real
model writes the tools' logic; the demo LLM cannot, so it fills the template mechanically: one
``ToolSchema`` per tool the form lists (``echo`` when none), each taking an optional ``text``,
and a handler that returns its arguments. The code passes the builder's checks, so generate →
save → discover → link can be tried offline; its docstring says it came from the demo.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ._replies import text_of

__all__ = ["builder_reply"]

BUILDER_PROMPT = "You write agent modules for OpenAgent"
"""How the builder's system prompt starts (master/builder/generator.py)."""

_TEMPLATE = re.compile(r"```python\n(.*?)```", re.DOTALL)
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_TOOLS_BLOCK = re.compile(r"^TOOLS = \[\n.*?^\]\n", re.DOTALL | re.MULTILINE)
_HANDLER = re.compile(r"^async def handle_tool\(.*?(?=^\S)", re.DOTALL | re.MULTILINE)
_DECIDE = re.compile(r"^(\s*)\.\.\.  # decide.*$", re.MULTILINE)
NOTE = "Written by the demo LLM, not a model: each tool returns the arguments it was given."


def builder_reply(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The module for a builder request, in a ``python`` block; None when it is not one."""
    system = next((text_of(m.get("content")) for m in messages if m.get("role") == "system"), "")
    if not system.startswith(BUILDER_PROMPT):
        return None
    found = _TEMPLATE.search(system)
    if found is None:
        return None
    brief = _brief(messages)
    names = [
        name for name in brief.get("tools") or [] if isinstance(name, str) and _TOOL_NAME.fullmatch(name)
    ]
    source = _fill(
        found.group(1), list(dict.fromkeys(names)) or ["echo"], str(brief.get("description") or "")
    )
    return f"{NOTE}\n\n```python\n{source}```\n"


def _brief(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    for message in messages:
        if message.get("role") == "user":
            try:
                brief = json.loads(text_of(message.get("content")))
            except ValueError:
                return {}
            return brief if isinstance(brief, dict) else {}
    return {}


def _fill(template: str, names: list[str], description: str) -> str:
    invocation = "endpoint=" in template
    schemas = "".join(
        "    ToolSchema(\n"
        f"        name={name!r},\n"
        f"        description={f'{name}: returns its arguments (demo agent)'!r},\n"
        "        parameters={\n"
        '            "type": "object",\n'
        '            "properties": {"text": {"type": "string", "description": "Any text"}},\n'
        "        },\n" + (f"        endpoint={'/' + name!r},\n" if invocation else "") + "    ),\n"
        for name in names
    )
    handler = (
        "async def handle_tool(tool_name: str, arguments: dict[str, Any]) -> Any:\n"
        f"    # {NOTE}\n"
        f"    if tool_name in {tuple(names)!r}:\n"
        '        return {"tool": tool_name, "arguments": arguments}\n'
        '    raise ToolError(f"unknown tool {tool_name!r}")\n\n\n'
    )
    source = _TOOLS_BLOCK.sub(lambda _: f"TOOLS = [\n{schemas}]\n", template, count=1)
    source = _HANDLER.sub(lambda _: handler, source, count=1)
    source = _DECIDE.sub(lambda m: f'{m.group(1)}return f"the demo agent stops here: {{message!r}}"', source)
    one_line = (description.splitlines() or ["demo agent"])[0][:100] or "demo agent"
    return source.replace('"<one line>"', repr(one_line)).replace(
        '"""\n\nfrom __future__', f'\n{NOTE}\n"""\n\nfrom __future__', 1
    )
