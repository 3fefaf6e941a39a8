"""The state of one collaboration session, its document and its outcome.

The document (``collab:{id}`` in Redis) is the session's metadata followed by its
``entries``, in order:

- ``handshake``: one per agent, written before the introductions are sent
  (``agent_id``, ``role``, ``peers``);
- ``message``: one per relayed ``peer_message``, written before it is relayed
  (``seq``, ``from_agent``, ``to_agent``, ``content``);
- ``end``: exactly one, last (``from_agent``: the peer that ended it or ``null`` for the
  master, ``reason``, ``summary``, ``message_count``).

Every entry has ``type`` and ``ts`` (Unix seconds).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, NamedTuple

from master.agents.registry import LiveAgent
from protocol import CollaborationPeer, CollaborationStart

EndReason = str
"""``completed`` (a peer sent ``collaboration_end``), ``timeout``, ``max_messages``,
``peer_disconnected``, ``cancelled``, ``internal_error``, ``shutdown``, or the ``reason`` a peer gave when it
ended the session itself (the SDK sends ``handler_error`` when a handler raised)."""


class Refusal(NamedTuple):
    """Why a frame from an agent was not acted on: sent back as an ``error`` frame."""

    code: str
    message: str


@dataclass(frozen=True)
class CollaborationOutcome:
    """How a collaboration ended, for the orchestrator to turn into an answer."""

    collab_session_id: str
    parent_session_id: str
    agents: list[str]
    """The agents, initiator first."""
    task: str
    summary: str
    """The ending peer's summary, or the master's explanation when it ended the session."""
    message_count: int
    """``peer_message`` frames relayed."""
    reason: EndReason
    ended_by: str | None
    """The agent that sent ``collaboration_end``; ``None`` when the master ended it."""
    transcript: list[dict[str, Any]]
    """Every entry of the document: handshakes, messages, end."""

    @property
    def completed(self) -> bool:
        """Whether a peer ended the session normally."""
        return self.reason == "completed"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "completed": self.completed}

    def session_turn(self, query_id: str | None = None) -> dict[str, Any]:
        """The ``collaboration`` turn appended to the parent orchestrator session."""
        turn: dict[str, Any] = {
            "decision": "collaboration",
            "collab_session_id": self.collab_session_id,
            "agents": self.agents,
            "task": self.task,
            "summary": self.summary,
            "message_count": self.message_count,
            "reason": self.reason,
            "ts": time.time(),
        }
        if query_id is not None:
            turn["query_id"] = query_id
        return turn


@dataclass(eq=False)
class CollabSession:
    """A running session (mutated only under :attr:`lock` once introduced)."""

    collab_session_id: str
    parent_session_id: str
    task: str
    context: dict[str, Any]
    members: dict[str, LiveAgent]
    """Introduced connections by ``agent_id``, initiator first."""
    limits: dict[str, Any]
    entries: list[dict[str, Any]] = field(default_factory=list)
    message_count: int = 0
    finished: bool = False
    reason: EndReason | None = None
    summary: str = ""
    ended_by: str | None = None
    created_at: float = field(default_factory=time.time)
    ended_at: float | None = None
    tenant: str | None = None
    """The tenant of the query that started it (``None``: ``default``), kept in its document."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    done: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    @classmethod
    def new(
        cls,
        collab_session_id: str,
        parent_session_id: str,
        task: str,
        context: dict[str, Any],
        members: list[LiveAgent],
        limits: dict[str, Any],
    ) -> CollabSession:
        session = cls(
            collab_session_id,
            parent_session_id,
            task,
            context,
            {agent.agent_id: agent for agent in members},
            dict(limits),
        )
        for agent in members:
            session.entries.append(
                {
                    "type": "handshake",
                    "agent_id": agent.agent_id,
                    "role": session.role_of(agent.agent_id),
                    "peers": session.peers_of(agent),
                    "ts": session.created_at,
                }
            )
        return session

    @property
    def agent_ids(self) -> list[str]:
        return list(self.members)

    def role_of(self, agent_id: str) -> Literal["initiator", "responder"]:
        return "initiator" if agent_id == self.agent_ids[0] else "responder"

    def peers_of(self, agent: LiveAgent) -> list[str]:
        return [agent_id for agent_id in self.members if agent_id != agent.agent_id]

    def start_frame(self, agent: LiveAgent) -> CollaborationStart:
        """The introduction of ``agent``: the task, its role and every other member."""
        peers = [
            CollaborationPeer(
                agent_id=peer.agent_id,
                metadata=peer.metadata,
                tools=[tool.schema for tool in peer.tools.values()],
            )
            for peer in self.members.values()
            if peer is not agent
        ]
        return CollaborationStart(
            session_id=self.collab_session_id,
            task=self.task,
            peers=peers,
            role=self.role_of(agent.agent_id),
            context=self.context,
        )

    def message_entry(self, from_agent: str, to_agent: str, content: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "message",
            "seq": self.message_count,
            "from_agent": from_agent,
            "to_agent": to_agent,
            "content": content,
            "ts": time.time(),
        }

    def end(self, reason: EndReason, summary: str, ended_by: str | None) -> None:
        self.finished = True
        self.reason, self.summary, self.ended_by = reason, summary, ended_by
        self.ended_at = time.time()
        self.entries.append(
            {
                "type": "end",
                "from_agent": ended_by,
                "reason": reason,
                "summary": summary,
                "message_count": self.message_count,
                "ts": self.ended_at,
            }
        )

    def document(self) -> dict[str, Any]:
        """The ``collab:{id}`` document (``entries`` last)."""
        return {
            **({"tenant": self.tenant} if self.tenant is not None else {}),
            "collab_session_id": self.collab_session_id,
            "parent_session_id": self.parent_session_id,
            "task": self.task,
            "context": self.context,
            "agents": self.agent_ids,
            "initiator": self.agent_ids[0],
            "status": "ended" if self.finished else "active",
            "reason": self.reason,
            "summary": self.summary,
            "ended_by": self.ended_by,
            "message_count": self.message_count,
            "limits": self.limits,
            "created_at": self.created_at,
            "ended_at": self.ended_at,
            "entries": list(self.entries),
        }

    def outcome(self) -> CollaborationOutcome:
        return CollaborationOutcome(
            collab_session_id=self.collab_session_id,
            parent_session_id=self.parent_session_id,
            agents=self.agent_ids,
            task=self.task,
            summary=self.summary,
            message_count=self.message_count,
            reason=self.reason or "active",
            ended_by=self.ended_by,
            transcript=list(self.entries),
        )
