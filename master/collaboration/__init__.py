"""Inter-agent collaboration: peer-to-peer sessions relayed and recorded by the master.

- :mod:`~master.collaboration.manager`: :class:`CollaborationManager`, the orchestrator's
  entry point (``eligible``, ``run``) and the hub's (``on_peer_message``, ``on_end``,
  ``agent_disconnected``);
- :mod:`~master.collaboration.session`: one session's state, its Redis document and
  :class:`CollaborationOutcome`;
- :mod:`~master.collaboration.rules`: who may start, speak in and receive from a session;
- :mod:`~master.collaboration.store`: ``collab:{id}`` and ``collab:by_parent:{id}`` in Redis;
- :mod:`~master.collaboration.remote`: :class:`RemoteMembers`, what the manager needs of the
  agents of other masters (implemented by :mod:`master.cluster.collaboration`).
"""

from master.collaboration.manager import CollaborationManager
from master.collaboration.session import CollaborationOutcome, Refusal
from master.collaboration.store import CollabStore

__all__ = ["CollaborationManager", "CollaborationOutcome", "CollabStore", "Refusal"]
