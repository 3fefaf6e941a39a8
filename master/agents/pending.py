"""A tool call in flight, what is remembered of it once it ended, and the rate limit on its
progress frames (:mod:`master.agents.dispatch` routes the calls).

At most ``OPENAGENT_MAX_PROGRESS_PER_SECOND`` progress frames of one call are relayed and logged
(at DEBUG) per second; the others are coalesced: the latest is relayed when the second is over,
and each one held back is counted (``openagent_tool_progress_coalesced_total``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from master.agents.invocation import InvocationAgent
from master.agents.registry import LiveAgent
from master.agents.remote import RemoteAgent
from master.observability.redaction import cap
from protocol import ToolProgress

logger = logging.getLogger("master.agents.dispatch")

Target = LiveAgent | InvocationAgent | RemoteAgent
CallbackOutcome = Literal["accepted", "duplicate", "finished", "unknown"]
CallStarted = Callable[[str], None]
"""Told the ``call_id`` of a call once it has been sent."""
CallProgress = Callable[[ToolProgress], None]

MAX_PROGRESS_MESSAGE_CHARS = 1000
"""A progress message is kept, relayed and shown cut to this many characters (and logged cut to
:data:`master.observability.redaction.LOG_ARG_MAX_CHARS`, control characters escaped)."""

DEFAULT_PROGRESS_PER_SECOND = 10
"""``OPENAGENT_MAX_PROGRESS_PER_SECOND``' default."""
PROGRESS_WINDOW_SECONDS = 1.0

FINISHED_MEMORY = 10_000
"""How many finished calls are remembered, to tell duplicates and late callbacks apart."""
FINISHED_RETENTION_CALL_TIMEOUTS = 2.0
"""...and for how long: twice ``TOOL_CALL_TIMEOUT`` after the call ended. Later, a callback is
"unknown" rather than "finished"; the memory (about 0.5 kB a call) stops growing under a steady
load instead of filling up to its count."""


class RemoteCalls(Protocol):
    """Hands calls to the masters holding :class:`RemoteAgent` targets (``master.cluster``).

    Their results come back through :meth:`Dispatcher.settle_remote` and
    :meth:`Dispatcher.progress_remote`.
    """

    async def send_call(
        self,
        agent: RemoteAgent,
        call_id: str,
        tool_name: str,
        arguments: dict[str, Any],
        wait_seconds: float,
        traceparent: str | None,
    ) -> None:
        """Hand the call to the master holding ``agent``; raises :class:`AgentUnavailable` when it is gone."""

    def forget(self, call_id: str) -> None:
        """The call ended (result, error or timeout): stop watching its owner."""


@dataclass(eq=False)
class PendingCall:
    """A tool call waiting for its result."""

    call_id: str
    target: Target
    tool_name: str
    future: asyncio.Future[Any]
    token: str | None = None
    started: float = field(default_factory=time.monotonic)
    last_progress: ToolProgress | None = None
    on_progress: CallProgress | None = None
    window_start: float = -PROGRESS_WINDOW_SECONDS
    """When the current second of progress frames began (the rate limit's window)."""
    window_count: int = 0
    """Progress frames relayed in the current window."""
    held: ToolProgress | None = None
    """The latest progress frame held back by the rate limit, relayed when the window ends."""
    flush: asyncio.TimerHandle | None = None
    url_index: int | None = None
    """The invocation agent's URL the call went to (``InvocationAgent.urls``), while in flight."""

    @property
    def agent_id(self) -> str:
        return self.target.agent_id


@dataclass
class FinishedCall:
    """What is remembered of a call that ended, to tell duplicates and late callbacks apart."""

    token: str | None
    resolved: bool
    last_progress: ToolProgress | None
    at: float = 0.0


class ProgressRelay:
    """Keeps each call's latest progress frame and relays at most :attr:`per_second` of a call's
    frames per second (``OPENAGENT_MAX_PROGRESS_PER_SECOND``); the others are coalesced."""

    def __init__(self, per_second: int, clock: Callable[[], float]) -> None:
        self.per_second = per_second
        self.coalesced = 0
        """Frames held back since start (``openagent_tool_progress_coalesced_total``)."""
        self._clock = clock

    def record(self, pending: PendingCall, progress: ToolProgress, transport: str) -> None:
        """Keep ``progress`` as the call's latest, and relay it unless the call has had
        :attr:`per_second` frames relayed in the current second: then it is held back
        (the latest held one is relayed when the second ends) and counted."""
        if len(progress.message) > MAX_PROGRESS_MESSAGE_CHARS:
            progress = progress.model_copy(
                update={"message": cap(progress.message, MAX_PROGRESS_MESSAGE_CHARS)}
            )
        pending.last_progress = progress
        now = self._clock()
        if now - pending.window_start >= PROGRESS_WINDOW_SECONDS:
            pending.window_start, pending.window_count = now, 0
        if pending.window_count < self.per_second:
            pending.held = None  # superseded by this one (a flush late in its window)
            if pending.flush is not None:
                pending.flush.cancel()
                pending.flush = None
            pending.window_count += 1
            self._relay(pending, progress, transport)
            return
        self.coalesced += 1
        pending.held = progress
        if pending.flush is None:
            delay = max(0.0, pending.window_start + PROGRESS_WINDOW_SECONDS - now)
            pending.flush = asyncio.get_running_loop().call_later(delay, self._flush, pending, transport)

    def _flush(self, pending: PendingCall, transport: str) -> None:
        """The window of a call with a held progress frame ended: relay that frame (the latest)."""
        pending.flush = None
        held, pending.held = pending.held, None
        if held is None or pending.future.done():
            return
        pending.window_start, pending.window_count = self._clock(), 1
        self._relay(pending, held, transport)

    def _relay(self, pending: PendingCall, progress: ToolProgress, transport: str) -> None:
        if logger.isEnabledFor(logging.DEBUG):
            percent = "" if progress.progress is None else f" {progress.progress:.0%}"
            logger.debug(
                "progress (%s) %s.%s call=%s%s %s",
                transport,
                pending.agent_id,
                pending.tool_name,
                progress.call_id,
                percent,
                progress.message,
            )
        if pending.on_progress is not None:
            pending.on_progress(progress)
