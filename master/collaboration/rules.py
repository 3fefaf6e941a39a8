"""Who may collaborate: the checks before a session starts, and before a frame is relayed."""

from __future__ import annotations

from collections.abc import Callable

from master.agents.registry import LiveAgent, Registry, offered_to
from master.auth import Scope
from master.collaboration.session import CollabSession, Refusal
from master.errors import CollaborationRejected

DISABLED = "collaboration is disabled on this master (OPENAGENT_COLLABORATION=0)"


def supports_collaboration(agent: LiveAgent | None) -> bool:
    """A connected WebSocket agent that registered with ``supports_collaboration: true``."""
    return agent is not None and agent.metadata.get("supports_collaboration") is True


def check_agents(
    registry: Registry,
    agent_ids: list[str],
    task: str,
    scope: Scope,
    *,
    enabled: bool,
    remote: Callable[[str], LiveAgent | None] | None = None,
) -> list[LiveAgent]:
    """The connections of ``agent_ids``, in order; raises :class:`CollaborationRejected` naming
    the first problem. ``remote`` finds an agent held by another master (a cluster member). An
    agent not offered to ``scope`` (another tenant's) is unknown, as one that does not exist:
    whoever names it, a route's caller or the model of a query."""
    if not enabled:
        raise CollaborationRejected("collaboration_disabled", DISABLED)
    if not task.strip():
        raise CollaborationRejected("invalid_collaboration", "the collaboration task must not be empty")
    seen: set[str] = set()
    for agent_id in agent_ids:
        if agent_id in seen:
            raise CollaborationRejected("invalid_collaboration", f"agent {agent_id!r} is listed twice")
        seen.add(agent_id)
    if len(agent_ids) < 2:
        raise CollaborationRejected(
            "invalid_collaboration",
            f"a collaboration needs at least two agents, got {len(agent_ids)}: {agent_ids}",
        )
    members: list[LiveAgent] = []
    for agent_id in agent_ids:
        agent = registry.get(agent_id)
        if agent is None and remote is not None:
            agent = remote(agent_id)
        if agent is not None and not offered_to(agent.tenant, scope.tenant):
            agent = None
        if agent is None:
            where = "this master" if remote is None else "any master"
            raise CollaborationRejected(
                "unknown_agent", f"unknown agent {agent_id!r}: it is not connected to {where} over WebSocket"
            )
        if not supports_collaboration(agent):
            raise CollaborationRejected(
                "collaboration_unsupported",
                f"agent {agent_id!r} does not support collaboration"
                " (it registered without metadata supports_collaboration: true)",
            )
        members.append(agent)
    return members


def check_sender(agent: LiveAgent, session: CollabSession) -> Refusal | None:
    """Only the introduced connection of a member may speak in a session."""
    if session.members.get(agent.agent_id) is not agent:
        return Refusal(
            "not_in_session",
            f"agent {agent.agent_id!r} is not in collaboration session {session.collab_session_id!r}",
        )
    return None


def check_recipient(agent: LiveAgent, to_agent: str | None, session: CollabSession) -> Refusal | None:
    """A ``peer_message`` goes to another member of the session."""
    if not to_agent:
        return Refusal("invalid_message", f"peer_message needs 'to_agent': one of {session.peers_of(agent)}")
    if to_agent == agent.agent_id:
        return Refusal("invalid_message", f"agent {to_agent!r} cannot send a peer_message to itself")
    if to_agent not in session.members:
        return Refusal(
            "not_in_session",
            f"agent {to_agent!r} is not in collaboration session {session.collab_session_id!r}"
            f" (its agents: {', '.join(session.agent_ids)})",
        )
    return None
