"""Collaborations between agents held by different masters.

The master that starts a session **owns** it: the :class:`~master.collaboration.CollaborationManager`
there applies every rule, limit and timeout, records the session and ends it, exactly as when all
the agents are its own. A member held by another master is a :class:`RemoteMember` there: a
stand-in whose ``send`` adds the frame to the holder's inbox. The **holder** only relays: it
delivers the owner's frames to its own connection of the agent, and sends that connection's
``peer_message`` and ``collaboration_end`` back to the owner, which acts on them as on a local
agent's (and returns a refusal, if any, for the holder to write as an ``error`` frame).

Messages (in the inbox streams of :mod:`master.cluster.router`; ``origin`` is the sender master):

- ``collab_frame`` (owner → holder) ``{origin, agent_id, frame}``: a frame for the holder's agent.
  A ``collaboration_start`` binds the session to the agent's connection at that moment;
  later frames go to that connection only (membership is per connection, as on one master).
- ``collab_peer`` (holder → owner) ``{origin, agent_id, frame}``: what the agent sent.
- ``collab_refusal`` (owner → holder) ``{session_id, agent_id, code, message}``.
- ``collab_gone`` (holder → owner) ``{session_id, agent_id, summary}``: the connection closed,
  was replaced, or could not be written to; the owner ends the session (``peer_disconnected``).

Each master handles one session's messages in arrival order (one lane per session). Every
third of the lease, a master checks the leases of the masters its sessions involve: an owner
whose holder stopped renewing ends the session with ``peer_disconnected`` (within a lease, not
after ``OPENAGENT_COLLAB_TIMEOUT``); a holder whose owner is gone tells its agents
``collaboration_end`` with ``peer_disconnected``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from master.agents.registry import LiveAgent, Registry
from master.cluster.directory import ClusterDirectory
from master.cluster.router import ClusterRouter
from master.collaboration import CollaborationManager, Refusal
from master.collaboration.manager import SEND_TIMEOUT
from master.collaboration.rules import supports_collaboration
from master.errors import AgentUnavailable
from master.storage.redis_keys import master_lease_key
from protocol import CollaborationEnd, ErrorMessage, PeerMessage, parse_message

logger = logging.getLogger("master.cluster.collaboration")

FRAME = "collab_frame"
PEER = "collab_peer"
REFUSAL = "collab_refusal"
GONE = "collab_gone"


@dataclass(eq=False)
class RemoteMember(LiveAgent):
    """A session member held by master ``master_id``: frames sent to it go to that master."""

    master_id: str = ""


@dataclass
class _Relayed:
    """A session owned by master ``owner`` with agents of this master."""

    owner: str
    agent_ids: frozenset[str]
    members: dict[str, LiveAgent] = field(default_factory=dict)
    """This master's introduced connections, by agent id."""


async def _no_close(code: int, reason: str) -> None:
    """A remote member's connection is its holder's to close."""


