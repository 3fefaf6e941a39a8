"""Starting the master once its objects are built: the background loops, the start-up checks, the
cluster membership, the SIGTERM hook and the MCP door, each entered into the exit stack that stops
it (:func:`start`); and the helpers that stop a background task on the way out.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack
from typing import Any

from master.access import KeyStore
from master.access.keys import FLUSH_SECONDS
from master.agents.directory import AgentDirectory
from master.agents.dispatch import Dispatcher
from master.agents.invocation import InvocationAgents
from master.cluster.collaboration import ClusterCollaborations
from master.cluster.directory import ClusterDirectory
from master.cluster.router import ClusterRouter
from master.collaboration import CollaborationManager
from master.doors.mcp import McpDoor
from master.errors import SessionStoreUnavailable
from master.gateway.drain import Drain, hook_sigterm
from master.observability.metrics import Metrics
from master.sandbox import Sandbox
from master.settings import Settings

__all__ = ["cancel", "cancel_any", "live_metrics", "report_sandbox", "settle", "start"]

logger = logging.getLogger("master.app")


async def start(
    stack: AsyncExitStack,
    settings: Settings,
    *,
    keys: KeyStore,
    invocation: InvocationAgents,
    cluster: ClusterDirectory | None,
    router: ClusterRouter | None,
    cluster_collab: ClusterCollaborations | None,
    mcp: McpDoor,
    drain: Drain,
    metrics: Metrics,
    agents: AgentDirectory,
    dispatcher: Dispatcher,
    collab: CollaborationManager,
) -> None:
    """Start what runs in the background, in order, each entered into ``stack`` to stop (in reverse)."""
    flush = asyncio.create_task(_flush_loop(keys, FLUSH_SECONDS), name="api-keys-last-used")
    stack.push_async_callback(cancel, flush)
    if cluster is not None and router is not None:
        # Closed in reverse: the collaborations across masters, the inbox, then the lease (last,
        # so the other masters see this one go only when it has stopped answering).
        stack.push_async_callback(cluster.aclose)
        await cluster.start()
        stack.push_async_callback(router.aclose)
        await router.start()
        cluster.on_tick.append(mcp.tools_changed)  # the other masters' agents, re-read
        if cluster_collab is not None:
            stack.push_async_callback(cluster_collab.aclose)
            cluster_collab.start()
    live_metrics(metrics, agents, dispatcher, collab)
    await load_invocation_agents(invocation)
    if cluster is not None:  # the other masters register and remove invocation agents too
        follow = asyncio.create_task(
            invocation.follow(cluster.lease_seconds / 3), name="invocation-agents-follow"
        )
        stack.push_async_callback(cancel, follow)
    if settings.openagent_health_check_interval > 0:
        health_loop = asyncio.create_task(_health_loop(invocation, settings.openagent_health_check_interval))
        stack.push_async_callback(cancel, health_loop)
    # SIGINT or a second SIGTERM cut a drain short: its task is cancelled on the way out.
    stack.push_async_callback(lambda: cancel(drain.task))
    unhook_sigterm = hook_sigterm(drain)
    if unhook_sigterm is None:
        logger.info("SIGTERM is not uvicorn's to handle here: the master will stop without draining")
    else:
        stack.callback(unhook_sigterm)
    # Started last, when everything it calls is up; closed first: MCP requests still running are
    # cancelled (their clients see the stream end) while the entry is there to end their runs.
    stack.push_async_callback(mcp.aclose)
    await mcp.start()


async def load_invocation_agents(invocation: InvocationAgents) -> None:
    """Start-up: read the invocation agents from Redis and health-check them."""
    try:
        await invocation.reload()
    except SessionStoreUnavailable as exc:
        logger.warning("could not load invocation agents: %s", exc)
        return
    if invocation.all():
        await invocation.check_all()


async def _health_loop(invocation: InvocationAgents, interval: float) -> None:
    """Re-check invocation agents periodically, so a DOWN agent comes back without /refresh."""
    while True:
        await asyncio.sleep(interval)
        try:
            await invocation.check_all()
        except Exception:  # the loop must survive anything a check throws
            logger.exception("background health check failed")


async def _flush_loop(keys: KeyStore, interval: float) -> None:
    """Write when the stored keys were last used, every ``interval`` seconds (and once at the end)."""
    try:
        while True:
            await asyncio.sleep(interval)
            await keys.flush()
    finally:
        await keys.flush()


async def report_sandbox(sandbox: Sandbox) -> None:
    """Start-up: say whether the sandbox is on and its cluster answers; never fails the start."""
    if not sandbox.enabled:
        logger.info("Kubernetes sandbox off (OPENAGENT_K8S_SANDBOX=0)")
        return
    cluster = (await sandbox.status())["cluster"]
    if cluster["reachable"]:
        logger.info("Kubernetes sandbox on: %s (%s)", cluster["server"], cluster["version"])
    else:
        logger.warning("Kubernetes sandbox on, but no cluster: %s", cluster["reason"])


def live_metrics(
    metrics: Metrics, agents: AgentDirectory, dispatcher: Dispatcher, collab: CollaborationManager
) -> None:
    """The series read from live state at scrape time."""
    metrics.live(
        "openagent_connected_agents",
        "Agents this master serves, by transport (WebSocket connections, registered invocation agents).",
        lambda: {(transport,): count for transport, count in agents.counts().items()},
        ["transport"],
    )
    metrics.live(
        "openagent_tool_calls_in_flight", "Tool calls waiting for their result.", lambda: dispatcher.in_flight
    )
    metrics.live(
        "openagent_tool_progress_coalesced",
        "Tool progress frames held back by OPENAGENT_MAX_PROGRESS_PER_SECOND (coalesced, not relayed at once).",
        lambda: dispatcher.progress_coalesced,
        counter=True,
    )
    metrics.live(
        "openagent_collaboration_sessions_active",
        "Collaboration sessions running.",
        lambda: collab.active_count,
    )
    metrics.live(
        "openagent_collaborations",
        "Collaboration sessions ended, by reason.",
        lambda: {(reason,): count for reason, count in collab.ended_by_reason.items()},
        ["reason"],
        counter=True,
    )


async def settle(task: asyncio.Task[Any]) -> None:
    """Wait for ``task`` to end, whatever it ends with."""
    await asyncio.gather(task, return_exceptions=True)


async def cancel_any(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` unless it ended, and wait for it, whatever it ends with."""
    if not task.done():
        task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def cancel(task: asyncio.Task[None] | None) -> None:
    """Cancel ``task`` (when there is one and it runs), and wait for it."""
    if task is not None and not task.done():
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
