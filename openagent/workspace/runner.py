"""Running a workspace's WebSocket agents from their ``handler`` modules.

:class:`YamlAgentRunner` starts a workspace's WebSocket action agents inside the current
event loop, from handler modules under ``agents/``, ``system_agents/`` and
``sample_agents/`` only, connected to a master over loopback. :func:`build_agent` turns one
handler module into an agent.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from openagent.action import OrchestratorActionAgent, OrchestratorWebSocketActionAgent
from openagent.agent_modules import ModuleRef, load_module, parse_handler
from openagent.config import ClientConfig
from openagent.errors import AgentModuleError, OpenAgentError
from openagent.workspace.schema import AgentSpec, Workspace

__all__ = ["AgentOutcome", "OutcomeStatus", "YamlAgentRunner", "build_agent", "skip_reason"]

logger = logging.getLogger("openagent.workspace")

OutcomeStatus = Literal["started", "already_running", "failed", "skipped", "stopped", "not_running"]


@dataclass(frozen=True, slots=True)
class AgentOutcome:
    """What happened to one agent of a start or stop request."""

    agent_id: str
    status: OutcomeStatus
    reason: str = ""
    handler: str | None = None

    def as_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {"agent_id": self.agent_id, "status": self.status}
        if self.reason:
            row["reason"] = self.reason
        if self.handler:
            row["handler"] = self.handler
        return row


def skip_reason(spec: AgentSpec) -> str | None:
    """Why a runner does not run this agent at all (``None``: it runs it)."""
    if spec.role != "action":
        return "query agents are not run by the YAML runner"
    if spec.transport != "websocket":
        return f"{spec.transport} agents serve themselves; restore registers them"
    if spec.handler is None:
        return "no handler module to run"
    return None


_FACTORIES = ("build_agent", "make_agent", "create_agent")


def build_agent(
    spec: AgentSpec, ref: ModuleRef, module: Any, config: ClientConfig
) -> OrchestratorWebSocketActionAgent:
    """The agent a handler module defines, connected with ``config``.

    - ``module:function``: ``function`` is the tool handler; the tools are the workspace's,
      else the module's ``TOOLS``.
    - ``module`` with ``handle_tool``: the same, with ``handle_collaboration`` as the
      collaboration handler when the module defines one.
    - ``module`` with ``build_agent()`` / ``make_agent()`` / ``create_agent()``: the agent
      it returns (its id must be the workspace's).

    Raises:
        AgentModuleError: ``import_failed`` naming what is missing or wrong.
    """
    name = ref.function or ("handle_tool" if hasattr(module, "handle_tool") else None)
    if name is None:
        return _from_factory(spec, ref, module, config)
    handler = getattr(module, name, None)
    if not callable(handler):
        raise AgentModuleError("import_failed", f"{ref.module!r} has no function {name!r}")
    tools: Any = [tool.model_dump(exclude_none=True) for tool in spec.tools] or getattr(module, "TOOLS", None)
    if not tools:
        raise AgentModuleError(
            "import_failed",
            f"agent {spec.agent_id!r}: no tools in the workspace and no TOOLS in {ref.module!r}",
        )
    collaboration = getattr(module, "handle_collaboration", None) if ref.function is None else None
    try:
        return OrchestratorActionAgent(
            spec.agent_id,
            tools,
            handler,
            collaboration_handler=collaboration if callable(collaboration) else None,
            metadata=spec.metadata,
            config=config,
        )
    except OpenAgentError as exc:
        raise AgentModuleError("import_failed", f"agent {spec.agent_id!r}: {exc}") from exc


def _from_factory(
    spec: AgentSpec, ref: ModuleRef, module: Any, config: ClientConfig
) -> OrchestratorWebSocketActionAgent:
    factory = next(
        (getattr(module, name) for name in _FACTORIES if callable(getattr(module, name, None))), None
    )
    if factory is None:
        raise AgentModuleError(
            "import_failed",
            f"{ref.module!r} defines no handle_tool() and no {'/'.join(_FACTORIES)}(); "
            "name a function with 'module:function'",
        )
    try:
        accepts_config = "config" in inspect.signature(factory).parameters
        agent = factory(config=config) if accepts_config else factory()
    except Exception as exc:
        raise AgentModuleError(
            "import_failed", f"{ref.module!r}.{factory.__name__}() raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(agent, OrchestratorWebSocketActionAgent):
        raise AgentModuleError(
            "import_failed",
            f"{ref.module!r}.{factory.__name__}() returned {type(agent).__name__}, not a WebSocket action agent",
        )
    if agent.agent_id != spec.agent_id:
        raise AgentModuleError(
            "import_failed",
            f"{ref.module!r} builds agent {agent.agent_id!r} but the workspace names {spec.agent_id!r}",
        )
    agent.config = config
    return agent


@dataclass
class _Running:
    agent: OrchestratorWebSocketActionAgent
    handler: str


async def start_each(
    workspace: Workspace, start_one: Callable[[AgentSpec], Awaitable[AgentOutcome]]
) -> list[AgentOutcome]:
    """Start every agent of ``workspace`` but the built-in query client, side by side; the
    outcomes sorted by agent id (both runners: this module's and :mod:`.processes`)."""
    outcomes = await asyncio.gather(*(start_one(spec) for spec in workspace.agents if not spec.builtin))
    return sorted(outcomes, key=lambda outcome: outcome.agent_id)


def not_to_start(
    spec: AgentSpec, running_handler: str | None, is_connected: Callable[[str], bool]
) -> AgentOutcome | None:
    """The outcome of an agent that is not to be started (no handler to run, already run by this
    runner with ``running_handler``, or connected to the master by another process), or ``None``."""
    skipped = skip_reason(spec)
    if skipped is not None:
        return AgentOutcome(spec.agent_id, "skipped", skipped)
    if running_handler is not None:
        return AgentOutcome(spec.agent_id, "already_running", handler=running_handler)
    if is_connected(spec.agent_id):
        return AgentOutcome(
            spec.agent_id, "skipped", "already connected to the master by another process", spec.handler
        )
    return None


class YamlAgentRunner:
    """Runs a workspace's WebSocket agents in this event loop, connected to one master.

    Args:
        config: How the agents reach the master (e.g. ``ws://127.0.0.1:<port>/ws``).
        root: The directory holding ``agents/``, ``system_agents/`` and ``sample_agents/``.
        is_connected: Tells whether an agent id is already connected to the master by
            someone else; such agents are skipped rather than replaced.

    Starting is idempotent: an agent this runner already runs is reported
    ``already_running`` and left alone. Each agent succeeds or fails on its own: a
    handler module that cannot be imported fails that agent only, naming the reason.
    A handler that raises fails its tool call, never the runner.
    """

    def __init__(
        self,
        config: ClientConfig,
        *,
        root: Path,
        is_connected: Callable[[str], bool] | None = None,
    ) -> None:
        self.config = config
        self.root = root
        self._is_connected = is_connected or (lambda _agent_id: False)
        self._running: dict[str, _Running] = {}
        self._lock = asyncio.Lock()

    def running(self) -> dict[str, str]:
        """Agent id → handler of every agent this runner runs."""
        return {agent_id: running.handler for agent_id, running in sorted(self._running.items())}

    async def start(self, workspace: Workspace) -> list[AgentOutcome]:
        """Start every WebSocket action agent of the workspace that has a handler."""
        async with self._lock:
            return await start_each(workspace, self._start_one)

    async def _start_one(self, spec: AgentSpec) -> AgentOutcome:
        agent_id = spec.agent_id
        known = self._running.get(agent_id)
        refused = not_to_start(spec, known.handler if known else None, self._is_connected)
        if refused is not None:
            return refused
        assert spec.handler is not None  # not_to_start skips an agent without one
        try:
            ref = parse_handler(spec.handler)
            module = await asyncio.to_thread(load_module, self.root, ref)
            agent = build_agent(spec, ref, module, self.config)
            await agent.start()
        except AgentModuleError as exc:
            logger.warning("YAML agent %s not started: %s", agent_id, exc)
            return AgentOutcome(agent_id, "failed", str(exc), spec.handler)
        except OpenAgentError as exc:
            logger.warning("YAML agent %s could not connect: %s", agent_id, exc)
            return AgentOutcome(agent_id, "failed", f"{type(exc).__name__}: {exc}", spec.handler)
        self._running[agent_id] = _Running(agent, spec.handler)
        logger.info("YAML agent %s started from %s", agent_id, spec.handler)
        return AgentOutcome(agent_id, "started", handler=spec.handler)

    async def stop(self, agent_ids: Iterable[str] | None = None) -> list[AgentOutcome]:
        """Stop the given agents (every running one when ``None``)."""
        async with self._lock:
            wanted = sorted(self._running) if agent_ids is None else sorted(set(agent_ids))
            outcomes = []
            for agent_id in wanted:
                running = self._running.pop(agent_id, None)
                if running is None:
                    outcomes.append(AgentOutcome(agent_id, "not_running"))
                    continue
                await running.agent.stop()
                outcomes.append(AgentOutcome(agent_id, "stopped", handler=running.handler))
        return outcomes

    async def aclose(self) -> None:
        """Stop everything (the master's shutdown)."""
        await self.stop()
