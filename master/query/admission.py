"""Admission control: how many queries may be in flight at once.

Two caps keep one client from starving the others: ``OPENAGENT_MAX_QUERIES_IN_FLIGHT``
over the whole master (every entry point: ``POST /query``, its SSE form, WebSocket
``query`` frames), and ``OPENAGENT_WS_MAX_QUERIES_PER_CONNECTION`` per WebSocket
connection (counted by the hub). A query over a cap is refused at once with the stable
code ``too_many_queries`` (HTTP 429, or a WebSocket ``error`` frame) and changes nothing.

A master that is stopping (:mod:`master.drain`) closes its admission: every new query is
refused with ``draining`` (HTTP 503 with ``Retry-After``), while the queries in flight finish.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from master.errors import QueryRejected

TOO_MANY = "too_many_queries"
DRAINING = "draining"


class Admission:
    """A counter of the master's queries in flight, bounded by ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight = 0
        self.closed: str | None = None
        """Why new queries are refused (the master is draining), or ``None``."""

    def close(self, reason: str) -> None:
        """Refuse every new query from now on with ``draining`` and ``reason``."""
        self.closed = reason

    def try_enter(self) -> bool:
        """Take a slot; False (and nothing taken) when every slot is in use or admission is closed."""
        if self.in_flight >= self.limit or self.closed is not None:
            return False
        self.in_flight += 1
        return True

    def leave(self) -> None:
        self.in_flight -= 1

    def refusal(self) -> QueryRejected:
        if self.closed is not None:
            return QueryRejected(DRAINING, self.closed)
        return QueryRejected(
            TOO_MANY,
            f"the master already runs {self.in_flight} queries (OPENAGENT_MAX_QUERIES_IN_FLIGHT="
            f"{self.limit}); retry when one has finished",
        )

    def enter(self) -> None:
        """Take a slot or raise :class:`QueryRejected` (``too_many_queries``)."""
        if not self.try_enter():
            raise self.refusal()

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold a slot for the block; raises :class:`QueryRejected` when none is free."""
        self.enter()
        try:
            yield
        finally:
            self.leave()
