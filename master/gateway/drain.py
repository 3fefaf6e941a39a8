"""Draining on SIGTERM: refuse new work, finish the work in flight, hand the agents off.

Left to itself, uvicorn answers SIGTERM by closing every WebSocket at once (code 1012), so a
tool call running on a WebSocket agent would fail. The lifespan therefore puts
:func:`hook_sigterm` in front of uvicorn's SIGTERM handler, and a SIGTERM runs :meth:`Drain.run`
first:

1. **Refuse new work.** ``GET /ready`` answers 503 (``draining``), so a load balancer or a
   Kubernetes Service stops sending traffic; a new query (``POST /query``, its SSE form, a
   WebSocket ``query``) is refused with ``draining`` (HTTP 503 with ``Retry-After``); a new
   WebSocket connection is closed at once with 1012, so the SDK tries its next master.
2. **Finish the work in flight.** Queries and tool calls in flight (on WebSocket agents, HTTP
   invocation agents, and calls this master runs for other masters) go on, and a query may
   make further calls, until none is left or ``OPENAGENT_DRAIN_SECONDS`` have passed.
3. **The deadline.** Calls still running then fail with an error naming the drain deadline,
   new calls are refused, and the queries get :data:`ANSWER_GRACE_SECONDS` to answer with
   what they have.
4. **Hand off.** Every WebSocket is closed with 1012 (service restart): the SDK reconnects at
   once, to the next master of its ``MASTER_WS`` list (or through the Service).
5. uvicorn's own shutdown follows: HTTP connections end, then the lifespan's (in cluster mode
   the master deletes its agents' entries and its lease last).

A second SIGTERM, or a SIGINT, stops at once (uvicorn's own behaviour). The hook needs
uvicorn's signal handling in the main thread: ``python -m master`` and ``uvicorn
master.app:app`` (``--workers N`` too: each worker drains). Under another server the master
stops as that server does, without draining.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType

import uvicorn

from master.agents.dispatch import Dispatcher
from master.gateway.hub import Hub
from master.query.admission import Admission
from protocol import CLOSE_SERVICE_RESTART

logger = logging.getLogger("master.gateway.drain")

ANSWER_GRACE_SECONDS = 5.0
"""After the drain deadline, how long queries still running get to answer (their calls have
failed) before the connections close; ``python -m master`` gives uvicorn's HTTP shutdown the
same grace (``timeout_graceful_shutdown``)."""

POLL_SECONDS = 0.05
"""How often a drain looks at the work in flight."""

RETRY_AFTER_SECONDS = 1
"""``Retry-After`` of a query refused while draining: another master (or this one's
replacement) takes it."""


class Drain:
    """One master's stop: refuse new work, let the work in flight finish, hand agents off."""

    def __init__(
        self,
        *,
        seconds: float,
        admission: Admission,
        dispatcher: Dispatcher,
        hub: Hub,
        name: str = "the master",
        answer_grace: float = ANSWER_GRACE_SECONDS,
    ) -> None:
        self.seconds = seconds
        self._admission = admission
        self._dispatcher = dispatcher
        self._hub = hub
        self._name = name
        self._answer_grace = answer_grace
        self.draining = False
        """Set by :meth:`begin`: ``/ready`` answers 503 and new queries are refused."""
        self.task: asyncio.Task[None] | None = None

    @property
    def busy(self) -> tuple[int, int]:
        """(queries, tool calls) in flight."""
        return self._admission.in_flight, self._dispatcher.in_flight

    def begin(self) -> None:
        """Refuse new queries and connections; the work in flight goes on."""
        if self.draining:
            return
        self.draining = True
        self._admission.close(
            f"{self._name} is shutting down (draining): it takes no new queries; send the query again, "
            "to another master"
        )
        self._hub.refuse_connections(CLOSE_SERVICE_RESTART, "master shutting down: use another master")

    async def run(self) -> None:
        """Drain: wait for the work in flight (up to the deadline), then hand the agents off."""
        self.begin()
        queries, calls = self.busy
        logger.info(
            "draining: %d queries and %d tool calls in flight, waiting up to %g s (OPENAGENT_DRAIN_SECONDS)",
            queries,
            calls,
            self.seconds,
        )
        finished = await self._wait(lambda: self.busy == (0, 0), self.seconds)
        refusal = f"{self._name} is shutting down and takes no new calls; its agents move to another master"
        if finished:
            self._dispatcher.stop(refusal, refusal)
        else:
            failed = self._dispatcher.stop(
                refusal,
                f"{self._name} is shutting down and the call did not finish within its drain deadline "
                f"(OPENAGENT_DRAIN_SECONDS={self.seconds:g})",
            )
            logger.warning("drain deadline reached: %d tool call(s) in flight failed", failed)
            await self._wait(lambda: self._admission.in_flight == 0, self._answer_grace)
        closed = await self._hub.hand_off(CLOSE_SERVICE_RESTART, "master shutting down: reconnect elsewhere")
        queries, calls = self.busy
        logger.info(
            "drained: %d WebSocket connection(s) closed with 1012%s",
            closed,
            f"; {queries} queries still running" if queries else "",
        )

    @staticmethod
    async def _wait(done: Callable[[], bool], seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while not done():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(POLL_SECONDS)
        return True


def hook_sigterm(drain: Drain) -> Callable[[], None] | None:
    """Run ``drain`` on SIGTERM before uvicorn's handler; returns the undo, or ``None`` when the
    SIGTERM handler is not uvicorn's (another server, or not the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = signal.getsignal(signal.SIGTERM)
    if not callable(previous) or not isinstance(getattr(previous, "__self__", None), uvicorn.Server):
        return None
    uvicorn_handler = previous
    loop = asyncio.get_running_loop()

    async def drain_then_stop(sig: int) -> None:
        try:
            await drain.run()
        except Exception:  # the stop must go on whatever the drain ran into
            logger.exception("drain failed")
        uvicorn_handler(sig, None)

    def start(sig: int) -> None:
        # A fresh context: the signal may interrupt a query, whose log ids must not label the drain.
        drain.task = loop.create_task(drain_then_stop(sig), name="drain", context=contextvars.Context())

    signalled: list[int] = []

    def on_sigterm(sig: int, frame: FrameType | None) -> None:
        if signalled:  # a second SIGTERM: stop now
            uvicorn_handler(sig, frame)
            return
        signalled.append(sig)
        loop.call_soon_threadsafe(start, sig, context=contextvars.Context())

    signal.signal(signal.SIGTERM, on_sigterm)

    def undo() -> None:
        if signal.getsignal(signal.SIGTERM) is on_sigterm:
            signal.signal(signal.SIGTERM, uvicorn_handler)

    return undo
