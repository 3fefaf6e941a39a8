"""An agent's ``tool_progress`` as MCP ``notifications/progress`` on the caller's request.

The dispatcher reports progress synchronously; the notifications are sent in order by one task
per call, started at the first report (most calls report none) and ended with the call.
MCP wants each notification's ``progress`` to grow: :func:`next_value` keeps it growing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

logger = logging.getLogger("master.doors.mcp")

FLUSH_SECONDS = 5.0
"""The longest a finished call waits for its queued progress to be sent (a client that stopped reading)."""

Report = Callable[[float, float | None, str | None], Awaitable[None]]
"""``(progress, total, message)``: ``ServerSession.report_progress`` of the request."""


def next_value(last: float | None, fraction: float | None) -> float:
    """The ``progress`` to send after ``last`` for an agent's ``fraction`` (0..1, or unknown).

    The agent's fraction when it grew; else a step a thousandth of the way from ``last`` to 1,
    so the value still grows (MCP's rule) without passing the total of 1.
    """
    if last is None:
        return fraction if fraction is not None else 0.0
    if fraction is not None and fraction > last:
        return fraction
    return last + (1.0 - last) / 1000


class ProgressRelay:
    """Sends one call's progress reports, in order, through ``report``; :meth:`aclose` when done."""

    def __init__(self, report: Report, name: str) -> None:
        self._report = report
        self._name = name
        self._queue: asyncio.Queue[tuple[float | None, str] | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def __call__(self, fraction: float | None, message: str) -> None:
        self._queue.put_nowait((fraction, message))
        if self._task is None:
            self._task = asyncio.create_task(self._send(), name=f"mcp progress {self._name}")

    async def _send(self) -> None:
        last: float | None = None
        while (item := await self._queue.get()) is not None:
            fraction, message = item
            last = next_value(last, fraction)
            try:
                await self._report(last, 1.0, message or None)
            except Exception as exc:  # the caller may be gone; the call goes on
                logger.debug("progress of %s not sent: %s", self._name, exc)

    async def aclose(self) -> None:
        """Send what is queued (before the result goes out, so in order), then stop.

        Within :data:`FLUSH_SECONDS`; at once when the call itself is being cancelled."""
        task = self._task
        if task is None:
            return
        self._queue.put_nowait(None)
        try:
            await asyncio.wait({task}, timeout=FLUSH_SECONDS)
        finally:
            if not task.done():
                task.cancel()
