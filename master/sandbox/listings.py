"""What the sandbox has deployed and how it fares: logs, the pool and agent Pods, and the
``sandbox`` field of ``GET /agents``.

:class:`SandboxListings` only reads (the cluster's Pods, the pool runners' agents, the placement
records); :class:`~master.sandbox.service.Sandbox` deploys and stops, and answers these reads
through it once it has checked that the sandbox is on.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from master.errors import SandboxError, SandboxRejected, SessionStoreUnavailable
from master.sandbox import specs
from master.sandbox.placements import Placement, Placements
from master.sandbox.pods import summary
from master.sandbox.pools import PoolRunners
from master.settings import Settings

if TYPE_CHECKING:
    from master.sandbox.cluster import Cluster

logger = logging.getLogger("master.sandbox")


class SandboxListings:
    """Read-only views of the sandbox's workloads (module docstring); every method takes the cluster."""

    def __init__(self, settings: Settings, pools: PoolRunners, placements: Placements) -> None:
        self._settings = settings
        self._pools = pools
        self._placements = placements

    async def logs(self, cluster: Cluster, agent_id: str, tail_lines: int) -> dict[str, Any]:
        """The agent's container log (new_pod) or its pool runner log tail."""
        placement = await self._placements.get(agent_id)
        if placement is None:
            raise SandboxRejected("not_deployed", f"agent {agent_id!r} has no sandbox workload")
        if placement.placement == "pool":
            lines = await self._pool_log(placement, tail_lines)
        else:
            lines = await self._pod_log(cluster, placement.pod_name, tail_lines)
        return {
            "agent_id": agent_id,
            "placement": placement.placement,
            "pod_name": placement.pod_name,
            "tail_lines": tail_lines,
            "lines": lines,
        }

    async def _pool_log(self, placement: Placement, tail_lines: int) -> list[str]:
        if placement.pod_ip is None:
            return []
        lines: list[str] = (await self._pools.logs(placement.pod_ip, placement.agent_id, tail_lines))["lines"]
        return lines

    async def _pod_log(self, cluster: Cluster, pod: str, tail_lines: int) -> list[str]:
        """The agent container's log; the previous run's when the current one has none (crash loop)."""
        text = ""
        try:
            text = await cluster.pod_log(pod, specs.AGENT_CONTAINER, tail_lines)
        except SandboxRejected as exc:
            if exc.code == "not_found":
                raise SandboxRejected("not_deployed", f"Pod {pod!r} is gone: {exc}") from exc
            # 400: the container is waiting (crash-loop back-off); its previous run has the story.
        if not text.strip():
            try:
                text = await cluster.pod_log(pod, specs.AGENT_CONTAINER, tail_lines, previous=True)
            except SandboxRejected:
                text = ""
        return text.splitlines()[-tail_lines:] if tail_lines else []

    async def pools(self, cluster: Cluster) -> list[dict[str, Any]]:
        """Pool runner Pods with the agents each runs (or why the runner did not answer)."""
        pods = await cluster.list_pods(self._settings.openagent_k8s_pool_label_selector)
        rows = [summary(pod) for pod in sorted(pods, key=lambda p: p["metadata"]["name"])]

        async def agents(row: dict[str, Any]) -> None:
            if not row["pod_ip"]:
                row["agents"], row["error"] = [], "no Pod IP yet"
                return
            try:
                row["agents"] = await self._pools.agents(row["pod_ip"])
            except SandboxError as exc:
                row["agents"], row["error"] = [], str(exc)

        await asyncio.gather(*(agents(row) for row in rows))
        return rows

    async def workloads(self, cluster: Cluster) -> dict[str, Any]:
        """The dedicated agent Pods and the pool Pods."""
        pods = await cluster.list_pods(specs.AGENT_POD_SELECTOR)
        agent_pods = [
            {
                "agent_id": (pod["metadata"].get("annotations") or {}).get(specs.AGENT_ID_ANNOTATION),
                "code": (pod["metadata"].get("annotations") or {}).get(specs.CODE_ANNOTATION),
                **summary(pod, specs.AGENT_CONTAINER),
            }
            for pod in sorted(pods, key=lambda p: p["metadata"]["name"])
        ]
        return {"namespace": cluster.namespace, "agent_pods": agent_pods, "pools": await self.pools(cluster)}

    async def agent_fields(self, cluster: Cluster) -> dict[str, dict[str, Any]]:
        """``agent_id`` → the ``sandbox`` field of ``GET /agents``; unhealthy ones carry ``log_tail``.

        Never raises: an unreachable cluster or pool shows in the field as ``error``.
        """
        try:
            placements = await self._placements.all()
        except SessionStoreUnavailable as exc:
            logger.warning("sandbox rows left out of GET /agents: %s", exc)
            return {}
        if not placements:
            return {}
        try:
            pods = {
                pod["metadata"]["name"]: pod
                for selector in (specs.AGENT_POD_SELECTOR, self._settings.openagent_k8s_pool_label_selector)
                for pod in await cluster.list_pods(selector)
            }
        except SandboxError as exc:
            return {
                p.agent_id: {
                    **_base(p),
                    "phase": "Unknown",
                    "ready": False,
                    "restarts": None,
                    "error": str(exc),
                }
                for p in placements
            }
        runners: dict[str, asyncio.Task[list[dict[str, Any]]]] = {}
        for p in placements:
            if p.placement == "pool" and p.pod_ip and p.pod_ip not in runners:
                runners[p.pod_ip] = asyncio.ensure_future(self._pools.agents(p.pod_ip))
        if runners:
            await asyncio.gather(*runners.values(), return_exceptions=True)
        fields = await asyncio.gather(*(self._field(cluster, p, pods, runners) for p in placements))
        return {p.agent_id: field for p, field in zip(placements, fields, strict=True)}

    async def _field(
        self,
        cluster: Cluster,
        placement: Placement,
        pods: dict[str, dict[str, Any]],
        runners: dict[str, asyncio.Task[list[dict[str, Any]]]],
    ) -> dict[str, Any]:
        tail = self._settings.openagent_k8s_log_tail_lines
        pod = pods.get(placement.pod_name)
        field = _base(placement)
        if pod is None:
            return {
                **field,
                "phase": "Missing",
                "ready": False,
                "restarts": None,
                "reason": "Pod not found",
                "unhealthy": True,
            }
        state = summary(pod, specs.AGENT_CONTAINER)
        field.update(
            phase=state["phase"], ready=state["ready"], restarts=state["restarts"], reason=state["reason"]
        )
        unhealthy = bool(state["unhealthy"])
        if placement.placement == "pool":
            task = runners.get(placement.pod_ip or "")
            agent = None
            if task is not None and task.exception() is None:
                agent = next((a for a in task.result() if a.get("agent_id") == placement.agent_id), None)
            if agent is None:
                reason = (
                    str(task.exception())
                    if task is not None and task.exception()
                    else "not running in the pool"
                )
                field.update(ready=False, restarts=None, reason=reason)
                unhealthy = True
            else:
                field.update(
                    ready=bool(state["ready"] and agent.get("healthy")),
                    restarts=agent.get("restarts"),
                    reason="CrashLoop" if agent.get("crash_loop") else agent.get("status"),
                    pool_status=agent.get("status"),
                )
                unhealthy = unhealthy or not agent.get("healthy")
        field["unhealthy"] = unhealthy
        if unhealthy and tail > 0:
            try:
                if placement.placement == "pool":
                    field["log_tail"] = await self._pool_log(placement, tail)
                else:
                    field["log_tail"] = await self._pod_log(cluster, placement.pod_name, tail)
            except SandboxError as exc:
                field["log_tail"] = [f"(no log: {exc})"]
        return field


def _base(placement: Placement) -> dict[str, Any]:
    return {
        "placement": placement.placement,
        "namespace": placement.namespace,
        "pod": placement.pod_name,
        "code": placement.code,
    }
