"""What a door may add to a :class:`protocol.QueryRequest` beyond the protocol's fields.

The OpenAI-compatible API (:mod:`master.doors.openai`) brings a stateless asker's earlier
messages, function tools the asker runs itself, the results of those tools for a run that waits
for them, and sampling parameters for the LLM. Other doors pass none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from master.llm.model import ChatMessage
from master.runs.state import RunState


@dataclass(frozen=True)
class ClaimedRun:
    """A halted or lost run claimed for a resume (``POST /runs/{run_id}/resume``)."""

    record: Mapping[str, Any]
    """Its record, as ``GET /runs/{run_id}`` read it."""
    checkpoint: RunState
    """What it resumes from."""


@dataclass(frozen=True)
class RunExtras:
    """Door-only inputs of one query (see the module docstring)."""

    history: Sequence[ChatMessage] = ()
    """Earlier messages of an asker that keeps no session (OpenAI's format, text content): the
    context of the new session, stored as its first turns. Ignored with a ``session_id``."""
    client_tools: Sequence[dict[str, Any]] = ()
    """Function tools (OpenAI's ``tools`` entries) the asker runs itself, offered beside the
    agents': a round that calls one pauses the run (``status: awaiting_tool_results``)."""
    tool_results: Mapping[str, str] | None = None
    """Results of a paused run's calls (call id → content): the query continues that run (its
    session is found from the call ids when ``session_id`` is not given)."""
    llm_options: Mapping[str, Any] = field(default_factory=dict)
    """Sampling parameters for every LLM round (:data:`master.llm.model.LLMOptions`)."""
    offer_tools: bool = True
    """False: the model is offered no tool (OpenAI's ``tool_choice: "none"``)."""
    resume_approvals: bool = False
    """Continue the session's run paused for approvals, every one of them decided (``POST
    /approvals/{approval_id}`` submits it once the last is)."""
    direct: bool = False
    """With ``resume_approvals``: the paused run is a door's direct call held for approval
    (:meth:`master.query.entry.QueryEntry.call_tool`): it ends with the call, without the model."""
    run_id: str | None = None
    """Continue the stored run with this id (a resume) instead of starting a new one."""
    resume_run: ClaimedRun | None = None
    """A halted or lost run claimed for a resume (``POST /runs/{run_id}/resume``)."""
    new_session_id: str | None = None
    """The id of the session a query without ``session_id`` starts (a door that must name it
    before the run ends, in a streamed answer's headers); a new random one when ``None``."""
    thread_id: str | None = None
    """A conversation named by its client (an AG-UI thread), for a query without ``session_id``:
    the session with this id when the asker sees one; a new session with this id when no session
    has it; refused as ``unknown_session`` when another tenant's session has it."""
    announce: bool = False
    """Write the run's record ``running`` as soon as its request is accepted (a door that names
    the run before its end, as a background response does: a cancel from any master finds it)."""


NO_EXTRAS = RunExtras()
