"""Admission control: how many queries may be in flight at once.

Two caps keep one client from starving the others: ``OPENAGENT_MAX_QUERIES_IN_FLIGHT``
over the whole master (every door, through :class:`master.query.entry.QueryEntry`), and
``OPENAGENT_WS_MAX_QUERIES_PER_CONNECTION`` per WebSocket connection (counted by the hub). A
query over a cap is refused at once with the stable code ``too_many_queries`` (HTTP 429, or a
WebSocket ``error`` frame) and changes nothing.

A master that is stopping (:mod:`master.drain`) closes its admission: every new query is
refused with ``draining`` (HTTP 503 with ``Retry-After``), while the queries in flight finish.
"""

from __future__ import annotations

from master.query.events import QueryRefused

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

    def enter(self) -> None:
        """Take a slot, or raise :class:`QueryRefused` (``draining``, ``too_many_queries``) taking none."""
        if self.closed is not None:
            raise QueryRefused(DRAINING, self.closed)
        if self.in_flight >= self.limit:
            raise QueryRefused(
                TOO_MANY,
                f"the master already runs {self.in_flight} queries (OPENAGENT_MAX_QUERIES_IN_FLIGHT="
                f"{self.limit}); retry when one has finished",
            )
        self.in_flight += 1

    def leave(self) -> None:
        self.in_flight -= 1