class ClusterCollaborations:
    """This master's side of collaborations across masters: owner of some, relay for others.

    The manager's :class:`~master.collaboration.remote.RemoteMembers`: the manager builds it
    through the factory it is given (``lambda manager: ClusterCollaborations(manager, ...)``).
    """

    def __init__(
        self,
        manager: CollaborationManager,
        registry: Registry,
        directory: ClusterDirectory,
        router: ClusterRouter,
        redis: aioredis.Redis,
        *,
        lease_seconds: float,
        send_timeout: float = SEND_TIMEOUT,
    ) -> None:
        self._manager = manager
        self._registry = registry
        self._directory = directory
        self._router = router
        self._redis = redis
        self._lease = lease_seconds
        self._send_timeout = send_timeout
        self._me = directory.master_id
        self._relayed: dict[str, _Relayed] = {}
        self._lanes: dict[str, asyncio.Task[None]] = {}
        self._watcher: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._router.handlers.update(
            {FRAME: self._on_frame, PEER: self._on_peer, REFUSAL: self._on_refusal, GONE: self._on_gone}
        )
        self._watcher = asyncio.create_task(self._watch_forever(), name="cluster-collaborations")

    async def aclose(self) -> None:
        tasks = [t for t in (self._watcher, *self._lanes.values()) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ owner side

    def supports(self, agent_id: str) -> bool:
        """Whether ``agent_id`` is an agent of another live master that supports collaboration."""
        return any(
            agent.metadata.get("supports_collaboration") is True
            for agent in self._directory.remote_agents({agent_id})
        )

    def member(self, agent_id: str) -> LiveAgent | None:
        """A stand-in for ``agent_id`` held by another live master, for one session; ``None`` if no
        live master holds it."""
        for agent in self._directory.remote_agents({agent_id}):
            return RemoteMember(
                agent.agent_id,
                "query" if agent.role == "query" else "action",
                agent.metadata,
                agent.tools,
                self._sender(agent.master_id, agent.agent_id),
                _no_close,
                agent.connected_at,
                master_id=agent.master_id,
            )
        return None

    def _sender(self, master_id: str, agent_id: str) -> Callable[[str], Awaitable[None]]:
        async def send(frame: str) -> None:
            if not self._directory.alive(master_id):
                raise ConnectionError(f"master {master_id!r} holding agent {agent_id!r} is gone")
            try:
                await self._router.post(
                    master_id, {"kind": FRAME, "origin": self._me, "agent_id": agent_id, "frame": frame}
                )
            except AgentUnavailable as exc:
                raise ConnectionError(str(exc)) from exc

        return send

    def _on_peer(self, message: dict[str, Any]) -> None:
        frame = parse_message(str(message["frame"]))
        if not isinstance(frame, PeerMessage | CollaborationEnd):
            raise ValueError(f"{frame.type!r} is not a collaboration frame")
        origin, agent_id = str(message["origin"]), str(message["agent_id"])
        self._in_lane(frame.session_id, lambda: self._act_on(origin, agent_id, frame))

    async def _act_on(self, origin: str, agent_id: str, frame: PeerMessage | CollaborationEnd) -> None:
        """A holder's agent spoke: act on it as on a local agent's frame."""
        session = self._manager.session(frame.session_id)
        member = None if session is None else session.members.get(agent_id)
        if not (isinstance(member, RemoteMember) and member.master_id == origin):
            # not the introduced member (or the session is over): the manager refuses, or ignores a late end
            member = RemoteMember(agent_id, "action", {}, {}, self._sender(origin, agent_id), _no_close)
        if isinstance(frame, PeerMessage):
            refusal = await self._manager.on_peer_message(member, frame)
        else:
            refusal = await self._manager.on_end(member, frame)
        if refusal is not None:
            await self._post_quietly(
                origin,
                {
                    "kind": REFUSAL,
                    "session_id": frame.session_id,
                    "agent_id": agent_id,
                    "code": refusal.code,
                    "message": refusal.message,
                },
            )

    def _on_gone(self, message: dict[str, Any]) -> None:
        session_id = str(message["session_id"])
        origin, agent_id = str(message["origin"]), str(message["agent_id"])
        summary = str(message.get("summary") or "")
        self._in_lane(session_id, lambda: self._member_gone(session_id, origin, agent_id, summary))

    async def _member_gone(self, session_id: str, origin: str, agent_id: str, summary: str) -> None:
        session = self._manager.session(session_id)
        member = None if session is None else session.members.get(agent_id)
        if session is not None and isinstance(member, RemoteMember) and member.master_id == origin:
            await self._manager.member_gone(session, member, summary)

    # ------------------------------------------------------------------ holder side

    def relays(self, session_id: str, agent: LiveAgent) -> bool:
        """Whether ``agent``'s connection is in a session another master owns."""
        relayed = self._relayed.get(session_id)
        return relayed is not None and relayed.members.get(agent.agent_id) is agent

    async def forward(self, agent: LiveAgent, frame: PeerMessage | CollaborationEnd) -> Refusal | None:
        """Send our agent's frame to the session's owner (its refusal, if any, comes back later)."""
        relayed = self._relayed[frame.session_id]
        message = {
            "kind": PEER,
            "origin": self._me,
            "agent_id": agent.agent_id,
            "frame": frame.model_dump_json(exclude_none=True),
        }
        try:
            await self._router.post(relayed.owner, message)
        except AgentUnavailable as exc:
            summary = f"master {relayed.owner!r} running the collaboration cannot be reached: {exc}"
            await self._end_here(frame.session_id, agent, summary)
            return None
        if isinstance(frame, CollaborationEnd):
            self._unbind(frame.session_id, agent.agent_id, frame.reason or "completed")
        return None

    async def disconnected(self, agent: LiveAgent) -> None:
        """``agent``'s connection closed: tell the owners of the sessions it was in."""
        for session_id, relayed in list(self._relayed.items()):
            if relayed.members.get(agent.agent_id) is agent:
                self._unbind(session_id, agent.agent_id, "peer_disconnected")
                summary = f"agent {agent.agent_id!r} disconnected from master {self._me!r}"
                await self._post_quietly(relayed.owner, self._gone(session_id, agent.agent_id, summary))

    def _on_frame(self, message: dict[str, Any]) -> None:
        raw = str(message["frame"])
        frame = json.loads(raw)
        owner, agent_id = str(message["origin"]), str(message["agent_id"])
        self._in_lane(str(frame["session_id"]), lambda: self._relay(owner, agent_id, raw, frame))

    async def _relay(self, owner: str, agent_id: str, raw: str, frame: dict[str, Any]) -> None:
        """Deliver an owner's frame to our connection of ``agent_id``."""
        session_id, kind = str(frame["session_id"]), frame.get("type")
        relayed = self._relayed.get(session_id)
        if kind == "collaboration_start":
            agent = self._registry.get(agent_id)
            refused = None
            if not self._manager.enabled:
                refused = f"collaboration is disabled on master {self._me!r} holding agent {agent_id!r}"
            elif agent is None or not supports_collaboration(agent):
                refused = f"agent {agent_id!r} is no longer connected to master {self._me!r}"
            if refused is not None or agent is None:
                await self._post_quietly(owner, self._gone(session_id, agent_id, refused or ""))
                return
            if relayed is None:
                peers = {str(peer.get("agent_id")) for peer in frame.get("peers") or ()}
                relayed = self._relayed[session_id] = _Relayed(owner, frozenset({agent_id, *peers}))
            relayed.members[agent_id] = agent
        target = None if relayed is None or relayed.owner != owner else relayed.members.get(agent_id)
        if target is None:
            if kind != "collaboration_end":
                summary = f"agent {agent_id!r} is not in the session on master {self._me!r}"
                await self._post_quietly(owner, self._gone(session_id, agent_id, summary))
            return
        try:
            async with asyncio.timeout(self._send_timeout):
                await target.send(raw)
        except (ConnectionError, TimeoutError):
            logger.warning("could not relay %s to agent %s", kind, agent_id)
            self._unbind(session_id, agent_id, "peer_disconnected")
            summary = f"agent {agent_id!r} could not be reached on master {self._me!r}"
            await self._post_quietly(owner, self._gone(session_id, agent_id, summary))
            return
        if kind == "collaboration_end":
            self._unbind(session_id, agent_id, str(frame.get("reason") or "completed"))

    def _on_refusal(self, message: dict[str, Any]) -> None:
        session_id = str(message["session_id"])
        self._in_lane(session_id, lambda: self._refused(session_id, message))

    async def _refused(self, session_id: str, message: dict[str, Any]) -> None:
        agent_id = str(message["agent_id"])
        relayed = self._relayed.get(session_id)
        agent = (relayed.members.get(agent_id) if relayed else None) or self._registry.get(agent_id)
        if agent is None:
            return
        error = ErrorMessage(code=str(message["code"]), message=str(message["message"]), ref=session_id)
        try:
            await agent.send(error.model_dump_json())
        except ConnectionError:
            pass

    async def _end_here(self, session_id: str, agent: LiveAgent, summary: str) -> None:
        """The owner cannot be reached: end the session for our agent, as the owner would have."""
        self._unbind(session_id, agent.agent_id, "peer_disconnected")
        notice = CollaborationEnd(session_id=session_id, summary=summary, reason="peer_disconnected")
        try:
            async with asyncio.timeout(self._send_timeout):
                await agent.send(notice.model_dump_json())
        except (ConnectionError, TimeoutError):
            pass

    def _unbind(self, session_id: str, agent_id: str, reason: str) -> None:
        relayed = self._relayed.get(session_id)
        if relayed is None:
            return
        relayed.members.pop(agent_id, None)
        if not relayed.members:
            del self._relayed[session_id]
        self._manager.remember_ended(session_id, reason, relayed.agent_ids)

    # ------------------------------------------------------------------ leases

    async def _watch_forever(self) -> None:
        while True:
            await asyncio.sleep(self._lease / 3)
            try:
                await self._check_leases()
            except RedisError as exc:
                logger.warning("could not check the leases of collaborating masters: %s", exc)

    async def _check_leases(self) -> None:
        """End what depends on a master whose lease expired."""
        sessions = self._manager.sessions()
        holders = {
            member.master_id
            for session in sessions
            for member in session.members.values()
            if isinstance(member, RemoteMember)
        }
        owners = {relayed.owner for relayed in self._relayed.values()}
        masters = sorted(holders | owners)
        if not masters:
            return
        async with self._redis.pipeline(transaction=False) as pipe:
            for master_id in masters:
                pipe.exists(master_lease_key(master_id))
            found = await pipe.execute()
        dead = {master_id for master_id, exists in zip(masters, found, strict=True) if not exists}
        for session in sessions:
            for member in list(session.members.values()):
                if isinstance(member, RemoteMember) and member.master_id in dead:
                    summary = (
                        f"master {member.master_id!r} holding agent {member.agent_id!r} stopped answering"
                        f" (its lease expired) after {session.message_count} messages"
                    )
                    await self._manager.member_gone(session, member, summary)
        for session_id, relayed in list(self._relayed.items()):
            if relayed.owner in dead:
                summary = f"master {relayed.owner!r} running the collaboration stopped answering (its lease expired)"
                for agent in list(relayed.members.values()):
                    await self._end_here(session_id, agent, summary)

    # ------------------------------------------------------------------ helpers

    def _gone(self, session_id: str, agent_id: str, summary: str) -> dict[str, Any]:
        return {
            "kind": GONE,
            "origin": self._me,
            "session_id": session_id,
            "agent_id": agent_id,
            "summary": summary,
        }

    def _in_lane(self, session_id: str, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work()`` after the session's earlier messages (one lane per session, in arrival order)."""
        previous = self._lanes.get(session_id)

        async def run() -> None:
            if previous is not None:
                await asyncio.wait([previous])
            try:
                await work()
            except Exception:
                logger.exception("handling a collaboration message of session %s failed", session_id)

        task = asyncio.create_task(run(), name=f"collab-lane-{session_id}")
        self._lanes[session_id] = task

        def done(finished: asyncio.Task[None]) -> None:
            if self._lanes.get(session_id) is finished:
                del self._lanes[session_id]

        task.add_done_callback(done)

    async def _post_quietly(self, master_id: str, message: dict[str, Any]) -> None:
        try:
            await self._router.post(master_id, message)
        except AgentUnavailable as exc:
            logger.warning(
                "could not send %s of session %s: %s", message["kind"], message.get("session_id"), exc
            )
