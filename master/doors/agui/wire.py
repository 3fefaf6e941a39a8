"""AG-UI's input, read into a query; the hub's approvals, written as AG-UI interrupts.

The models are the official ``ag-ui-protocol`` package's (:mod:`ag_ui.core`). A
``RunAgentInput`` becomes:

- the question: the last ``user`` message's text (text parts joined), with the input's
  ``context`` entries after it; or, when the messages end with ``tool`` messages, the results of
  the front end's own tools that the thread's run waits for;
- the session: the ``threadId`` (:attr:`master.runs.extras.RunExtras.thread_id`: the thread's
  session, or a new one of that id); a new thread's earlier messages are its context;
- the front end's ``tools``: function tools it runs itself (the run ends with them pending);
- ``resume``: the decisions on the approvals the thread's last run was interrupted for
  (:class:`Decision`, one per interrupt).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from ag_ui.core import (
    AssistantMessage,
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from master.runs.extras import RunExtras
from protocol import Approval, ErrorCode, QueryRequest

INTERRUPT_REASON = "tool_call"
"""The spec's reason of an interrupt bound to a tool call (a call that waits for a person)."""

DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "description": "Run the call (true) or refuse it (false)"},
        "editedArgs": {
            "type": "object",
            "description": "Run it with these arguments instead (a full replacement, checked against "
            "the tool's schema)",
        },
        "message": {"type": "string", "description": "Why (a refusal's reason is told to the model)"},
        "remember": {
            "type": "string",
            "enum": ["session"],
            "description": "Approve this tool for the rest of the thread",
        },
    },
    "required": ["approved"],
    "additionalProperties": False,
}
"""The ``responseSchema`` of every approval interrupt: what a ``resume`` entry's payload holds."""


class InputError(Exception):
    """An input the door refuses before anything runs (answered as ``RUN_ERROR``)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _Payload(BaseModel):
    """A ``resume`` entry's payload (:data:`DECISION_SCHEMA`)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    approved: bool
    edited_args: dict[str, Any] | None = Field(default=None, alias="editedArgs")
    message: str | None = Field(default=None, max_length=4000)
    remember: Literal["session"] | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """One approval decided by a ``resume`` entry."""

    approval_id: str
    decision: Literal["approve", "reject"]
    message: str | None = None
    arguments: dict[str, Any] | None = None
    remember: Literal["session"] | None = None


@dataclass(frozen=True, slots=True)
class Input:
    """A ``RunAgentInput``, read."""

    run: RunAgentInput
    query: QueryRequest | None
    """The query to run (``None``: a resume, which continues the thread's paused run)."""
    extras: RunExtras
    decisions: list[Decision]


def read_input(raw: bytes) -> RunAgentInput:
    """The body as a ``RunAgentInput``; raises :class:`InputError` naming each problem."""
    try:
        return RunAgentInput.model_validate_json(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'body'}: {error['msg']}"
            for error in exc.errors()[:5]
        )
        raise InputError(ErrorCode.VALIDATION_ERROR, f"not an AG-UI RunAgentInput: {problems}") from None


