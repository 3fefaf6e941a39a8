"""What a registration must pass before any agent is stored or replaced.

The tool catalog is every tool the master may offer to the model: the tools of the live
WebSocket agents and of the stored invocation agents. A registration is refused
(:class:`~master.errors.RegistrationRefused`, naming the limit or the other agent) when

- a tool's JSON (name, description, parameters, endpoint) is over
  ``OPENAGENT_MAX_TOOL_SCHEMA_BYTES``, its ``metadata`` is over
  ``OPENAGENT_MAX_AGENT_METADATA_BYTES`` (it is sent to every ``GET /agents``), the agent declares more than
  ``OPENAGENT_MAX_TOOLS_PER_AGENT`` tools, or the catalog would exceed
  ``OPENAGENT_MAX_CATALOG_TOOLS`` (code ``limit_exceeded``): one large or numerous agent
  cannot slow every query;
- one of its function names (:func:`~master.agents.toolbox.function_name`) is already another
  agent's: ``sq.a`` and ``sq_a`` both give ``sq_a__echo``, so the second is refused and
  calls can never go to an impostor (code ``agent_conflict``). First registered, first served;
- it is an invocation agent whose id is a live WebSocket agent's (code ``agent_conflict``),
  on ``POST /register`` and on the legacy WebSocket ``register`` with ``invocation_url`` alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from master.agents.directory import AgentDirectory
from master.agents.registry import LiveAgent
from master.agents.toolbox import function_name
from master.errors import RegistrationRefused
from master.settings import Settings
from master.storage.json_bytes import dump_json
from protocol import ToolSchema


@dataclass(frozen=True)
class ToolLimits:
    """Caps on what agents may register."""

    schema_bytes: int = 16 * 1024
    tools_per_agent: int = 64
    catalog_tools: int = 1024
    metadata_bytes: int = 16 * 1024

    @classmethod
    def from_settings(cls, settings: Settings) -> ToolLimits:
        return cls(
            settings.openagent_max_tool_schema_bytes,
            settings.openagent_max_tools_per_agent,
            settings.openagent_max_catalog_tools,
            settings.openagent_max_agent_metadata_bytes,
        )


class ToolCatalog:
    """Checks registrations against the limits and the names already taken."""

    def __init__(self, agents: AgentDirectory, limits: ToolLimits) -> None:
        registry = agents.registry
        self.agents = agents
        self._registry = registry
        self._invocation = agents.invocation
        self.limits = limits
        # The live WebSocket agents' function names, kept up to date by the registry's events, so
        # that a registration costs O(its tools), not O(every tool): 10,000 agents registering
        # one after the other would otherwise rebuild the whole map 10,000 times.
        self._live_names: dict[str, list[str]] = {}
        self._live_owners: dict[str, tuple[str, str]] = {}
        self._live_tools = 0
        for agent in registry.all():
            self._on_live("added", agent)
        registry.listeners.append(self._on_live)

    def _on_live(self, event: str, agent: LiveAgent) -> None:
        self._forget_live(agent.agent_id)
        if event != "added":
            return
        names: list[str] = []
        for tool_name in agent.tools:
            name = function_name(agent.agent_id, tool_name)
            names.append(name)
            self._live_owners.setdefault(name, (agent.agent_id, tool_name))
        self._live_names[agent.agent_id] = names
        self._live_tools += len(names)

    def _forget_live(self, agent_id: str) -> None:
        names = self._live_names.pop(agent_id, None)
        if names is None:
            return
        self._live_tools -= len(names)
        for name in names:
            if self._live_owners.get(name, ("",))[0] == agent_id:
                del self._live_owners[name]

    def check(
        self,
        agent_id: str,
        tools: Sequence[ToolSchema],
        *,
        invocation: bool,
        metadata: Mapping[str, Any],
    ) -> None:
        """Raise :class:`RegistrationRefused` unless ``agent_id`` may register ``tools`` and
        ``metadata`` (required: every registration states what it would store).

        An agent re-registering (a reconnect, a newer connection, an update) is compared with the
        others only: its own previous tools do not count.
        """
        limits = self.limits
        size = len(dump_json(metadata))
        if size > limits.metadata_bytes:
            raise RegistrationRefused(
                "limit_exceeded",
                f"the metadata of agent {agent_id!r} is {size} bytes of JSON; the limit is "
                f"OPENAGENT_MAX_AGENT_METADATA_BYTES={limits.metadata_bytes}",
                "metadata",
            )
        if len(tools) > limits.tools_per_agent:
            raise RegistrationRefused(
                "limit_exceeded",
                f"agent {agent_id!r} declares {len(tools)} tools; the limit is "
                f"OPENAGENT_MAX_TOOLS_PER_AGENT={limits.tools_per_agent}",
            )
        for tool in tools:
            size = len(tool.model_dump_json(exclude_none=True).encode())
            if size > limits.schema_bytes:
                raise RegistrationRefused(
                    "limit_exceeded",
                    f"tool {tool.name!r} of agent {agent_id!r} is {size} bytes of JSON; the limit is "
                    f"OPENAGENT_MAX_TOOL_SCHEMA_BYTES={limits.schema_bytes}",
                )
        if invocation and self._registry.get(agent_id) is not None:
            raise RegistrationRefused(
                "agent_conflict", f"agent {agent_id!r} is connected over WebSocket; choose another agent_id"
            )
        # Stored invocation agents are few and change through Redis: read them each time.
        owners: dict[str, tuple[str, str]] = {}
        others = self._live_tools - len(self._live_names.get(agent_id, ()))
        for other in self._invocation.all():
            if other.agent_id == agent_id:
                continue
            for tool_name in other.tools:
                others += 1
                owners[function_name(other.agent_id, tool_name)] = (other.agent_id, tool_name)
        if others + len(tools) > limits.catalog_tools:
            raise RegistrationRefused(
                "limit_exceeded",
                f"agent {agent_id!r} would bring the catalog to {others + len(tools)} tools; the limit is "
                f"OPENAGENT_MAX_CATALOG_TOOLS={limits.catalog_tools}",
            )
        for tool in tools:
            name = function_name(agent_id, tool.name)
            owner = owners.get(name)
            if owner is None:
                live_owner = self._live_owners.get(name)
                owner = live_owner if live_owner is not None and live_owner[0] != agent_id else None
            if owner is not None:
                raise RegistrationRefused(
                    "agent_conflict",
                    f"tool {tool.name!r} of agent {agent_id!r} would be offered to the model as {name!r}, "
                    f"the name of tool {owner[1]!r} of agent {owner[0]!r}; choose another agent_id",
                )
