"""The hub's tools in MCP's terms: what ``tools/list`` shows and what ``tools/call`` answers.

Every tool the orchestrator could call is listed under the function name the orchestrator gives
it (``<agent_id>__<tool>``, :func:`master.agents.toolbox.function_name`), with its description,
input schema and annotations. One more tool, :data:`ASK`, runs a query through the orchestrator.
"""

from __future__ import annotations

import json
import logging
from functools import cache
from typing import Any

import mcp_types as types
from pydantic import ValidationError

from master.agents.calls import ToolRun
from master.query.entry import OfferedTool
from protocol import QueryResponse

logger = logging.getLogger("master.doors.mcp")

ASK = "ask"
"""The name of the tool that asks the orchestrator (an agent's tool is always ``<agent>__<tool>``)."""

ASK_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "description": "The question for the orchestrator."},
        "session_id": {
            "type": "string",
            "pattern": "^[A-Za-z0-9_-]{1,128}$",
            "description": "Continue this session (from an earlier answer's session_id); omit to start one.",
        },
        "allowed_agent_ids": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Offer only these agents' tools (default: every agent's).",
        },
        "auto_mode": {
            "type": "boolean",
            "description": "Let the orchestrator take several steps (tool calls that build on each other).",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}

ASK_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "session_id": {"type": ["string", "null"], "description": "Send it back to continue the session."},
        "run_id": {
            "type": ["string", "null"],
            "description": "The run that answered (GET /runs/{run_id} on the master reads its record).",
        },
        "agents_used": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"agent_id": {"type": "string"}, "tool_name": {"type": "string"}},
                "required": ["agent_id", "tool_name"],
            },
            "description": "The agents' tools the orchestrator called to answer.",
        },
        "error_code": {
            "type": ["string", "null"],
            "description": "Why the query failed (the master's error codes), or null when it was answered.",
        },
    },
    "required": ["session_id", "agents_used", "error_code"],
}


@cache
def ask_tool() -> types.Tool:
    """The ``ask`` tool (built once)."""
    return types.Tool(
        name=ASK,
        title="Ask the OpenAgent orchestrator",
        description=(
            "Ask the OpenAgent hub a question in plain language: its orchestrator (an LLM) picks and "
            "calls the connected agents' tools and answers. Returns the answer as text, with the "
            "session_id to continue the conversation and the agents' tools it used."
        ),
        input_schema=ASK_INPUT_SCHEMA,
        output_schema=ASK_OUTPUT_SCHEMA,
        annotations=types.ToolAnnotations(read_only_hint=False, open_world_hint=True),
    )


def input_schema(tool: OfferedTool) -> dict[str, Any]:
    """The tool's JSON Schema, with the ``type: object`` at its root that MCP requires."""
    if tool.parameters.get("type") == "object":
        return tool.parameters
    return {"type": "object", **tool.parameters}


def listed(tool: OfferedTool) -> types.Tool:
    """``tool`` as ``tools/list`` shows it."""
    schema = input_schema(tool)
    return types.Tool(
        name=tool.name,
        title=f"{tool.agent_id}: {tool.tool_name}",
        description=f"[agent {tool.agent_id}] {tool.description}".strip(),  # as the orchestrator sees it
        input_schema=schema,
        annotations=_annotations(tool),
    )


def _annotations(tool: OfferedTool) -> types.ToolAnnotations | None:
    if not tool.annotations:
        return None
    try:
        return types.ToolAnnotations.model_validate(tool.annotations)
    except ValidationError as exc:  # an agent's odd hint must not hide its tool
        logger.warning("tool %s: annotations left out (%s)", tool.name, exc.errors()[0]["msg"])
        return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def run_result(run: ToolRun) -> types.CallToolResult:
    """A finished call: the agent's result (text, and structured when it is an object), or its error."""
    if not run.success:
        return error_result(run.error or "the tool failed without a message")
    structured = run.result if isinstance(run.result, dict) else None
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=_text(run.result))], structured_content=structured
    )


def error_result(message: str) -> types.CallToolResult:
    """``isError: true`` with ``message``: a failure the caller (often a model) should read."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def answer_result(response: QueryResponse) -> types.CallToolResult:
    """The orchestrator's answer: the text, plus ``session_id``, ``agents_used`` and ``error_code``
    (null when answered) as structured content; ``isError`` when the query failed."""
    code = response.error_code.value if response.error_code else None
    structured = {
        "session_id": response.session_id,
        "run_id": response.run_id,
        "agents_used": [used.model_dump() for used in response.agents_used],
        "error_code": code,
    }
    text = (response.answer or "") if response.success else f"{code or 'error'}: {response.error or ''}"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=not response.success,
    )


def refused_result(code: str, message: str) -> types.CallToolResult:
    """An ``ask`` the master did not run (``too_many_queries``, ``draining``, bad arguments)."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{code}: {message}")],
        structured_content={"session_id": None, "run_id": None, "agents_used": [], "error_code": code},
        is_error=True,
    )
