"""How a run reports what it does: :class:`RunHooks`, the callbacks a run of the orchestrator
is given (session turns, stream events, approvals, the record of calls in flight), and the
:data:`Verdict` of the approval hook on a call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from master.agents.calls import CallOptions, ToolRun
from master.agents.dispatch import Target
from master.agents.registry import AgentTool
from master.llm.model import LLMOptions
from protocol import RUN_EVENT_ADAPTER, RunEvent

__all__ = ["EventSink", "RunHooks", "Verdict"]

Verdict = Literal["run", "hold", "refuse"]
"""What :attr:`RunHooks.approval` says of a call: run it, hold it for a person, or refuse it."""

EventSink = Callable[[RunEvent], None]
"""Receives each :data:`protocol.RunEvent` as a run progresses (``step``, ``tool_call``,
``tool_progress``, ``tool_result``, ``token``; the coordinator's ``plan``, ``subtask_started``,
``verdict``; ``approval_required``). The orchestrator builds an event only when a sink is set: a
run nobody streams (a JSON answer) builds none."""


@dataclass
class RunHooks:
    """How a run reports what it does."""

    on_step: Callable[[list[ToolRun]], Awaitable[None]] | None = None
    """Called after each tool round (auto mode stores each step as it happens)."""
    events: EventSink | None = None
    """Live events for a streaming client."""
    collaborate: Callable[[list[str], str], Awaitable[dict[str, Any]]] | None = None
    """Runs a collaboration ``(agents, task) -> outcome``; set when ``start_collaboration`` is offered."""
    call_options: Callable[[Target, str, dict[str, Any]], CallOptions | None] | None = None
    """Changes how a call is sent (arguments added by the master, timeouts); the model's own
    arguments are what the session and the events record."""
    spawn: Callable[[str], Awaitable[Target]] | None = None
    """Deploys a saved agent and returns it once connected; set when ``spawn_agent`` is offered (auto mode)."""
    external: frozenset[str] = frozenset()
    """Function names of the tools the asker runs itself: a round that calls one pauses the run."""
    llm_options: LLMOptions | None = None
    """Sampling parameters for every round (:data:`master.llm.model.LLMOptions`)."""
    approval: Callable[[str, Target, AgentTool], Verdict] | None = None
    """Whether a valid call ``(function name, agent, tool)`` runs, waits for a person or is refused."""
    sending: Callable[[list[tuple[str, str, Any]]], Awaitable[None]] | None = None
    """Awaited with the calls ``(id, function name, arguments)`` of a round before they are sent:
    the run's record keeps them in flight (written before any is sent) until :attr:`on_step`
    reports them done. Raising stops the round before anything is sent."""

    def emit(self, event: RunEvent | str, data: dict[str, Any] | None = None) -> None:
        """Send ``event`` to :attr:`events`. An event given as its ``type`` and its fields
        (``emit("approval_required", {...})``) is validated into its model here: a field that
        does not fit is a bug, raised as :class:`pydantic.ValidationError`."""
        if self.events is None:
            return
        if isinstance(event, str):
            event = RUN_EVENT_ADAPTER.validate_python({**(data or {}), "type": event})
        self.events(event)
