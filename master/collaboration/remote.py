"""Agents held by other masters as session members: what the manager needs from the cluster.

:class:`~master.cluster.collaboration.ClusterCollaborations` implements it when
``OPENAGENT_CLUSTER=1``; the manager builds it through the factory passed to its constructor
(the cluster side needs the manager in turn, to act as a session's owner).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from master.agents.registry import LiveAgent
from master.collaboration.session import Refusal
from protocol import CollaborationEnd, PeerMessage

if TYPE_CHECKING:
    from master.collaboration.manager import CollaborationManager


class RemoteMembers(Protocol):
    """Agents of other live masters, taking part in sessions this master owns or relays."""

    def supports(self, agent_id: str) -> bool:
        """Whether ``agent_id`` is an agent of another live master that supports collaboration."""

    def member(self, agent_id: str) -> LiveAgent | None:
        """A stand-in for ``agent_id`` held by another live master, or ``None``."""

    def relays(self, session_id: str, agent: LiveAgent) -> bool:
        """Whether ``agent``'s connection is in a session another master owns."""

    async def forward(self, agent: LiveAgent, frame: PeerMessage | CollaborationEnd) -> Refusal | None:
        """Send our agent's frame to the session's owner."""

    async def disconnected(self, agent: LiveAgent) -> None:
        """``agent``'s connection closed: tell the owners of the sessions it was in."""


RemoteMembersFactory = Callable[["CollaborationManager"], RemoteMembers]
"""Builds the remote side for the manager being constructed."""
