"""The coordinator's state: one pydantic model, persisted in the run's checkpoint after every
transition and shown by ``GET /runs/{run_id}``.

Phases: ``init → plan → dispatch → execute → review_step → next_subtask | complete``, and
``blocked`` (the run cannot go on: ``reason`` says why) or ``escalated`` (a person decides the
critic's disagreement) from any phase.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Phase = Literal[
    "init", "plan", "dispatch", "execute", "review_step", "next_subtask", "complete", "blocked", "escalated"
]
VerdictName = Literal["pass", "fail", "needs_retry"]
SubtaskStatus = Literal["pending", "running", "reviewing", "passed", "failed", "blocked"]

MAX_ATTEMPTS = 2
"""A sub-task runs at most twice: ``needs_retry`` re-runs it once."""


class _State(BaseModel):
    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)

    @field_validator("*", mode="before")
    @classmethod
    def _empty_list(cls, value: Any) -> Any:
        """An empty list as Redis' Lua ``cjson`` writes it back (``{}``) is a list again."""
        return [] if isinstance(value, dict) and not value else value


class ReviewVerdict(_State):
    """One judgement of a sub-task's result."""

    role: Literal["reviewer", "critic", "person"]
    """Who judged (``person``: the decision of a disagreement between reviewer and critic)."""
    verdict: VerdictName
    reason: str = ""
    attempt: int = 1
    """The attempt of the sub-task it judged (1, or 2 after a ``needs_retry``)."""


class Subtask(_State):
    """One step of the planner's plan."""

    task: str
    """What to do."""
    criteria: list[str] = Field(default_factory=list)
    """How the reviewer tells it was done."""
    status: SubtaskStatus = "pending"
    attempts: int = 0
    """How many times the executor ran it."""
    output: str | None = None
    """The executor's last answer."""
    verdicts: list[ReviewVerdict] = Field(default_factory=list)
    retry_reason: str | None = None
    """The reviewer's reason for ``needs_retry``, given to the executor on its second attempt."""


class Disagreement(_State):
    """The reviewer and the critic disagree on a sub-task: a person decides (an approval)."""

    approval_id: str
    subtask: int
    """Index of the sub-task in :attr:`CoordinatorState.subtasks`."""
    reviewer: ReviewVerdict
    critic: ReviewVerdict


class CoordinatorState(_State):
    """Where a coordinated run is (see the module docstring)."""

    phase: Phase = "init"
    subtasks: list[Subtask] = Field(default_factory=list)
    current: int = 0
    """Index of the sub-task being worked on."""
    reason: str | None = None
    """Why the run is blocked (``phase: blocked``)."""
    pending: Disagreement | None = None
    """The disagreement a person decides (``phase: escalated``)."""
    answer: str | None = None
    """The final answer (``phase: complete``)."""

    @property
    def subtask(self) -> Subtask:
        return self.subtasks[self.current]
