"""Admission control: how many queries may be in flight at once.

Three caps keep one client from starving the others: ``OPENAGENT_MAX_QUERIES_IN_FLIGHT``
over the whole master (every door, through :class:`master.query.entry.QueryEntry`),
``OPENAGENT_TENANT_MAX_CONCURRENT_QUERIES`` per tenant (the tenant of the key that asks, see
:class:`master.auth.Principal`; unset: no cap of its own, the master's alone) and
``OPENAGENT_WS_MAX_QUERIES_PER_CONNECTION`` per WebSocket connection (counted by the hub). A
query over a cap is refused at once with the stable code ``too_many_queries`` (HTTP 429, or a
WebSocket ``error`` frame) and changes nothing.

A master that is stopping (:mod:`master.gateway.drain`) closes its admission: every new query is
refused with ``draining`` (HTTP 503 with ``Retry-After``), while the queries in flight finish.
"""

from __future__ import annotations

from master.auth import DEFAULT_TENANT
from master.query.events import QueryRefused

TOO_MANY = "too_many_queries"
DRAINING = "draining"


class Admission:
    """Counters of the master's queries in flight, bounded by ``limit`` in all and by
    ``tenant_limit`` per tenant (``None``: no cap per tenant)."""

    def __init__(self, limit: int, *, tenant_limit: int | None = None) -> None:
        self.limit = limit
        self.tenant_limit = tenant_limit
        self.in_flight = 0
        self.by_tenant: dict[str, int] = {}
        """Queries in flight per tenant (only while a tenant has some; only with a tenant cap)."""
        self.closed: str | None = None
        """Why new queries are refused (the master is draining), or ``None``."""

    def close(self, reason: str) -> None:
        """Refuse every new query from now on with ``draining`` and ``reason``."""
        self.closed = reason

    def enter(self, tenant: str = DEFAULT_TENANT) -> None:
        """Take a slot for ``tenant``, or raise :class:`QueryRefused` (``draining``,
        ``too_many_queries``) taking none."""
        if self.closed is not None:
            raise QueryRefused(DRAINING, self.closed)
        cap = self.tenant_limit
        if cap is not None and self.by_tenant.get(tenant, 0) >= cap:
            raise QueryRefused(
                TOO_MANY,
                f"tenant {tenant!r} already runs {self.by_tenant[tenant]} queries "
                f"(OPENAGENT_TENANT_MAX_CONCURRENT_QUERIES={cap}); retry when one has finished",
            )
        if self.in_flight >= self.limit:
            raise QueryRefused(
                TOO_MANY,
                f"the master already runs {self.in_flight} queries (OPENAGENT_MAX_QUERIES_IN_FLIGHT="
                f"{self.limit}); retry when one has finished",
            )
        self.in_flight += 1
        if cap is not None:
            self.by_tenant[tenant] = self.by_tenant.get(tenant, 0) + 1

    def leave(self, tenant: str = DEFAULT_TENANT) -> None:
        """Give back the slot :meth:`enter` took for ``tenant``."""
        self.in_flight -= 1
        if self.tenant_limit is not None:
            left = self.by_tenant.get(tenant, 0) - 1
            if left > 0:
                self.by_tenant[tenant] = left
            else:
                self.by_tenant.pop(tenant, None)
