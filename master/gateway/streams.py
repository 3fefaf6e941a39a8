"""The events of a WebSocket ``query`` sent with ``stream: true``: ``run_event`` frames
(:class:`protocol.RunEventFrame`) as the run goes, before its ``query_result`` frame."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from master.query.entry import QueryRun
from master.query.events import Progress
from protocol import RunEventFrame

STREAM_FLUSH_SECONDS = 10.0
"""How long a streamed query's ``query_result`` waits for its ``run_event`` frames to be sent."""

Send = Callable[[str], Awaitable[None]]
"""Sends one frame to the query client (a closed connection is its concern)."""


class RunStreams:
    """Forwards the events of the streamed queries of every connection."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def follow(self, run: QueryRun, send: Send) -> None:
        """Send ``run``'s events (``submit(stream=True)``) as ``run_event`` frames until it ends."""
        task = asyncio.create_task(_forward(run, send), name=f"run events {run.query_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def sent(run: QueryRun) -> None:
        """Wait (at most :data:`STREAM_FLUSH_SECONDS`) until the events ``run`` emitted so far are sent."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.taken(), STREAM_FLUSH_SECONDS)


async def _forward(run: QueryRun, send: Send) -> None:
    async for event in run.events():
        if isinstance(event, Progress):
            await send(RunEventFrame(query_id=run.query_id, event=event.event).model_dump_json(fallback=str))