def translate(run: RunAgentInput) -> Input:
    """What the input asks for (module docstring); raises :class:`InputError`."""
    try:
        QueryRequest(query="-", session_id=run.thread_id)  # the threadId is a session id
    except ValidationError:
        raise InputError(
            ErrorCode.VALIDATION_ERROR,
            f"threadId {run.thread_id[:200]!r} is not a session id: 1 to 128 letters, digits, '-' or '_'",
        ) from None
    if run.resume:
        return Input(run, None, RunExtras(), [decision_of(entry) for entry in run.resume])
    messages = run.messages
    if not messages:
        raise InputError(ErrorCode.VALIDATION_ERROR, "messages is empty: the last one is the user's question")
    results: dict[str, str] | None = None
    history: list[dict[str, Any]] = []
    last = messages[-1]
    if isinstance(last, ToolMessage):
        results = {}
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                break
            results[message.tool_call_id] = text_of(message.content)
        results = dict(reversed(list(results.items())))
        questions = [text_of(m.content) for m in messages if isinstance(m, UserMessage)]
        question = questions[-1] if questions else "(tool results)"
    elif isinstance(last, UserMessage):
        question = text_of(last.content)
        if not question.strip():
            raise InputError(
                ErrorCode.VALIDATION_ERROR, f"messages[{len(messages) - 1}]: the user's question has no text"
            )
        history = [turn for m in messages[:-1] if (turn := _history_turn(m)) is not None]
    else:
        raise InputError(
            ErrorCode.VALIDATION_ERROR,
            "the last message must be the user's question (role 'user') or the results of the front "
            f"end's tools (role 'tool'), not {last.role!r}",
        )
    if run.context:
        question += "\n\nContext:\n" + "\n".join(f"- {c.description}: {c.value}" for c in run.context)
    try:
        query = QueryRequest(query=question)
    except ValidationError as exc:
        raise InputError(ErrorCode.VALIDATION_ERROR, f"the question: {exc.errors()[0]['msg']}") from None
    tools = [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters or {"type": "object", "properties": {}},
            },
        }
        for tool in run.tools or []
    ]
    extras = RunExtras(history=history, client_tools=tools, tool_results=results, thread_id=run.thread_id)
    return Input(run, query, extras, [])


def decision_of(entry: ResumeEntry) -> Decision:
    """A ``resume`` entry as a decision: ``resolved`` with the payload's ``approved`` (and
    ``editedArgs``, ``message``, ``remember``); ``cancelled`` refuses the call."""
    if entry.status == "cancelled":
        return Decision(entry.interrupt_id, "reject", "cancelled in the front end")
    try:
        payload = _Payload.model_validate(entry.payload)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'payload'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise InputError(
            ErrorCode.VALIDATION_ERROR,
            f"resume of interrupt {entry.interrupt_id!r}: the payload must fit the interrupt's "
            f"responseSchema ({problems})",
        ) from None
    if payload.remember is not None and not payload.approved:
        raise InputError(
            ErrorCode.VALIDATION_ERROR,
            f"resume of interrupt {entry.interrupt_id!r}: 'remember' goes with approved: true only",
        )
    return Decision(
        entry.interrupt_id,
        "approve" if payload.approved else "reject",
        payload.message,
        payload.edited_args if payload.approved else None,
        payload.remember,
    )


def text_of(content: Any) -> str:
    """A message's text: the string, or its text parts joined."""
    if isinstance(content, str):
        return content
    return "\n".join(
        str(getattr(part, "text", "")) for part in content or [] if getattr(part, "type", "") == "text"
    )


def _history_turn(message: Any) -> dict[str, Any] | None:
    """An earlier message of a new thread, as the session's context (text only)."""
    if isinstance(message, UserMessage | SystemMessage):
        return {"role": message.role, "content": text_of(message.content)}
    if isinstance(message, AssistantMessage) and message.content:
        return {"role": "assistant", "content": text_of(message.content)}
    return None


def tool_call_id(approval_id: str) -> str:
    """The ``toolCallId`` of the call an approval holds (stable across the two runs)."""
    return f"call-{approval_id}"


def interrupt(approval: Approval) -> Interrupt:
    """An approval as an AG-UI interrupt: its id is the approval's (``POST /approvals/{id}``
    decides the same record)."""
    return Interrupt(
        id=approval.approval_id,
        reason=INTERRUPT_REASON,
        message=f"Run {approval.agent_id}.{approval.tool_name} with {json.dumps(approval.arguments)}?",
        tool_call_id=tool_call_id(approval.approval_id),
        response_schema=DECISION_SCHEMA,
        expires_at=datetime.fromtimestamp(approval.expires_at, UTC).isoformat().replace("+00:00", "Z"),
        metadata={
            "openagent": {
                "agentId": approval.agent_id,
                "toolName": approval.tool_name,
                "arguments": approval.arguments,
                "sessionId": approval.session_id,
            }
        },
    )
