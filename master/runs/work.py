"""What one run works with, and what a resume brings it.

:class:`RunWork` is the run as the query service prepared it (its orchestrator, request,
session turns, tools, model, budget, recorder, hooks and asker); the verbs of
:mod:`master.runs.engine` start or resume it. :class:`Decisions` is what a resume brings for the
item the run waits for (:attr:`master.runs.state.RunState.pending`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from master.agents.toolbox import Toolbox
from master.auth import Principal
from master.conversation.store import SessionStore, Turn
from master.conversation.turns import TurnRecorder
from master.errors import QueryRejected, SessionStoreUnavailable
from master.orchestration.budgets import BudgetTracker
from master.orchestration.orchestrator import Orchestrator, RunHooks
from master.runs.extras import NO_EXTRAS, RunExtras
from master.runs.state import RunState
from master.runs.store import LiveRun
from protocol import Approval, QueryRequest

UNKNOWN_CALL = (
    "The outcome of this call is unknown: it was sent, but the run stopped (its master was lost, "
    "or it was cancelled) before the result came back. It was not run again; it may or may not "
    "have taken effect. Say so in your answer, and do not repeat it unless the user asks."
)
"""The tool message a resumed run gives the model for a call that was in flight when it stopped."""


@dataclass
class RunWork:
    """What one query works with."""

    orchestrator: Orchestrator
    request: QueryRequest
    turns: list[Turn]
    toolbox: Toolbox
    model: str
    budget: BudgetTracker
    recorder: TurnRecorder
    hooks: RunHooks
    principal: Principal
    """Who asked (see :func:`session_owner`)."""
    system_note: str = ""
    """Added to the system prompt: the session's attached files (refs and names only)."""
    extras: RunExtras = NO_EXTRAS
    messages: list[Any] | None = None
    """The run's messages, as the orchestrator leaves them (kept when the run pauses)."""
    new_session: bool = True
    """Whether the run started its session (its owner is then the asker's tenant)."""
    live: LiveRun | None = None
    """The run's record as it goes (:mod:`master.runs.store`)."""
    coordinated: bool = False
    """The coordinator of roles runs it (:mod:`master.runs.roles`)."""
    resume_from: RunState | None = None
    """What a coordinated run a budget stopped resumes from."""


@dataclass(frozen=True)
class Decisions:
    """What a resume brings for the run's pending item. A person's approvals are decided in the
    approval store first (``POST /approvals/{approval_id}``, or a door's dialogue): the resume
    reads them there. A raised budget comes in the resumed request's ``budget``."""

    tool_results: Mapping[str, str] | None = None
    """The results of the calls of tools the asker runs itself (call id → content)."""
    claimed: bool = False
    """The run was claimed from its record (``POST /runs/{run_id}/resume``): its checkpoint is
    taken already, not its session's pause slot."""


async def session_owner(
    sessions: SessionStore, principal: Principal, session_id: str, new_session: bool
) -> str:
    """The tenant that owns the session, and so what a run makes in it (approvals,
    collaborations): the asker's, unless an administrator continues another tenant's session
    (then one Redis read, on these rare paths only)."""
    if new_session or not principal.is_admin:
        return principal.tenant
    try:
        return await sessions.owner(session_id)
    except SessionStoreUnavailable as exc:
        raise QueryRejected("session_store_unavailable", str(exc)) from None


def run_part(run: RunWork) -> dict[str, Any]:
    """What a paused run's state keeps of its record: its id and the calls it completed."""
    live = run.live
    if live is None:
        return {}
    return {"run_id": live.run_id, "completed": live.completed, "created_at": live.created_at}


def with_note(system: str, note: str) -> str:
    return f"{system}\n\n{note}" if note else system


def waiting_for(approvals: Sequence[Approval]) -> str:
    """The answer of a run whose calls wait: what waits, and the approval that decides each."""
    return "Waiting for a person to decide: " + ", ".join(
        f"{a.agent_id}.{a.tool_name} (approval {a.approval_id})" for a in approvals
    )
