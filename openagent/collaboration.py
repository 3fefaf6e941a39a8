"""Collaboration sessions, agent side: :class:`CollaborationContext` and the handler rules.

Pass a ``collaboration_handler`` to :class:`~openagent.action.OrchestratorActionAgent`;
the agent then registers with ``supports_collaboration: true`` and the master may
start sessions with it. Each ``collaboration_start`` runs the handler in its own
task with a fresh :class:`CollaborationContext`::

    from openagent.client import CollaborationContext

    async def handle_collaboration(ctx: CollaborationContext) -> str:
        if ctx.role == "initiator":
            await ctx.send_message(ctx.peers[0]["agent_id"], {"proposal": 70.0})
            reply = await ctx.receive_message(timeout=60)
            # reply is a PeerMessage or CollaborationEnd or None (timeout)
            return f"Agreed on {reply.content}"
        else:
            msg = await ctx.receive_message(timeout=60)
            await ctx.send_message(msg.from_agent, {"accept": True})
            return "Accepted"

How a session ends, from the handler's side:

- ``await ctx.end(summary)`` ends it at once; the master tells the other peers.
- When the handler **returns** without calling ``end`` and the session is still open:
  the **initiator**'s return value (``str()`` of it; ``None`` gives ``""``) is sent as
  the ``collaboration_end`` summary. A **responder**'s return value is only logged: the
  session stays open until the initiator, another peer or the master ends it (so a
  responder that answers and returns never cuts the initiator short).
- When the handler **raises**, the SDK ends the session with
  ``summary="<ExceptionType>: <message>"`` and ``reason="handler_error"`` (whatever the role).
- When a peer or the master ends the session, ``receive_message`` returns that
  :class:`~protocol.CollaborationEnd` (after any messages that came before it), and
  ``send_message`` raises :class:`~openagent.errors.CollaborationError`. The master ends
  sessions on its timeout (``reason="timeout"``), its message cap (``"max_messages"``) and
  when a peer disconnects (``"peer_disconnected"``); if this agent's own connection drops,
  the SDK ends its sessions locally with ``reason="connection_lost"``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel

from openagent.errors import CollaborationError, ConnectionLostError, OpenAgentError
from protocol import CollaborationEnd, CollaborationStart, ErrorMessage, PeerMessage

__all__ = ["CollaborationContext", "CollaborationHandler", "CollaborationSessions"]

logger = logging.getLogger("openagent.collaboration")

SendFrame = Callable[[BaseModel], Awaitable[None]]
CollaborationHandler = Callable[["CollaborationContext"], Awaitable[Any]]
"""``async def handler(ctx) -> str``: takes part in one collaboration session."""


class CollaborationContext:
    """One collaboration session as seen by one agent.

    Attributes:
        session_id: The collaboration session id (``collab:{session_id}`` on the master).
        task: What the agents should work out together.
        role: ``"initiator"`` (sends first) or ``"responder"``.
        peers: The other agents, as dicts with ``agent_id``, ``metadata`` and ``tools``.
        context: Extra context from the orchestrator.
        agent_id: This agent's id.
        errors: ``error`` frames the master sent about this session (e.g. a refused
            ``peer_message``), most recent last.
    """

    def __init__(self, start: CollaborationStart, *, agent_id: str, send: SendFrame) -> None:
        self.session_id = start.session_id
        self.task = start.task
        self.role: Literal["initiator", "responder"] = start.role
        self.peers: list[dict[str, Any]] = [peer.model_dump(mode="json") for peer in start.peers]
        self.context: dict[str, Any] = dict(start.context)
        self.agent_id = agent_id
        self.errors: list[ErrorMessage] = []
        self._send = send
        self._inbox: asyncio.Queue[PeerMessage | CollaborationEnd] = asyncio.Queue()
        self._end: CollaborationEnd | None = None

    @property
    def peer_ids(self) -> list[str]:
        """The ``agent_id`` of every peer."""
        return [str(peer["agent_id"]) for peer in self.peers]

    @property
    def ended(self) -> bool:
        """Whether the session is over (ended here, by a peer or by the master)."""
        return self._end is not None

    @property
    def end_message(self) -> CollaborationEnd | None:
        """How the session ended, once it has."""
        return self._end

    async def send_message(self, to_agent: str, content: Mapping[str, Any]) -> None:
        """Send a ``peer_message`` with ``content`` (a JSON object) to one peer, through the master.

        Raises:
            CollaborationError: The session is over, or ``to_agent`` is not a peer.
            ConnectionLostError: The agent is not connected to the master.
        """
        if self._end is not None:
            why = self._end.reason or f"ended by {self._end.from_agent or 'the master'}"
            raise CollaborationError(
                f"collaboration session {self.session_id!r} is over ({why}); cannot send to {to_agent!r}",
                session_id=self.session_id,
            )
        if to_agent not in self.peer_ids:
            raise CollaborationError(
                f"agent {to_agent!r} is not a peer in collaboration session {self.session_id!r}"
                f" (peers: {', '.join(self.peer_ids)})",
                session_id=self.session_id,
            )
        await self._send(PeerMessage(session_id=self.session_id, to_agent=to_agent, content=dict(content)))

    async def receive_message(
        self,
        timeout: float | None = 60.0,  # noqa: ASYNC109 - the spec's API: None on timeout, not an exception
    ) -> PeerMessage | CollaborationEnd | None:
        """The next :class:`~protocol.PeerMessage` (``from_agent`` says who sent it), or the
        :class:`~protocol.CollaborationEnd` once the session is over (every later call returns it
        again at once), or ``None`` when nothing arrives within ``timeout`` seconds
        (``None``: wait as long as the session lasts)."""
        if self._inbox.empty() and self._end is not None:
            return self._end
        try:
            async with asyncio.timeout(timeout):
                return await self._inbox.get()
        except TimeoutError:
            return None

    async def end(self, summary: str = "") -> None:
        """End the session with ``summary``; the master tells the other peers. Does nothing
        when the session is already over.

        Raises:
            ConnectionLostError: The agent is not connected (the master ends the session anyway
                when the connection drops).
        """
        await self._end_with(summary, None)

    async def _end_with(self, summary: str, reason: str | None) -> None:
        if self._end is not None:
            return
        self._end = CollaborationEnd(
            session_id=self.session_id, summary=summary, from_agent=self.agent_id, reason=reason
        )
        await self._send(CollaborationEnd(session_id=self.session_id, summary=summary, reason=reason))

    def _deliver(self, frame: PeerMessage | CollaborationEnd) -> None:
        if self._end is not None and isinstance(frame, CollaborationEnd):
            return
        if isinstance(frame, CollaborationEnd):
            self._end = frame
        self._inbox.put_nowait(frame)


class CollaborationSessions:
    """The collaboration sessions of one agent: routes frames to contexts and runs the handler.

    Used by :class:`~openagent.action.OrchestratorWebSocketActionAgent`; see the module
    docstring for the rules.
    """

    def __init__(self, agent_id: str, send: SendFrame) -> None:
        self._agent_id = agent_id
        self._send = send
        self._contexts: dict[str, CollaborationContext] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def dispatch(
        self,
        message: CollaborationStart | PeerMessage | CollaborationEnd,
        handler: CollaborationHandler | None,
    ) -> None:
        """Handle one collaboration frame from the master (never blocks)."""
        if isinstance(message, CollaborationStart):
            self._start(message, handler)
            return
        ctx = self._contexts.get(message.session_id)
        if ctx is None:
            logger.warning(
                "agent %s got %s for unknown collaboration session %s",
                self._agent_id,
                message.type,
                message.session_id,
            )
            return
        ctx._deliver(message)
        if isinstance(message, CollaborationEnd):
            del self._contexts[message.session_id]

    def note_error(self, error: ErrorMessage) -> None:
        """Keep an ``error`` about a session on its context (``ref`` is the session id)."""
        ctx = self._contexts.get(error.ref or "")
        if ctx is not None:
            ctx.errors.append(error)

    def connection_lost(self, error: OpenAgentError) -> None:
        """The master ends the sessions of a lost connection: end them here too."""
        for session_id, ctx in list(self._contexts.items()):
            ctx._deliver(
                CollaborationEnd(session_id=session_id, summary=str(error), reason="connection_lost")
            )
        self._contexts.clear()

    async def aclose(self) -> None:
        """Cancel the running handlers."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._contexts.clear()

    def _start(self, start: CollaborationStart, handler: CollaborationHandler | None) -> None:
        if start.session_id in self._contexts:
            logger.warning("agent %s: collaboration %s started twice", self._agent_id, start.session_id)
            return
        ctx = CollaborationContext(start, agent_id=self._agent_id, send=self._send)
        self._contexts[start.session_id] = ctx
        task = asyncio.create_task(self._run(ctx, handler), name=f"openagent-collab-{start.session_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, ctx: CollaborationContext, handler: CollaborationHandler | None) -> None:
        logger.info("agent %s joins collaboration %s as %s", self._agent_id, ctx.session_id, ctx.role)
        try:
            if handler is None:
                raise CollaborationError(
                    f"agent {self._agent_id!r} has no collaboration_handler", session_id=ctx.session_id
                )
            result = handler(ctx)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            if isinstance(exc, CollaborationError) and ctx.ended:  # sent after the end: a benign race
                logger.info("collaboration %s of agent %s is over: %s", ctx.session_id, self._agent_id, exc)
            else:
                logger.exception("collaboration handler of agent %s failed", self._agent_id)
            await self._finish(ctx, f"{type(exc).__name__}: {exc}", "handler_error")
            return
        if not ctx.ended and ctx.role == "responder":
            # The session stays open: its context keeps receiving until the end arrives.
            logger.info(
                "responder %s returned from collaboration %s: %s", self._agent_id, ctx.session_id, result
            )
            return
        await self._finish(ctx, "" if result is None else str(result), None)

    async def _finish(self, ctx: CollaborationContext, summary: str, reason: str | None) -> None:
        try:
            await ctx._end_with(summary, reason)
        except ConnectionLostError as exc:
            logger.warning("could not end collaboration %s: %s", ctx.session_id, exc)
        self._contexts.pop(ctx.session_id, None)
