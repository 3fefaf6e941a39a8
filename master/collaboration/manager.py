"""The collaboration manager: starts sessions, relays and records their frames, ends them.

:meth:`CollaborationManager.run` is what the orchestrator (and ``POST
/internal/collaborations``) calls: it checks the agents, stores ``collab:{id}``,
introduces the agents to each other with ``collaboration_start`` (responders
first, the initiator last, so that nobody hears from a peer before its own
introduction), waits until the session ends and appends a ``collaboration`` turn
to the parent orchestrator session.

A session ends when

- a peer sends ``collaboration_end`` (reason ``completed``, or the ``reason`` the
  peer gave): the master relays it to the others;
- ``OPENAGENT_COLLAB_TIMEOUT`` seconds pass (``timeout``);
- a peer sends a ``peer_message`` beyond ``OPENAGENT_COLLAB_MAX_MESSAGES``: it is not
  relayed (``max_messages``);
- a peer disconnects, or cannot be written to (``peer_disconnected``);
- the run is cancelled or fails, or the master shuts down (``cancelled``, ``internal_error``,
  ``shutdown``).

When the master ends it, every peer gets ``collaboration_end`` with that ``reason``.
Membership is per connection: relays go to the connection that was introduced, and
when that connection goes away (or is replaced) the session ends. Each session's
frames are handled under its own lock, so the Redis entries are in relay order.

With several masters (``OPENAGENT_CLUSTER=1``), :attr:`CollaborationManager.cluster` (the
:class:`~master.collaboration.remote.RemoteMembers` built by the factory the manager is given) lets a
session include agents held by other masters: the master that starts a session owns it (rules,
limits, timeout, records), its remote members are proxies whose frames travel through the
holders' inboxes, and a holder only relays frames between the owner and its own connection
(:mod:`master.cluster.collaboration`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter, OrderedDict
from collections.abc import Iterable
from typing import Any, NamedTuple

from pydantic import BaseModel

from master.agents.registry import LiveAgent, Registry
from master.auth import DEFAULT_TENANT, Scope
from master.collaboration.remote import RemoteMembers, RemoteMembersFactory
from master.collaboration.rules import (
    DISABLED,
    check_agents,
    check_recipient,
    check_sender,
    supports_collaboration,
)
from master.collaboration.session import CollaborationOutcome, CollabSession, Refusal
from master.collaboration.store import CollabStore
from master.conversation.store import SessionStore
from master.errors import SessionStoreUnavailable
from master.settings import Settings
from protocol import CollaborationEnd, PeerMessage

logger = logging.getLogger("master.collaboration")

SEND_TIMEOUT = 10.0
"""Seconds to write one frame to a peer; a peer that cannot take it counts as disconnected."""
_ENDED_MEMORY = 10_000
"""How many ended sessions are remembered, to say "already ended" rather than "unknown"."""


class _Ended(NamedTuple):
    reason: str
    agent_ids: frozenset[str]


class CollaborationManager:
    """Runs collaboration sessions between connected WebSocket agents."""

    def __init__(
        self,
        registry: Registry,
        store: CollabStore,
        sessions: SessionStore,
        *,
        enabled: bool,
        timeout: float,
        max_messages: int,
        send_timeout: float = SEND_TIMEOUT,
        remote: RemoteMembersFactory | None = None,
    ) -> None:
        self._registry = registry
        self._store = store
        self._sessions = sessions
        self.enabled = enabled
        self.timeout = timeout
        self.max_messages = max_messages
        self._send_timeout = send_timeout
        self._active: dict[str, CollabSession] = {}
        self._ended: OrderedDict[str, _Ended] = OrderedDict()
        self.ended_by_reason: Counter[str] = Counter()
        """Collaborations ended since start, by reason (``GET /metrics``)."""
        self.cluster: RemoteMembers | None = None if remote is None else remote(self)
        """When this master is one of several: the agents of other masters that may take part."""

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        registry: Registry,
        store: CollabStore,
        sessions: SessionStore,
        *,
        remote: RemoteMembersFactory | None = None,
    ) -> CollaborationManager:
        return cls(
            registry,
            store,
            sessions,
            enabled=settings.openagent_collaboration,
            timeout=settings.openagent_collab_timeout,
            max_messages=settings.openagent_collab_max_messages,
            remote=remote,
        )

    # ------------------------------------------------------------------ the orchestrator's API

    def eligible(self, agent_ids: Iterable[str]) -> list[str]:
        """Of ``agent_ids`` (order kept, duplicates dropped), the connected WebSocket agents whose
        metadata has ``supports_collaboration: true``; empty when collaboration is disabled."""
        if not self.enabled:
            return []
        ids = dict.fromkeys(agent_ids)
        cluster = self.cluster
        return [
            agent_id
            for agent_id in ids
            if supports_collaboration(self._registry.get(agent_id))
            or (cluster is not None and cluster.supports(agent_id))
        ]

    async def run(
        self,
        *,
        parent_session_id: str,
        agent_ids: list[str],
        task: str,
        scope: Scope,
        context: dict[str, Any] | None = None,
        query_id: str | None = None,
        tenant: str | None = None,
    ) -> CollaborationOutcome:
        """Run one collaboration to its end; the first agent is the initiator. Only agents
        offered to ``scope`` (the asker's) may take part. ``tenant`` owns its record and, when
        this creates it, the parent session (``None``: ``default``).

        Appends ``outcome.session_turn(query_id)`` (``decision: "collaboration"``) to
        ``session:{parent_session_id}``, creating that session if needed.

        Raises:
            CollaborationRejected: Disabled, fewer than two agents, a duplicate, an empty task,
                an agent that is not connected or does not support collaboration.
            SessionStoreUnavailable: Redis did not take the new session (nothing was sent).
        """
        members = check_agents(
            self._registry,
            agent_ids,
            task,
            scope,
            enabled=self.enabled,
            remote=None if self.cluster is None else self.cluster.member,
        )
        session = CollabSession.new(
            str(uuid.uuid4()), parent_session_id, task, dict(context or {}), members, self.limits
        )
        session.tenant = tenant if tenant != DEFAULT_TENANT else None
        sid = session.collab_session_id
        self._active[sid] = session
        try:
            await self._store.save(session.document())
        except SessionStoreUnavailable:
            del self._active[sid]
            raise
        logger.info("collaboration %s started: %s on %r", sid, session.agent_ids, task)
        try:
            await self._introduce(session)
            try:
                async with asyncio.timeout(self.timeout):
                    await asyncio.shield(session.done)
            except TimeoutError:
                summary = f"no agreement within {self.timeout:g} s ({session.message_count} messages)"
                await self._finish(session, "timeout", summary)
        except BaseException as exc:  # cancelled, or a bug: the peers must still hear the end
            if isinstance(exc, asyncio.CancelledError):
                reason, summary = "cancelled", "the collaboration was cancelled"
            else:
                reason, summary = "internal_error", f"the master failed: {type(exc).__name__}: {exc}"
            await asyncio.shield(self._finish(session, reason, summary))
            raise
        outcome = session.outcome()
        try:
            await self._sessions.append(
                parent_session_id, [outcome.session_turn(query_id)], owner=session.tenant
            )
        except SessionStoreUnavailable:
            logger.exception("could not record collaboration %s in session %s", sid, parent_session_id)
        logger.info("collaboration %s ended (%s), %d messages", sid, outcome.reason, outcome.message_count)
        return outcome

    @property
    def active_count(self) -> int:
        """Collaboration sessions running now."""
        return len(self._active)

    @property
    def limits(self) -> dict[str, Any]:
        return {"timeout_seconds": self.timeout, "max_messages": self.max_messages}

    async def load(self, collab_session_id: str, scope: Scope) -> dict[str, Any] | None:
        """The stored ``collab:{id}`` document, or ``None`` (also another tenant's for ``scope``)."""
        return await self._store.load(collab_session_id, scope)

    async def for_parent(self, parent_session_id: str, scope: Scope) -> list[str]:
        """Ids of the collaborations started from an orchestrator session that ``scope`` sees."""
        return await self._store.for_parent(parent_session_id, scope)

    async def aclose(self) -> None:
        """End every running session (master shutdown)."""
        for session in list(self._active.values()):
            await self._finish(session, "shutdown", "the master is shutting down")

    # ------------------------------------------------------------------ frames from agents (the hub)

    async def on_peer_message(self, agent: LiveAgent, message: PeerMessage) -> Refusal | None:
        """Record and relay a ``peer_message``; a :class:`Refusal` when it is not relayed."""
        session = self._active.get(message.session_id)
        if session is None and self.enabled and self.cluster is not None:
            if self.cluster.relays(message.session_id, agent):  # owned by another master
                return await self.cluster.forward(agent, message)
        if not self.enabled or session is None:
            return self._gone(message.session_id)
        refusal = check_sender(agent, session) or check_recipient(agent, message.to_agent, session)
        if refusal is not None:
            return refusal
        target = session.members[str(message.to_agent)]
        async with session.lock:
            if session.finished:
                return self._gone(message.session_id)
            if session.message_count >= self.max_messages:
                summary = (
                    f"message cap of {self.max_messages} reached; {agent.agent_id!r} tried to send another"
                )
                await self._finish_locked(session, "max_messages", summary)
                return None
            session.message_count += 1
            await self._record(
                session, session.message_entry(agent.agent_id, target.agent_id, message.content)
            )
            relayed = message.model_copy(update={"from_agent": agent.agent_id})
            if not await self._deliver(target, relayed):
                summary = f"agent {target.agent_id!r} could not be reached"
                await self._finish_locked(session, "peer_disconnected", summary, gone=target)
        return None

    async def on_end(self, agent: LiveAgent, message: CollaborationEnd) -> Refusal | None:
        """A peer ends its session: record it and tell the others."""
        ended = self._ended.get(message.session_id)
        if self.enabled and ended is not None and agent.agent_id in ended.agent_ids:
            return None  # two peers ended at once: the first one won, the second changes nothing
        session = self._active.get(message.session_id)
        if session is None and self.enabled and self.cluster is not None:
            if self.cluster.relays(message.session_id, agent):  # owned by another master
                return await self.cluster.forward(agent, message)
        if not self.enabled or session is None:
            return self._gone(message.session_id)
        refusal = check_sender(agent, session)
        if refusal is not None:
            return refusal
        await self._finish(session, message.reason or "completed", message.summary, ended_by=agent.agent_id)
        return None

    async def agent_disconnected(self, agent: LiveAgent) -> None:
        """End every session that ``agent``'s connection is in."""
        for session in list(self._active.values()):
            if session.members.get(agent.agent_id) is agent:
                summary = f"agent {agent.agent_id!r} disconnected after {session.message_count} messages"
                await self._finish(session, "peer_disconnected", summary, gone=agent)
        if self.cluster is not None:
            await self.cluster.disconnected(agent)

    # ------------------------------------------------------------------ frames from other masters

    def session(self, collab_session_id: str) -> CollabSession | None:
        """The running session ``collab_session_id`` this master owns, if any."""
        return self._active.get(collab_session_id)

    def sessions(self) -> list[CollabSession]:
        """The running sessions this master owns."""
        return list(self._active.values())

    async def member_gone(self, session: CollabSession, member: LiveAgent, summary: str) -> None:
        """A member held by another master went away (its connection, or that master): end the
        session with ``peer_disconnected``, telling the other members."""
        if session.members.get(member.agent_id) is member:
            await self._finish(session, "peer_disconnected", summary, gone=member)

    def remember_ended(self, collab_session_id: str, reason: str, agent_ids: Iterable[str]) -> None:
        """A session owned by another master ended: a late ``collaboration_end`` from one of its
        agents is then quietly ignored, and other frames are told "already ended"."""
        self._ended[collab_session_id] = _Ended(reason, frozenset(agent_ids))
        while len(self._ended) > _ENDED_MEMORY:
            self._ended.popitem(last=False)

    # ------------------------------------------------------------------ internals

    def _gone(self, session_id: str) -> Refusal:
        if not self.enabled:
            return Refusal("not_implemented", DISABLED)
        ended = self._ended.get(session_id)
        if ended is not None:
            return Refusal(
                "unknown_session", f"collaboration session {session_id!r} already ended ({ended.reason})"
            )
        return Refusal("unknown_session", f"unknown collaboration session {session_id!r}")

    async def _introduce(self, session: CollabSession) -> None:
        async with session.lock:
            for agent in reversed(list(session.members.values())):  # responders first
                if not await self._deliver(agent, session.start_frame(agent)):
                    summary = f"agent {agent.agent_id!r} could not be reached"
                    await self._finish_locked(session, "peer_disconnected", summary, gone=agent)
                    return

    async def _finish(
        self,
        session: CollabSession,
        reason: str,
        summary: str,
        ended_by: str | None = None,
        *,
        gone: LiveAgent | None = None,
    ) -> None:
        async with session.lock:
            await self._finish_locked(session, reason, summary, ended_by, gone=gone)

    async def _finish_locked(
        self,
        session: CollabSession,
        reason: str,
        summary: str,
        ended_by: str | None = None,
        *,
        gone: LiveAgent | None = None,
    ) -> None:
        """End ``session`` (idempotent): store the final document, tell the other peers (all but
        ``ended_by`` and the ``gone`` connection), wake ``run``."""
        if session.finished:
            return
        session.end(reason, summary, ended_by)
        sid = session.collab_session_id
        self._active.pop(sid, None)
        self.remember_ended(sid, reason, session.agent_ids)
        self.ended_by_reason[reason] += 1
        try:
            await self._store.save(session.document())
        except SessionStoreUnavailable as exc:
            logger.warning("could not store the end of collaboration %s: %s", sid, exc)
        notice = CollaborationEnd(
            session_id=sid,
            summary=summary,
            from_agent=ended_by,
            reason=None if reason == "completed" else reason,
        )
        others = [
            agent for agent_id, agent in session.members.items() if agent_id != ended_by and agent is not gone
        ]
        await asyncio.gather(*(self._deliver(agent, notice) for agent in others))
        if not session.done.done():
            session.done.set_result(None)

    async def _record(self, session: CollabSession, entry: dict[str, Any]) -> None:
        """Keep the entry in memory and append it in Redis before it is relayed (best effort:
        the final write at the end stores the whole document again)."""
        session.entries.append(entry)
        try:
            if not await self._store.append(session.collab_session_id, entry):
                logger.warning("collaboration %s is no longer in Redis (expired?)", session.collab_session_id)
        except SessionStoreUnavailable as exc:
            logger.warning(
                "could not record a message of collaboration %s: %s", session.collab_session_id, exc
            )

    async def _deliver(self, agent: LiveAgent, frame: BaseModel) -> bool:
        try:
            async with asyncio.timeout(self._send_timeout):
                await agent.send(frame.model_dump_json())
        except (ConnectionError, TimeoutError):
            logger.warning("could not send %s to agent %s", getattr(frame, "type", "a frame"), agent.agent_id)
            return False
        return True
