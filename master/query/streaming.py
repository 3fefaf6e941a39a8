"""``POST /query`` as Server-Sent Events.

Events, in order: ``step`` (a tool round starts), ``tool_call``, ``tool_progress``,
``tool_result`` as they happen, ``token`` (pieces of the model's text as it
writes), and last ``query_result`` with the full result (the fields of the JSON
answer, ``success: false`` and ``error`` when the query was rejected or failed).

The run is owned by :class:`QueryStreams`, not by the HTTP response: a client
that disconnects mid-stream stops receiving events, while the run goes on to its
end (bounded by the query's budgets and timeouts), so the session keeps every
turn and no tool call is left waiting forever.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from master.errors import QueryRejected
from master.query.admission import Admission
from master.query.service import QueryService, rejected_response
from protocol import QueryRequest

logger = logging.getLogger("master.query.streaming")

_DONE = object()


def sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n"


async def _events(queue: asyncio.Queue[tuple[str, dict[str, Any]] | object]) -> AsyncIterator[str]:
    while True:
        item = await queue.get()
        if item is _DONE:
            return
        event, data = item  # type: ignore[misc]
        yield sse(event, data)


class QueryStreams:
    """Runs streamed queries as owned background tasks."""

    def __init__(self, queries: QueryService, admission: Admission | None = None) -> None:
        self._queries = queries
        self._admission = admission or Admission(1 << 30)
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, request: QueryRequest, query_id: str) -> AsyncIterator[str]:
        """Start the run now and return its SSE body.

        Raises :class:`QueryRejected` (``too_many_queries``) when the master is at its cap, before
        anything runs, so the route can answer 429 instead of a stream.
        """
        self._admission.enter()
        queue: asyncio.Queue[tuple[str, dict[str, Any]] | object] = asyncio.Queue()

        def emit(event: str, data: dict[str, Any]) -> None:
            queue.put_nowait((event, data))

        async def run() -> None:
            try:
                response = await self._queries.run(request, query_id, events=emit)
            except QueryRejected as exc:
                response = rejected_response(request, query_id, exc)
            except Exception:
                logger.exception("streamed query %s failed", query_id)
                response = rejected_response(
                    request,
                    query_id,
                    QueryRejected("internal_error", "internal error; see the master's log"),
                )
            finally:
                self._admission.leave()
            emit("query_result", response.model_dump(mode="json"))
            queue.put_nowait(_DONE)

        task = asyncio.create_task(run(), name=f"stream {query_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return _events(queue)

    async def stream(self, request: QueryRequest, query_id: str) -> AsyncIterator[str]:
        """:meth:`start` as one async generator (the run starts when it is first iterated)."""
        async for chunk in self.start(request, query_id):
            yield chunk

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
