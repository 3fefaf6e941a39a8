"""The WebSocket hub at ``/ws``: one :class:`Hub` serves every agent connection.

A connection's first useful frame is ``register``. Before that, anything but
``ping`` gets an ``error`` (``not_registered``) and the connection stays open.
Malformed JSON, JSON nested deeper than :data:`MAX_JSON_DEPTH`, an unknown ``type`` and
oversized frames get an ``error`` too;
only auth failures (1008) and replacement by a newer connection (4001) close it.

Who may take an ``agent_id`` at all is decided by :class:`master.agents.identity.AgentIds`
(an id is its tenant's; a query client never takes an action agent's id): a ``register`` it
refuses gets an ``error`` naming why, and nothing changes. Among the connections it admits, the
newest wins. The old one gets ``error`` ``agent_replaced`` naming who replaced it, its calls in
flight fail, and it is closed with code 4001: with the close reason
:data:`protocol.REPLACED_BY_ANOTHER_KEY` when the newer connection came with another key (the SDK
then reconnects with backoff), else the SDK takes it as a second copy of itself and stops.

A master that is stopping (:mod:`master.gateway.drain`) first closes new connections at once with
1012 (service restart), then, once its work in flight is done, closes every connection with
1012 (:meth:`Hub.hand_off`): the SDK reconnects at once, to another master.

A query client's ``cancel`` frame cancels one of its queries or any run its key sees
(:mod:`master.gateway.cancels`).
A ``query`` with ``stream: true`` gets its run's events as ``run_event`` frames
(:class:`protocol.RunEventFrame`) as they happen, then its ``query_result``.

``peer_message`` and ``collaboration_end`` go to the :class:`CollaborationManager`,
which relays them (or refuses them: an ``error`` with ``ref`` = the session id); a
connection that closes ends the collaborations it was in.

Each frame is checked against the role of the connection's key (resolved at connect by
:mod:`master.routes.ws`, :mod:`master.gateway.frames`): a frame the role may not send gets an
``error`` ``forbidden`` naming the role it needs, and nothing else happens.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from pydantic import ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect

from master.access.permissions import Permission
from master.agents.catalog import ToolCatalog, ToolLimits
from master.agents.directory import AgentDirectory
from master.agents.dispatch import Dispatcher
from master.agents.identity import Claim, IdRole
from master.agents.invocation import InvocationAgents, InvocationRegistration
from master.agents.registry import LiveAgent, Registry
from master.auth import Principal, principal_of
from master.collaboration import CollaborationManager
from master.errors import InvalidToolSchema, RegistrationRefused, SessionStoreUnavailable
from master.gateway import frames
from master.gateway.cancels import answer_cancel
from master.gateway.connection import Connection, describe_invalid, ref_of
from master.gateway.streams import RunStreams
from master.query.entry import QueryEntry, QueryRun
from master.query.events import QueryRefused
from protocol import (
    CLOSE_AGENT_REPLACED,
    REPLACED_BY_ANOTHER_KEY,
    Cancel,
    CancelResult,
    CollaborationEnd,
    CollaborationStart,
    ErrorMessage,
    Message,
    PeerMessage,
    Ping,
    Pong,
    Query,
    QueryResponse,
    QueryResult,
    Register,
    Registered,
    ToolCall,
    ToolProgress,
    ToolResult,
    parse_message,
)

logger = logging.getLogger("master.gateway.hub")


class Hub:
    """Serves WebSocket connections: registration, routing and liveness."""

    def __init__(
        self,
        registry: Registry,
        dispatcher: Dispatcher,
        invocation: InvocationAgents,
        queries: QueryEntry,
        *,
        max_message_bytes: int,
        collaboration: CollaborationManager | None = None,
        max_queries_per_connection: int = 16,
        catalog: ToolCatalog | None = None,
    ) -> None:
        self._registry = registry
        self._collaboration = collaboration
        self._dispatcher = dispatcher
        self._invocation = invocation
        self._queries = queries
        self._max_message_bytes = max_message_bytes
        self._max_queries_per_connection = max_queries_per_connection
        self._catalog = catalog or ToolCatalog(AgentDirectory(registry, invocation), ToolLimits())
        self._ids = self._catalog.agents.ids
        self._connections: set[Connection] = set()
        self._streams = RunStreams()
        self._refusing: tuple[int, str] | None = None
        """(close code, reason) for new connections while the master drains."""

    def refuse_connections(self, code: int, reason: str) -> None:
        """Close every new connection at once with ``code`` (the master is draining)."""
        self._refusing = (code, reason)

    async def hand_off(self, code: int, reason: str) -> int:
        """Close every connection with ``code`` (the end of a drain); returns how many."""
        self._refusing = (code, reason)
        connections = list(self._connections)
        await asyncio.gather(*(conn.close(code, reason) for conn in connections))
        return len(connections)

    async def serve(self, websocket: WebSocket) -> None:
        """Run one accepted connection until it closes."""
        conn = Connection(websocket, principal_of(websocket.scope))
        if self._refusing is not None:
            await conn.close(*self._refusing)
            return
        self._connections.add(conn)
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                raw = message.get("text")
                if raw is None:
                    data = message.get("bytes") or b""
                    try:
                        raw = data.decode()
                    except UnicodeDecodeError:
                        await conn.send_error("invalid_message", "binary frame is not UTF-8 JSON")
                        continue
                await self._on_frame(conn, raw)
        except WebSocketDisconnect:
            pass
        finally:
            conn.closed = True
            self._connections.discard(conn)
            await self._cleanup(conn)

    async def _on_frame(self, conn: Connection, raw: str) -> None:
        size = len(raw.encode()) if len(raw) * 4 > self._max_message_bytes else len(raw)
        if size > self._max_message_bytes:
            await conn.send_error(
                "message_too_large",
                f"frame of {size} bytes exceeds the limit of {self._max_message_bytes} bytes",
            )
            return
        try:
            msg = parse_message(raw)
        except ValidationError as exc:
            code, text = describe_invalid(exc)
            await conn.send_error(code, text, ref_of(raw))
            return
        await self._handle(conn, msg)

    async def _handle(self, conn: Connection, msg: Message) -> None:
        refused = frames.refusal(conn.principal, msg)
        if refused is not None:
            ref = (
                getattr(msg, "query_id", None)
                or getattr(msg, "call_id", None)
                or getattr(msg, "agent_id", None)
            )
            await conn.send_error("forbidden", refused, ref if isinstance(ref, str) else None)
            return
        if isinstance(msg, Ping):
            await self._reply(conn, Pong().model_dump_json())
            return
        if isinstance(msg, Register):
            await self._register(conn, msg)
            return
        agent = conn.agent
        if agent is None:
            await conn.send_error("not_registered", f"send 'register' before {msg.type!r}")
            return
        if isinstance(msg, ToolResult):
            if not self._dispatcher.resolve(agent, msg):
                await conn.send_error(
                    "unknown_call",
                    f"no call {msg.call_id!r} is waiting for agent {agent.agent_id!r}",
                    msg.call_id,
                )
        elif isinstance(msg, ToolProgress):
            if not self._dispatcher.progress(agent, msg):
                await conn.send_error(
                    "unknown_call",
                    f"no call {msg.call_id!r} is running on agent {agent.agent_id!r}",
                    msg.call_id,
                )
        elif isinstance(msg, Query):
            await self._admit_query(conn, msg)
        elif isinstance(msg, Cancel):
            await self._reply(conn, await answer_cancel(self._queries, conn.principal, msg, conn.queries))
        elif isinstance(msg, PeerMessage | CollaborationEnd):
            await self._collaborate(conn, agent, msg)
        elif isinstance(
            msg, Registered | QueryResult | CancelResult | ToolCall | CollaborationStart | Pong | ErrorMessage
        ):
            await conn.send_error("invalid_message", f"{msg.type!r} is sent by the master, not by agents")
        else:  # pragma: no cover - every member of the union is handled above
            raise AssertionError(msg)

    async def _collaborate(
        self, conn: Connection, agent: LiveAgent, msg: PeerMessage | CollaborationEnd
    ) -> None:
        manager = self._collaboration
        if manager is None:
            await conn.send_error(
                "not_implemented",
                f"{msg.type!r} is not supported: collaboration is not enabled",
                msg.session_id,
            )
            return
        if isinstance(msg, PeerMessage):
            refusal = await manager.on_peer_message(agent, msg)
        else:
            refusal = await manager.on_end(agent, msg)
        if refusal is not None:
            await conn.send_error(refusal.code, refusal.message, msg.session_id)

    async def _reply(self, conn: Connection, frame: str) -> None:
        try:
            await conn.send(frame)
        except ConnectionError:
            pass

    async def _register(self, conn: Connection, msg: Register) -> None:
        if conn.agent is not None:
            await conn.send_error(
                "already_registered",
                f"this connection is already registered as {conn.agent.agent_id!r}",
                msg.agent_id,
            )
            return
        if msg.invocation_url is not None:
            await self._register_invocation(conn, msg, msg.invocation_url)
            return
        role: IdRole = "query" if frames.register_permission(msg) is Permission.QUERY else "action"
        try:
            self._catalog.check(msg.agent_id, msg.tools, invocation=False, metadata=msg.metadata)
            agent = LiveAgent.from_register(
                msg, conn.send, conn.close, tenant=conn.agent_tenant, key_id=conn.principal.key_id
            )
            claim = await self._ids.claim(conn.principal, msg.agent_id, role, tenant=conn.agent_tenant)
        except RegistrationRefused as exc:
            await conn.send_error(exc.code, exc.message, msg.agent_id)
            return
        except InvalidToolSchema as exc:
            await conn.send_error("invalid_message", str(exc), msg.agent_id)
            return
        except SessionStoreUnavailable as exc:
            await conn.send_error("session_store_unavailable", str(exc), msg.agent_id)
            return
        mismatch = self._replica_mismatch(agent)
        if mismatch is not None:  # (its claim stands: the live replicas hold the same id)
            await conn.send_error("invalid_message", mismatch, msg.agent_id)
            return
        previous = self._registry.add(agent)
        conn.agent, conn.claim = agent, claim
        if previous is not None:
            await self._replace(previous, conn.principal, msg.agent_id)
        replicas = len(agent.group)
        logger.info(
            "registered %s agent %s (%d tools%s)",
            msg.role,
            msg.agent_id,
            len(agent.tools),
            f", replica {msg.instance!r}, {replicas} live" if replicas > 1 else "",
        )
        await self._reply(conn, Registered(agent_id=msg.agent_id).model_dump_json())

    def _replica_mismatch(self, agent: LiveAgent) -> str | None:
        """Why ``agent`` cannot join the live replicas of its id (``None``: it can). Replicas share
        one listing, so they offer the same tools and serve the same tenant; replacing the only
        replica may change anything."""
        others = [r for r in self._registry.replicas(agent.agent_id) if r.instance != agent.instance]
        if not others:
            return None
        first = others[0]
        if agent.role != first.role or agent.tenant != first.tenant:
            return (
                f"agent {agent.agent_id!r} is live with another role or tenant; "
                "replicas of one agent id must have the same"
            )
        if not agent.same_offer(first):
            return (
                f"agent {agent.agent_id!r} replica {agent.instance!r} offers other tools than its live "
                f"replica {first.instance!r}: replicas must offer the same tools "
                "(to change them, stop the other replicas first)"
            )
        return None

    async def _replace(self, previous: LiveAgent, principal: Principal, agent_id: str) -> None:
        """Tell the older connection of ``agent_id`` why it goes, fail its calls, close it (4001)."""
        itself = previous.key_id is not None and previous.key_id == principal.key_id
        who = "a newer connection of the same key" if itself else f"key {principal.name!r}"
        logger.warning("agent %s registered again by %s: replacing the older connection", agent_id, who)
        self._dispatcher.fail_agent(previous, "was replaced by a newer connection")
        try:
            await previous.send(
                ErrorMessage(
                    code="agent_replaced",
                    message=f"{who} registered agent {agent_id!r}; closing this connection",
                    ref=agent_id,
                ).model_dump_json()
            )
        except ConnectionError:
            pass
        reason = "replaced by a newer connection" if itself else REPLACED_BY_ANOTHER_KEY
        await previous.close(CLOSE_AGENT_REPLACED, reason)

    async def _register_invocation(self, conn: Connection, msg: Register, url: str) -> None:
        """Legacy path: a ``register`` carrying ``invocation_url`` stores an HTTP agent in Redis."""
        claim: Claim | None = None
        try:
            registration = InvocationRegistration(
                agent_id=msg.agent_id, invocation_base_url=url, tools=msg.tools, metadata=msg.metadata
            )
            self._catalog.check(msg.agent_id, msg.tools, invocation=True, metadata=msg.metadata)
            claim = await self._ids.claim(conn.principal, msg.agent_id, "action", tenant=conn.agent_tenant)
            await self._invocation.register(registration, registrant=conn.principal, tenant=conn.agent_tenant)
        except RegistrationRefused as exc:
            await self._undo(claim)
            await conn.send_error(exc.code, f"cannot register invocation agent: {exc.message}", msg.agent_id)
            return
        except (ValidationError, InvalidToolSchema) as exc:
            await self._undo(claim)
            await conn.send_error("invalid_message", f"cannot register invocation agent: {exc}", msg.agent_id)
            return
        except SessionStoreUnavailable as exc:  # as _register answers it: not the agent's mistake
            await self._undo(claim)
            await conn.send_error(
                "session_store_unavailable", f"cannot register invocation agent: {exc}", msg.agent_id
            )
            return
        await self._reply(conn, Registered(agent_id=msg.agent_id).model_dump_json())

    async def _undo(self, claim: Claim | None) -> None:
        if claim is not None:
            await self._ids.undo(claim)

    async def _admit_query(self, conn: Connection, msg: Query) -> None:
        """Start the query, unless the connection or the master is at its cap (then nothing runs)."""
        cap = self._max_queries_per_connection
        if conn.queries_in_flight >= cap:
            await conn.send_error(
                "too_many_queries",
                f"this connection already has {conn.queries_in_flight} queries in flight "
                f"(OPENAGENT_WS_MAX_QUERIES_PER_CONNECTION={cap}); wait for a query_result",
                msg.query_id,
            )
            return
        streamed: list[QueryRun] = []  # set once submitted: the result waits for its events
        try:
            run = self._queries.submit(
                msg,
                door="websocket",
                query_id=msg.query_id,
                stream=msg.stream,
                deliver=partial(self._send_result, conn, streamed),
                principal=conn.principal,
            )
        except QueryRefused as exc:
            await conn.send_error(exc.code, exc.message, msg.query_id)
            return
        conn.queries_in_flight += 1
        conn.queries[msg.query_id] = run

        def done() -> None:
            conn.queries_in_flight -= 1
            if conn.queries.get(msg.query_id) is run:
                del conn.queries[msg.query_id]

        run.on_done(done)
        if msg.stream:
            streamed.append(run)
            self._streams.follow(run, partial(self._reply, conn))

    async def _send_result(self, conn: Connection, streamed: list[QueryRun], response: QueryResponse) -> None:
        if streamed:  # its run_event frames first
            await self._streams.sent(streamed[0])
        await self._reply(conn, QueryResult(**response.model_dump()).model_dump_json())

    async def _cleanup(self, conn: Connection) -> None:
        agent = conn.agent
        if agent is None:
            return
        failed = self._dispatcher.fail_agent(agent, "disconnected")
        if self._collaboration is not None:
            await self._collaboration.agent_disconnected(agent)
        if self._registry.remove(agent):
            left = len(agent.group)
            logger.info(
                "agent %s disconnected (%d calls in flight failed%s)",
                agent.agent_id,
                failed,
                f"; {left} replicas remain" if left else "",
            )
            if conn.claim is not None and not left:
                await self._ids.leave(conn.claim)
