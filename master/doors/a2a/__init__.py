"""The master and each hub agent as A2A agents (``/a2a``, ``/a2a/agents/{agent_id}``).

:class:`A2ADoor` (built in the lifespan) answers the routes :mod:`master.routes.a2a` declares;
:class:`RedisTaskStore` keeps the tasks in Redis for every master; :class:`HubExecutor` turns a
message into a query or a direct tool call. Guide: docs/guides/a2a-clients.md.
"""

from master.doors.a2a.cards import AGENTS_PATH, CARD_PATH, HUB_PATH
from master.doors.a2a.door import CARD_ROUTES, PREFIXES, A2ADoor, route_specs
from master.doors.a2a.executor import HubExecutor
from master.runs.a2a_tasks import RedisTaskStore

__all__ = [
    "AGENTS_PATH",
    "CARD_PATH",
    "CARD_ROUTES",
    "HUB_PATH",
    "PREFIXES",
    "A2ADoor",
    "HubExecutor",
    "RedisTaskStore",
    "route_specs",
]
