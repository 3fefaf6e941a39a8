"""The one tool every bench agent offers: ``echo``, which returns its text at once."""

from __future__ import annotations

from typing import Any

TOOL_NAME = "echo"

ECHO_TOOL: dict[str, Any] = {
    "name": TOOL_NAME,
    "description": "Echo the text back",
    "parameters": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}


async def echo(tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The tool's handler: no work, so the round trip is all transport."""
    return {"echo": arguments.get("text")}
