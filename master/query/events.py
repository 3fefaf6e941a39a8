"""What a door gets back from :class:`master.query.entry.QueryEntry`: typed, door-independent.

A door (``POST /query`` as JSON or SSE, a WebSocket ``query`` frame, the OpenAI-compatible
API, and later MCP, A2A, approvals) translates these into its own wire form:

- :class:`QueryRefused` (an exception): the query was not admitted and nothing ran; ``code`` is
  ``too_many_queries`` or ``draining``.
- :class:`Progress`: a step of the run as it happens, a typed :data:`protocol.RunEvent`
  (``step``, ``tool_call``, ``tool_progress``, ``tool_result``, ``token``; with ``roles`` also
  ``plan``, ``subtask_started``, ``verdict``; ``approval_required``; ``run_paused`` just before a
  paused run's :class:`Finished`), for a door that streams.
- :class:`Finished`: the run's one outcome, a :class:`protocol.QueryResponse`. Every outcome of an
  admitted query is one, failures included (``success: false`` with an ``error_code``: a request
  the service refused, such as ``unknown_session``, an LLM failure, or ``internal_error``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from master.errors import QueryRejected
from protocol import QueryResponse, RunEvent


class QueryRefused(QueryRejected):
    """A query the master did not admit (``too_many_queries``, ``draining``): nothing ran."""


@dataclass(frozen=True, slots=True)
class Progress:
    """A step of the run, as the orchestrator reports it."""

    event: RunEvent
    """One of :data:`protocol.RunEvent` (never its ``query_result``: that is :class:`Finished`)."""

    @property
    def type(self) -> str:
        """The event's ``type`` (``step``, ``tool_call``, ``plan``, ...): its SSE event name."""
        return self.event.type

    def data(self) -> dict[str, Any]:
        """The event as JSON-ready data (``type`` included)."""
        return self.event.model_dump(mode="json", fallback=str)


@dataclass(frozen=True, slots=True)
class Finished:
    """The run's outcome: the last event of every run that was not cancelled."""

    response: QueryResponse


QueryEvent = Progress | Finished
