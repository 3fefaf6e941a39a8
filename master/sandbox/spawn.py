"""Auto mode's spawn: deploy a saved agent that is not running, and wait for it to register.

A *saved* agent is a WebSocket agent module under ``agents/`` of the agents root
(``OPENAGENT_AGENTS_ROOT``), as the agent builder's discovery lists it (read, never imported).
:class:`Spawner` deploys one through the sandbox (placement ``new_pod``) and waits up to
``ORCHESTRATOR_AUTO_SPAWN_WAIT_SECONDS`` for it to connect over WebSocket.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from master.agents.registry import LiveAgent, Registry
from master.builder.discovery import AgentDiscovery
from master.errors import SandboxError, SpawnFailed
from master.sandbox.service import Sandbox

logger = logging.getLogger("master.sandbox")

SAVED_FOLDER = "agents"


def saved_websocket_agents(discovery: AgentDiscovery) -> dict[str, str]:
    """``agent_id`` → module of the WebSocket agents saved under ``agents/``."""
    return {
        agent.agent_id: agent.module
        for agent in discovery.discover().agents
        if agent.module.startswith(f"{SAVED_FOLDER}.") and agent.transport == "websocket"
    }


class Spawner:
    """Deploys saved agents on demand for auto mode."""

    def __init__(
        self,
        sandbox: Sandbox,
        registry: Registry,
        saved: Callable[[], Mapping[str, str]],
        *,
        wait_seconds: float,
    ) -> None:
        self._sandbox = sandbox
        self._registry = registry
        self._saved = saved
        self.wait_seconds = wait_seconds

    def candidates(self, allowed: list[str] | None) -> list[str]:
        """Saved agents that are not connected (and are allowed for this query)."""
        wanted = None if allowed is None else set(allowed)
        return sorted(
            agent_id
            for agent_id in self._saved()
            if self._registry.get(agent_id) is None and (wanted is None or agent_id in wanted)
        )

    async def spawn(self, agent_id: str, *, tenant: str) -> LiveAgent:
        """Deploy ``agent_id`` for ``tenant`` (whose query asked; the agent's key is that tenant's)
        and return it once connected; raises :class:`SpawnFailed`."""
        module = self._saved().get(agent_id)
        if module is None:
            raise SpawnFailed(f"no saved agent {agent_id!r} under {SAVED_FOLDER}/")
        live = self._registry.get(agent_id)
        if live is not None:
            return live
        try:
            deployed = await self._sandbox.start(agent_id, tenant=tenant, placement="new_pod", module=module)
        except SandboxError as exc:
            raise SpawnFailed(f"could not deploy {agent_id!r}: {exc}") from exc
        logger.info(
            "auto mode: spawned %s in Pod %s, waiting for it to register", agent_id, deployed["pod_name"]
        )
        try:
            async with asyncio.timeout(self.wait_seconds):
                live = await self._registry.wait_for(agent_id)
        except TimeoutError:
            raise SpawnFailed(
                f"agent {agent_id!r} was deployed (Pod {deployed['pod_name']}) but did not register within "
                f"{self.wait_seconds:g} s (ORCHESTRATOR_AUTO_SPAWN_WAIT_SECONDS); see "
                f"GET /internal/sandbox-agent/logs?agent_id={agent_id}"
            ) from None
        return live
