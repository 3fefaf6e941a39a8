"""The hub's tools in MCP's terms: what ``tools/list`` shows and what ``tools/call`` answers.

Every tool the orchestrator could call is listed under the function name the orchestrator gives
it (``<agent_id>__<tool>``, :func:`master.agents.toolbox.function_name`), with its description,
input schema and annotations. One more tool, :data:`ASK`, runs a query through the orchestrator;
when its run waits for a person, :func:`input_required` (2026-07-28) or :func:`approval_question`
(elicitation, 2025) ask the client's user to decide, else :func:`answer_result` says how to.
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
from protocol import Approval, QueryResponse

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
        "approvals": {
            "type": "array",
            "items": {"type": "object"},
            "description": (
                "Present when the run waits for a person: the tool calls that wait (approval_id, agent_id, "
                "tool_name, arguments, status, expires_at). Decide each with POST /approvals/{approval_id}."
            ),
        },
    },
    "required": ["session_id", "agents_used", "error_code"],
}

DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Decision",
            "enum": ["approve", "reject"],
            "default": "approve",
        },
        "message": {"type": "string", "title": "Reason (told to the orchestrator)"},
        "remember": {
            "type": "boolean",
            "title": "Approve this tool for the rest of the session",
            "default": False,
        },
    },
    "required": ["decision"],
}
"""What the person answers when the ``ask`` tool asks them to approve a call (MCP elicitation)."""


def approval_question(approval: Approval) -> types.ElicitRequestFormParams:
    """The form that asks a person, through the client, to approve one held call."""
    arguments = json.dumps(approval.arguments, ensure_ascii=False)
    return types.ElicitRequestFormParams(
        message=(
            f"The orchestrator wants to call {approval.agent_id}.{approval.tool_name} with {arguments}. "
            "This call needs a person's approval: approve it, or reject it with a reason."
        ),
        requested_schema=DECISION_SCHEMA,
    )


def input_required(approvals: list[Approval]) -> types.InputRequiredResult:
    """The 2026-07-28 answer of an ``ask`` whose run waits: one elicitation per held call, keyed by
    its ``approval_id`` (the client retries ``ask`` with the answers under the same keys)."""
    return types.InputRequiredResult(
        input_requests={
            approval.approval_id: types.ElicitRequest(params=approval_question(approval))
            for approval in approvals
        }
    )


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
    structured: dict[str, Any] = {
        "session_id": response.session_id,
        "run_id": response.run_id,
        "agents_used": [used.model_dump() for used in response.agents_used],
        "error_code": code,
    }
    text = (response.answer or "") if response.success else f"{code or 'error'}: {response.error or ''}"
    if response.status == "awaiting_approval" and response.approvals:
        structured["approvals"] = [approval.model_dump(mode="json") for approval in response.approvals]
        text += (
            '\n\nDecide each with POST /approvals/{approval_id} on the hub: {"decision": "approve"} or '
            '{"decision": "reject", "message": "why"}; the answer is the run\'s.'
        )
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
