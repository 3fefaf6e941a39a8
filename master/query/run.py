"""A query admitted by :class:`master.query.entry.QueryEntry`, running: its outcome and events.

:class:`QueryRun` is what a door holds of a run: the outcome (:meth:`QueryRun.result`) and, when
streamed, its events as they happen (:meth:`QueryRun.events`). :class:`DirectOutcome` is how a
door's direct call held for approval ended (:mod:`master.query.direct`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Literal

from master.agents.calls import ToolRun
from master.query.events import Finished, Progress, QueryEvent
from master.runs.store import LiveRun
from protocol import QueryResponse, RunEvent, TokenEvent


@dataclass(frozen=True, slots=True)
class DirectOutcome:
    """How a direct call held for approval ended, once decided (:meth:`QueryEntry.call_tool`)."""

    decision: Literal["approved", "rejected", "expired"]
    run: ToolRun
    """The call as it went: the agent's result or error when approved; else not sent, with the
    error that says why (refused with the person's reason, or no one decided in time)."""


class QueryRun:
    """One admitted query, running: await :meth:`result`, or iterate :meth:`events` when streamed."""

    __slots__ = ("_events", "_live", "_task", "_waiter", "direct", "query_id", "run_id")

    def __init__(self, query_id: str, *, streamed: bool, run_id: str = "") -> None:
        self.query_id = query_id
        self.direct: DirectOutcome | None = None
        """Set when the run was a held direct call going on (its answer is the call's)."""
        self.run_id = run_id
        """The run's id (a resumed run keeps the id it had; a continuation found by its calls'
        ids takes its run's id later: the answer's ``run_id`` is the one that holds)."""
        self._events: asyncio.Queue[QueryEvent | asyncio.Future[None] | None] | None = (
            asyncio.Queue() if streamed else None
        )
        self._task: asyncio.Task[QueryResponse] | None = None
        self._live: LiveRun | None = None
        self._waiter: asyncio.Future[QueryResponse] | None = None
        """What the first door that waits awaits: the run settles it as it ends, in its own last
        step (a door wakes one event-loop iteration sooner than through the task's callbacks)."""

    async def result(self) -> QueryResponse:
        """The outcome. A door that stops waiting (it is cancelled) does not stop the run."""
        task = self._task
        assert task is not None
        if task.done():
            return task.result()
        if self._waiter is not None:  # another wait already (or a door that gave up): its own
            return await asyncio.shield(task)
        waiter: asyncio.Future[QueryResponse] = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        return await waiter  # cancelling the door cancels this future, not the run

    def _settle(self, response: QueryResponse | None, error: BaseException | None = None) -> None:
        """Give the waiting door the run's outcome (as ``shield`` would: its answer, its error, or
        its cancellation)."""
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if response is not None:
            waiter.set_result(response)
        elif isinstance(error, asyncio.CancelledError):
            waiter.cancel()
        else:
            waiter.set_exception(error or RuntimeError("the run ended without an answer"))

    async def events(self, *, join_tokens: bool = False) -> AsyncIterator[QueryEvent]:
        """:class:`Progress` events as they happen, then one :class:`Finished` (``submit(stream=True)``).

        Ends without :class:`Finished` when the run was cancelled (the master stopped). With
        ``join_tokens``, the ``token`` events already waiting when one is read come as one (a door
        whose every event costs a store write keeps up with a fast model; nothing waits longer)."""
        queue = self._events
        if queue is None:
            raise RuntimeError("events() needs submit(..., stream=True)")
        carried: QueryEvent | asyncio.Future[None] | None = None
        has_carried = False
        while True:
            if has_carried:
                event, has_carried = carried, False
            else:
                event = await queue.get()
            if join_tokens and isinstance(event, Progress) and isinstance(event.event, TokenEvent):
                texts = [event.event.text]
                while not queue.empty():
                    following = queue.get_nowait()
                    if isinstance(following, Progress) and isinstance(following.event, TokenEvent):
                        texts.append(following.event.text)
                        continue
                    carried, has_carried = following, True
                    break
                if len(texts) > 1:
                    event = Progress(TokenEvent(text="".join(texts)))
            if event is None:
                return
            if isinstance(event, asyncio.Future):  # a mark of :meth:`taken`
                if not event.done():
                    event.set_result(None)
                continue
            yield event
            if isinstance(event, Finished):
                return

    def cancel(self, reason: str | None = None) -> None:
        """Stop the run (a door's client cancelled it): the orchestrator stops where it is, its tool
        calls are abandoned (a result that still comes is discarded) and the turn is not stored.
        With a ``reason`` (a client's cancel of a run this master holds, not yet recorded: see
        :meth:`QueryEntry.cancel` for one by id), the run ends ``cancelled`` and answers
        ``run_cancelled``."""
        if reason is not None and self._live is not None and self._live.cancelled is None:
            self._live.cancelled = reason
        if self._task is not None:
            self._task.cancel()

    def on_done(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when the run has ended (delivered, failed or cancelled)."""
        assert self._task is not None
        self._task.add_done_callback(lambda _: callback())

    def _emit(self, event: RunEvent) -> None:
        assert self._events is not None
        self._events.put_nowait(Progress(event))

    def taken(self) -> asyncio.Future[None]:
        """Done once the reader of :meth:`events` has handled every event emitted before now
        (it asked for the next one): a door that delivers the answer itself sends it after them."""
        assert self._events is not None
        mark: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._events.put_nowait(mark)
        return mark

    def _end(self, event: Finished | None) -> None:
        if self._events is not None:
            self._events.put_nowait(event)
