"""The Kubernetes sandbox: deploy agent code into the cluster, one Pod per agent or in a pool runner.

- :mod:`.service`: :class:`Sandbox`, what the routes and ``GET /agents`` use;
- :mod:`.cluster`: the official ``kubernetes`` client behind a small async face;
- :mod:`.specs`: the secure-by-default Pod and code ConfigMap of a ``new_pod`` agent;
- :mod:`.pools`: the client of the pool runners (``openagent/pool_runner``);
- :mod:`.placements`: where each agent runs, in Redis;
- :mod:`.code`: an agent's code, from ``agents/`` / ``system_agents/`` or source text;
- :mod:`.pods`: what a Pod status means for an agent;
- :mod:`.spawn`: auto mode's deploy-and-wait of saved agents.
"""

from __future__ import annotations

import httpx
import redis.asyncio as aioredis

from master.builder.credentials import AgentKeys
from master.sandbox.placements import Placement, Placements
from master.sandbox.pools import PoolRunners
from master.sandbox.service import Sandbox
from master.settings import Settings

__all__ = ["Placement", "Placements", "PoolRunners", "Sandbox", "create_sandbox"]


def create_sandbox(
    settings: Settings, redis: aioredis.Redis, http: httpx.AsyncClient, keys: AgentKeys
) -> Sandbox:
    """The sandbox of the settings: off (no cluster) unless ``OPENAGENT_K8S_SANDBOX=1``; ``keys``
    makes each deployed agent's own key.

    The ``kubernetes`` client (a heavy import) is loaded only when the sandbox is on.
    """
    cluster = None
    if settings.openagent_k8s_sandbox:
        from master.sandbox.cluster import Cluster

        cluster = Cluster.connect(
            settings.openagent_k8s_namespace, timeout=settings.openagent_k8s_api_timeout
        )
    return Sandbox(
        settings,
        cluster,
        PoolRunners(http, port=settings.openagent_k8s_pool_runner_port, token=settings.api_key),
        Placements(redis, ttl_seconds=settings.openagent_k8s_sandbox_runtime_ttl),
        keys,
        code_root=settings.openagent_agents_root,
    )
