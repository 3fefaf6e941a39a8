"""The Kubernetes sandbox: deploy agent code into a Pod of its own or into a pool runner.

:class:`Sandbox` is what the routes (``master/routes/sandbox.py``) and ``GET /agents`` use. It
puts together the cluster (:mod:`.cluster`), the Pod specs (:mod:`.specs`), the pool runners'
API (:mod:`.pools`) and the placement records in Redis (:mod:`.placements`).

Each deployed agent gets a key of its own for the master (:class:`~master.builder.credentials.AgentKeys`:
role ``agent``, its id only, the tenant of whoever deployed it), made at deploy and revoked when
it is replaced or stopped; its id is kept in the placement, so any master sharing Redis revokes
it. A ``new_pod`` agent reads it from a Secret of its own, a pool agent gets it in its runner's
start request: never the master's key.

Deploying an agent that is already deployed replaces it: every Pod, ConfigMap and Secret labelled
with the agent (also orphans of an interrupted earlier deploy) is deleted, its key revoked, and a
pool placement is stopped in its runner, before the new workload is created. Stopping tears all
of it down.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from master.builder.credentials import AgentKeys
from master.errors import (
    SandboxDisabled,
    SandboxError,
    SandboxRejected,
    SandboxUnavailable,
)
from master.sandbox import specs
from master.sandbox.code import AgentCode, resolve_code
from master.sandbox.listings import SandboxListings
from master.sandbox.placements import Placement, Placements
from master.sandbox.pods import pod_ready, summary
from master.sandbox.pools import PoolRunners
from master.settings import Settings

if TYPE_CHECKING:
    from master.sandbox.cluster import Cluster

logger = logging.getLogger("master.sandbox")

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DISABLED_MESSAGE = (
    "the Kubernetes sandbox is off: set OPENAGENT_K8S_SANDBOX=1 (and give the master a cluster: "
    "in-cluster service account or KUBECONFIG) to deploy agents"
)


class Sandbox:
    """Deploy, stop, inspect sandboxed agents. ``cluster`` is ``None`` when the sandbox is off."""

    def __init__(
        self,
        settings: Settings,
        cluster: Cluster | None,
        pools: PoolRunners,
        placements: Placements,
        keys: AgentKeys,
        *,
        code_root: Path,
    ) -> None:
        self._settings = settings
        self._cluster = cluster
        self._pools = pools
        self._placements = placements
        self._keys = keys
        self._code_root = code_root
        self._lock = asyncio.Lock()
        self._listings = SandboxListings(settings, pools, placements)

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.close()

    @property
    def enabled(self) -> bool:
        return self._cluster is not None

    def _require(self) -> Cluster:
        if self._cluster is None:
            raise SandboxDisabled(DISABLED_MESSAGE)
        return self._cluster

    # status ---------------------------------------------------------------------------------

    async def status(self) -> dict[str, Any]:
        """Enabled, namespace, whether the cluster answers (and why not), the master_ws hint, images."""
        settings = self._settings
        answer: dict[str, Any] = {
            "enabled": self.enabled,
            "namespace": settings.openagent_k8s_namespace,
            "master_ws": settings.openagent_k8s_master_ws,
            "master_ws_hint": (
                "OPENAGENT_K8S_MASTER_WS (or master_ws in a start request) must be a WebSocket URL that "
                "resolves from inside the agent Pods: the master's Service in the cluster "
                "(ws://openagent-master:8000/ws), or ws://host.minikube.internal:8000/ws for a master on "
                "the Minikube host"
            ),
            "images": {
                "agent": settings.openagent_k8s_agent_image,
                "agent_pull_policy": settings.openagent_k8s_agent_image_pull_policy,
                "pool_runner": settings.openagent_k8s_pool_runner_image,
            },
            "pool_label_selector": settings.openagent_k8s_pool_label_selector,
            "pool_runner_port": settings.openagent_k8s_pool_runner_port,
            "runtime_class": settings.openagent_k8s_runtime_class,
        }
        if self._cluster is None:
            answer["cluster"] = {"reachable": False, "reason": "OPENAGENT_K8S_SANDBOX=0"}
            return answer
        try:
            version = await self._cluster.version()
        except SandboxError as exc:
            answer["cluster"] = {"reachable": False, "server": self._cluster.server, "reason": str(exc)}
        else:
            answer["cluster"] = {
                "reachable": True,
                "server": self._cluster.server,
                "version": version.get("gitVersion"),
            }
        return answer

    # start / stop ---------------------------------------------------------------------------

    async def start(
        self,
        agent_id: str,
        *,
        tenant: str,
        placement: Literal["new_pod", "pool"],
        module: str | None = None,
        source: str | None = None,
        pool_pod_name: str | None = None,
        master_ws: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Deploy (or redeploy) ``agent_id`` with a key of its own owned by ``tenant`` (whoever
        deploys it); the answer says where and what it replaced."""
        cluster = self._require()
        _check_agent_id(agent_id)
        variables = _checked_env(env or {})
        master_ws = master_ws or self._settings.openagent_k8s_master_ws
        if not master_ws.startswith(("ws://", "wss://")):
            raise SandboxRejected(
                "invalid_request", f"master_ws must be a ws:// or wss:// URL, got {master_ws!r}"
            )
        if pool_pod_name is not None and placement != "pool":
            raise SandboxRejected("invalid_request", "pool_pod_name applies only to placement 'pool'")
        code = resolve_code(self._code_root, module=module, source=source)
        async with self._lock:
            if placement == "new_pod":
                replaced = await self._teardown(cluster, agent_id)
            else:
                pool_pod = await self._choose_pool(cluster, pool_pod_name)
                replaced = await self._teardown(cluster, agent_id, keep_pool_pod=pool_pod["pod"])
            key_id, api_key = await self._keys.make(agent_id, tenant)
            try:
                if placement == "new_pod":
                    result = await self._start_pod(
                        cluster, agent_id, code, master_ws, variables, key_id, api_key
                    )
                else:
                    result = await self._start_in_pool(
                        agent_id, code, master_ws, variables, pool_pod, key_id, api_key
                    )
            except BaseException:
                await self._keys.revoke(key_id)  # the agent never ran: its key goes with it
                raise
        return {**result, "replaced": replaced}

    async def _start_pod(
        self,
        cluster: Cluster,
        agent_id: str,
        code: AgentCode,
        master_ws: str,
        env: dict[str, str],
        key_id: str,
        api_key: str,
    ) -> dict[str, Any]:
        namespace = self._settings.openagent_k8s_namespace
        name = specs.pod_name(agent_id)
        await cluster.create_secret(specs.secret(name, agent_id, api_key, namespace))
        try:
            await cluster.create_config_map(specs.config_map(name, agent_id, code, namespace))
            try:
                await cluster.create_pod(
                    specs.pod(
                        self._settings, name=name, agent_id=agent_id, code=code, master_ws=master_ws, env=env
                    )
                )
            except SandboxError:
                await cluster.delete_config_map(name)  # no orphan ConfigMap when the Pod is refused
                raise
        except SandboxError:
            await cluster.delete_secret(name)
            raise
        placement = Placement(
            agent_id=agent_id,
            placement="new_pod",
            namespace=namespace,
            pod_name=name,
            config_map=name,
            code=code.origin,
            master_ws=master_ws,
            deployed_at=time.time(),
            key_id=key_id,
        )
        await self._placements.save(placement)
        logger.info("sandbox: deployed %s in Pod %s/%s (%s)", agent_id, namespace, name, code.origin)
        return {
            "agent_id": agent_id,
            "placement": "new_pod",
            "namespace": namespace,
            "pod_name": name,
            "config_map": name,
            "image": self._settings.openagent_k8s_agent_image,
            "master_ws": master_ws,
            "code": code.origin,
        }

    async def _start_in_pool(
        self,
        agent_id: str,
        code: AgentCode,
        master_ws: str,
        env: dict[str, str],
        pool_pod: dict[str, Any],
        key_id: str,
        api_key: str,
    ) -> dict[str, Any]:
        answer = await self._pools.start(
            pool_pod["pod_ip"],
            {
                "agent_id": agent_id,
                "source": code.source,
                "master_ws": master_ws,
                "env": env,
                "api_key": api_key,  # the runner hands it to this agent alone
            },
        )
        placement = Placement(
            agent_id=agent_id,
            placement="pool",
            namespace=self._settings.openagent_k8s_namespace,
            pod_name=pool_pod["pod"],
            pod_ip=pool_pod["pod_ip"],
            code=code.origin,
            master_ws=master_ws,
            deployed_at=time.time(),
            key_id=key_id,
        )
        await self._placements.save(placement)
        logger.info("sandbox: deployed %s in pool Pod %s (%s)", agent_id, pool_pod["pod"], code.origin)
        return {
            "agent_id": agent_id,
            "placement": "pool",
            "namespace": placement.namespace,
            "pod_name": pool_pod["pod"],
            "pool_pod_name": pool_pod["pod"],
            "master_ws": master_ws,
            "code": code.origin,
            "pool_status": answer.get("status"),
        }

    async def _ready_pools(self, cluster: Cluster) -> list[dict[str, Any]]:
        pods = await cluster.list_pods(self._settings.openagent_k8s_pool_label_selector)
        return [
            summary(pod)
            for pod in sorted(pods, key=lambda p: p["metadata"]["name"])
            if (pod.get("status") or {}).get("phase") == "Running"
            and pod_ready(pod)
            and (pod.get("status") or {}).get("podIP")
        ]

    async def _choose_pool(self, cluster: Cluster, pool_pod_name: str | None) -> dict[str, Any]:
        """The named ready pool Pod, or the one running the fewest agents."""
        pools = await self._ready_pools(cluster)
        selector = self._settings.openagent_k8s_pool_label_selector
        if pool_pod_name is not None:
            for pool in pools:
                if pool["pod"] == pool_pod_name:
                    return pool
            raise SandboxRejected(
                "unknown_pool_pod",
                f"no ready pool runner Pod {pool_pod_name!r} (label {selector!r}); ready: "
                f"{[p['pod'] for p in pools] or 'none'}",
            )
        if not pools:
            raise SandboxRejected(
                "no_pool",
                f"no ready pool runner Pod with label {selector!r} in namespace "
                f"{self._settings.openagent_k8s_namespace!r}: apply deploy/k8s/agent-pool.yaml",
            )
        loads = await asyncio.gather(
            *(self._pools.agents(pool["pod_ip"]) for pool in pools), return_exceptions=True
        )
        answered = [
            (len(load), pool["pod"], pool)
            for pool, load in zip(pools, loads, strict=True)
            if isinstance(load, list)
        ]
        if not answered:
            raise SandboxUnavailable(f"no pool runner answered: {[str(load) for load in loads]}")
        return min(answered, key=lambda item: (item[0], item[1]))[2]

    async def _teardown(
        self, cluster: Cluster, agent_id: str, *, keep_pool_pod: str | None = None
    ) -> dict[str, Any]:
        """Delete the agent's Pods, ConfigMaps and Secrets (by label), its pool placement elsewhere,
        and revoke the key of its placement."""
        selector = specs.agent_selector(agent_id)
        pods = [pod["metadata"]["name"] for pod in await cluster.list_pods(selector)]
        config_maps = [cm["metadata"]["name"] for cm in await cluster.list_config_maps(selector)]
        secrets = [secret["metadata"]["name"] for secret in await cluster.list_secrets(selector)]
        for name in pods:
            await cluster.delete_pod(name)
        for name in config_maps:
            await cluster.delete_config_map(name)
        for name in secrets:
            await cluster.delete_secret(name)
        pool_pod = None
        placement = await self._placements.get(agent_id)
        if placement is not None and placement.placement == "pool" and placement.pod_name != keep_pool_pod:
            pool_pod = placement.pod_name
            await self._stop_in_pool(placement)
        if placement is not None and placement.key_id is not None:
            await self._keys.revoke(placement.key_id)
        return {"pods": pods, "config_maps": config_maps, "secrets": secrets, "pool_pod": pool_pod}

    async def _stop_in_pool(self, placement: Placement) -> None:
        if placement.pod_ip is None:
            return
        try:
            await self._pools.stop(placement.pod_ip, placement.agent_id)
        except SandboxRejected as exc:
            if exc.code != "not_deployed":
                raise

    async def stop(self, agent_id: str) -> dict[str, Any]:
        """Tear down everything the agent's deployment created."""
        cluster = self._require()
        async with self._lock:
            placement = await self._placements.get(agent_id)
            removed = await self._teardown(cluster, agent_id)
            if placement is not None and placement.placement == "pool":
                removed["pool_pod"] = placement.pod_name
            if placement is None and not any(removed[kind] for kind in ("pods", "config_maps", "secrets")):
                raise SandboxRejected("not_deployed", f"agent {agent_id!r} has no sandbox workload")
            await self._placements.delete(agent_id)
        logger.info("sandbox: stopped %s (%s)", agent_id, removed)
        return {"agent_id": agent_id, "stopped": True, "removed": removed}

    # logs, listings (master.sandbox.listings) -------------------------------------------------

    async def logs(self, agent_id: str, tail_lines: int) -> dict[str, Any]:
        """The agent's container log (new_pod) or its pool runner log tail."""
        return await self._listings.logs(self._require(), agent_id, tail_lines)

    async def pools(self) -> list[dict[str, Any]]:
        """Pool runner Pods with the agents each runs (or why the runner did not answer)."""
        return await self._listings.pools(self._require())

    async def workloads(self) -> dict[str, Any]:
        """The dedicated agent Pods and the pool Pods."""
        return await self._listings.workloads(self._require())

    async def agent_fields(self) -> dict[str, dict[str, Any]]:
        """``agent_id`` → the ``sandbox`` field of ``GET /agents``; unhealthy ones carry ``log_tail``.

        Never raises: an unreachable cluster or pool shows in the field as ``error``.
        """
        if self._cluster is None:
            return {}
        return await self._listings.agent_fields(self._cluster)


def _check_agent_id(agent_id: str) -> None:
    if not agent_id or len(agent_id) > 128 or not agent_id.isprintable() or "/" in agent_id:
        raise SandboxRejected(
            "invalid_request", f"agent_id must be 1-128 printable characters without '/', got {agent_id!r}"
        )


def _checked_env(env: Mapping[str, str]) -> dict[str, str]:
    for name in env:
        if not _ENV_NAME.fullmatch(name):
            raise SandboxRejected("invalid_request", f"{name!r} is not an environment variable name")
        if name in specs.RESERVED_ENV:
            raise SandboxRejected(
                "invalid_request", f"{name!r} is set by the sandbox and cannot be overridden"
            )
    return dict(env)
