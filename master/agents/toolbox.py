"""The tools offered to the model for one query, under OpenAI function names.

A function name is ``<agent_id>__<tool_name>`` with characters OpenAI does not
allow replaced by ``_``; names longer than 64 characters, or that would collide,
get a short hash suffix. :meth:`Toolbox.resolve` maps a name back.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from master.agents.dispatch import Target
from master.agents.registry import AgentTool

_INVALID = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64


@lru_cache(maxsize=4096)
def function_name(agent_id: str, tool_name: str) -> str:
    """The OpenAI function name of ``tool_name`` on ``agent_id``."""
    name = _INVALID.sub("_", f"{agent_id}__{tool_name}")
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(f"{agent_id}\0{tool_name}".encode()).hexdigest()[:8]
    return f"{name[: _MAX_NAME - 9]}_{digest}"


class Toolbox:
    """Function name → (agent, tool) for one query."""

    def __init__(self, agents: Iterable[Target]) -> None:
        self._tools: dict[str, tuple[Target, AgentTool]] = {}
        for agent in agents:
            for tool in agent.tools.values():
                name = function_name(agent.agent_id, tool.schema.name)
                if name in self._tools:
                    digest = hashlib.sha256(f"{agent.agent_id}\0{tool.schema.name}".encode()).hexdigest()[:8]
                    name = f"{name[: _MAX_NAME - 9]}_{digest}"
                self._tools[name] = (agent, tool)

    def add(self, agent: Target) -> list[dict[str, Any]]:
        """Offer ``agent``'s tools too (an agent spawned mid-run); returns their definitions."""
        before = set(self._tools)
        for tool in agent.tools.values():
            name = function_name(agent.agent_id, tool.schema.name)
            if name not in self._tools:
                self._tools[name] = (agent, tool)
        return [_definition(name, *self._tools[name]) for name in self._tools if name not in before]

    def __len__(self) -> int:
        return len(self._tools)

    def resolve(self, name: str) -> tuple[Target, AgentTool] | None:
        return self._tools.get(name)

    def named(self) -> list[tuple[str, tuple[Target, AgentTool]]]:
        """Each offered tool under its function name."""
        return list(self._tools.items())

    def entries(self) -> list[tuple[Target, AgentTool]]:
        return list(self._tools.values())

    def find(self, agent_id: str, tool_name: str) -> tuple[Target, AgentTool] | None:
        """The tool ``tool_name`` of agent ``agent_id``, if offered."""
        for agent, tool in self._tools.values():
            if agent.agent_id == agent_id and tool.schema.name == tool_name:
                return agent, tool
        return None

    def openai_tools(self) -> list[dict[str, Any]]:
        """The tool list for the chat completions API."""
        return [_definition(name, agent, tool) for name, (agent, tool) in self._tools.items()]

    def token_costs(self, count: Callable[[dict[str, Any]], int]) -> list[int]:
        """``count`` of each of :meth:`openai_tools`, in the same order (memoized per tool)."""
        return [
            tool.token_cost(_definition(name, agent, tool), count)
            for name, (agent, tool) in self._tools.items()
        ]


def _definition(name: str, agent: Target, tool: AgentTool) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"[agent {agent.agent_id}] {tool.schema.description}".strip(),
            "parameters": tool.schema.parameters,
        },
    }
