"""One tool call as the layers above see it: how it is sent, and how it went.

The orchestrator fills a :class:`ToolRun` per call the model asks for; the session turns
(:mod:`master.conversation.turns`) and the RAG link (:mod:`master.attachments.rag`) read them, and
the RAG link says how its calls are sent with :class:`CallOptions`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from master.llm.model import ChatMessage


@dataclass
class ToolRun:
    """One tool call the model asked for, and how it went."""

    function_name: str
    agent_id: str | None
    tool_name: str | None
    arguments: Any
    dispatched: bool = False
    """True when the call reached the agent (false: refused before sending)."""
    collaboration: list[str] | None = None
    """For a ``start_collaboration`` call: the agents that took part (the manager stored the turn)."""
    success: bool = False
    result: Any = None
    error: str | None = None
    recorded_call_id: str | None = None
    """The ``call_id`` of an HTTP invocation call: storing this run's turn ends the call's record
    in Redis (:mod:`master.agents.call_records`), so a late callback cannot store it again."""

    def as_tool_message(self, tool_call_id: str) -> ChatMessage:
        body = {"result": self.result} if self.success else {"error": self.error}
        return {"role": "tool", "tool_call_id": tool_call_id, "content": json.dumps(body, default=str)}

    @property
    def label(self) -> str:
        return f"{self.agent_id}.{self.tool_name}" if self.agent_id else self.function_name


@dataclass(frozen=True)
class CallOptions:
    """How one tool call is sent, when it differs from the default (RAG tools)."""

    arguments: dict[str, Any]
    """What the agent receives (the model's arguments plus what the master adds)."""
    wait_seconds: float | None = None
    """Replaces ``TOOL_CALL_TIMEOUT``."""
    invoke_seconds: float | None = None
    """Replaces ``TOOL_INVOKE_HTTP_TIMEOUT`` (invocation agents)."""
