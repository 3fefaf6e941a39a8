"""What a resume brings for the items a run waits for, one decision per item.

A run waits for one kind of thing at a time (:attr:`master.runs.state.RunState.pending`): a
person's decision on each held call (:class:`Approve`, :class:`Reject`), a raised budget
(:class:`RaiseBudget`), or the client's result of each tool call it handed out
(:class:`ToolResult`). :meth:`master.query.verbs.RunVerbs.resume` takes a list of these, tagged
by ``kind``; every door translates its own form of them (an approval dialogue, an
``mcp_approval_response`` item, a ``role: tool`` message) into these.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from protocol import Budget


class _Decision(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Approve(_Decision):
    """Run the held call of ``approval_id`` (with ``arguments`` instead of the model's, if given)."""

    kind: Literal["approve"] = "approve"
    approval_id: str
    arguments: dict[str, Any] | None = None
    message: str | None = None
    remember: Literal["session"] | None = None
    """``session``: approve this tool for the rest of the session."""


class Reject(_Decision):
    """Do not run the held call of ``approval_id``; the model is told ``reason``."""

    kind: Literal["reject"] = "reject"
    approval_id: str
    reason: str | None = None


class RaiseBudget(_Decision):
    """Go on with a halted (or lost) run under ``budget``: no limit smaller than before, and the
    one that stopped it larger."""

    kind: Literal["budget"] = "budget"
    budget: Budget = Field(default_factory=Budget)


class ToolResult(_Decision):
    """The client's result of the tool call ``call_id`` the run handed it (an OpenAI client's
    own function: a ``role: tool`` message, a ``function_call_output`` item)."""

    kind: Literal["tool_result"] = "tool_result"
    call_id: str
    content: str


Decision = Annotated[Approve | Reject | RaiseBudget | ToolResult, Field(discriminator="kind")]
