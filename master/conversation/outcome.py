"""What the orchestrator did for one query, as the session turns record it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from master.agents.calls import ToolRun
from protocol import PendingToolCall, Plan


@dataclass
class Outcome:
    """What the orchestrator did for one query."""

    answer: str
    tool_runs: list[ToolRun] = field(default_factory=list)
    status: Literal["completed", "awaiting_approval", "awaiting_tool_results", "stopped"] = "completed"
    stopped_by: str | None = None
    plan: Plan | None = None
    steps: int = 0
    pending: list[PendingToolCall] = field(default_factory=list)
    """The calls a paused run waits for (``awaiting_tool_results``): tools the asker runs itself."""
    held: list[PendingToolCall] = field(default_factory=list)
    """The calls a paused run holds for a person's approval (``awaiting_approval``)."""
