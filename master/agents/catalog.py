"""What a registration must pass before any agent is stored or replaced.

The tool catalog is every tool the master may offer to the model: the tools of the live
WebSocket agents and of the stored invocation agents. A registration is refused
(:class:`~master.errors.RegistrationRefused`, naming the limit or the other agent) when

- a tool's JSON (name, description, parameters, endpoint) is over
  ``OPENAGENT_MAX_TOOL_SCHEMA_BYTES``, the agent declares more than
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

from collections.abc import Sequence
from dataclasses import dataclass

from master.agents.invocation import InvocationAgents
from master.agents.registry import Registry
from master.agents.toolbox import function_name
from master.errors import RegistrationRefused
from master.settings import Settings
from protocol import ToolSchema


@dataclass(frozen=True)
class ToolLimits:
    """Caps on what agents may register."""

    schema_bytes: int = 16 * 1024
    tools_per_agent: int = 64
    catalog_tools: int = 1024

    @classmethod
    def from_settings(cls, settings: Settings) -> ToolLimits:
        return cls(
            settings.openagent_max_tool_schema_bytes,
            settings.openagent_max_tools_per_agent,
            settings.openagent_max_catalog_tools,
        )


class ToolCatalog:
    """Checks registrations against the limits and the names already taken."""

    def __init__(self, registry: Registry, invocation: InvocationAgents, limits: ToolLimits) -> None:
        self._registry = registry
        self._invocation = invocation
        self.limits = limits

    def check(self, agent_id: str, tools: Sequence[ToolSchema], *, invocation: bool) -> None:
        """Raise :class:`RegistrationRefused` unless ``agent_id`` may register ``tools``.

        An agent re-registering (a reconnect, a newer connection, an update) is compared with the
        others only: its own previous tools do not count.
        """
        limits = self.limits
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
        owners: dict[str, tuple[str, str]] = {}
        others = 0
        registered = [(a.agent_id, list(a.tools)) for a in self._registry.all()]
        registered += [(a.agent_id, list(a.tools)) for a in self._invocation.all()]
        for other_id, tool_names in registered:
            if other_id == agent_id:
                continue
            for tool_name in tool_names:
                others += 1
                owners[function_name(other_id, tool_name)] = (other_id, tool_name)
        if others + len(tools) > limits.catalog_tools:
            raise RegistrationRefused(
                "limit_exceeded",
                f"agent {agent_id!r} would bring the catalog to {others + len(tools)} tools; the limit is "
                f"OPENAGENT_MAX_CATALOG_TOOLS={limits.catalog_tools}",
            )
        for tool in tools:
            name = function_name(agent_id, tool.name)
            owner = owners.get(name)
            if owner is not None:
                raise RegistrationRefused(
                    "agent_conflict",
                    f"tool {tool.name!r} of agent {agent_id!r} would be offered to the model as {name!r}, "
                    f"the name of tool {owner[1]!r} of agent {owner[0]!r}; choose another agent_id",
                )
