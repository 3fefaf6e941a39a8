"""An agent connected to another master: offered to the model like a local one, called through that master."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from master.agents.registry import AgentTool


@dataclass(eq=False)
class RemoteAgent:
    """A WebSocket agent held by master ``master_id`` (read from the shared agent table)."""

    agent_id: str
    master_id: str
    role: str
    metadata: dict[str, Any]
    tools: dict[str, AgentTool]
    connected_at: float = 0.0
    row: dict[str, Any] = field(default_factory=dict, repr=False)
    tenant: str | None = None
    """The tenant whose queries it serves; ``None``: every tenant's."""

    def describe(self) -> dict[str, Any]:
        """The agent's row in ``GET /agents`` (with the master holding it)."""
        return {
            "agent_id": self.agent_id,
            "role": self.role,
            "connection_type": "websocket",
            "status": "online",
            "connected_at": self.connected_at,
            "metadata": self.metadata,
            "tools": self.row.get("tools", []),
            "master_id": self.master_id,
            **({"tenant": self.tenant} if self.tenant is not None else {}),
        }
