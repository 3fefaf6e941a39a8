"""What a run is given before it starts: its session, the tools and hooks on offer, its files.

:class:`RunSetup` loads (or starts) the session a query names, refuses an unknown agent or a
clashing client tool by name, offers ``start_collaboration`` and ``spawn_agent`` when they
apply, and checks and stores the query's attachments (:mod:`master.attachments`). Every refusal
is a :class:`~master.errors.QueryRejected` with a stable code; none leaves anything in Redis.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from master.agents.calls import ToolRun
from master.agents.directory import AgentDirectory
from master.agents.toolbox import Toolbox
from master.attachments import NewFile, RagLink, RagQuery, decode_attachments
from master.auth import Principal, Scope
from master.collaboration import CollaborationManager
from master.conversation.history import turns_from_messages
from master.conversation.store import CHECK_FRESH_SECONDS, SessionStore, Turn
from master.errors import QueryRejected, SessionStoreUnavailable
from master.orchestration.orchestrator import RunHooks, collaboration_tool, spawn_tool
from master.runs.work import session_owner
from master.sandbox.spawn import Spawner
from master.settings import Settings
from protocol import QueryRequest

logger = logging.getLogger("master.query.setup")

MAX_KNOWN_LISTED = 20
"""How many known agent ids an ``unknown_agent`` refusal lists."""


class RunSetup:
    """Prepares a query's run (module docstring)."""

    def __init__(
        self,
        *,
        settings: Settings,
        agents: AgentDirectory,
        sessions: SessionStore,
        collaboration: CollaborationManager | None = None,
        rag: RagLink | None = None,
        spawner: Spawner | None = None,
    ) -> None:
        self._settings = settings
        self._agents = agents
        self._sessions = sessions
        self._collaboration = collaboration
        self._rag = rag
        self._spawner = spawner

    def client_tools(
        self,
        hooks: RunHooks,
        toolbox: Toolbox,
        extra_tools: list[dict[str, Any]],
        client_tools: Sequence[dict[str, Any]],
    ) -> list[dict[str, Any]]:
        """The asker's own tools, offered beside the agents'; a name one of those has is refused."""
        if not client_tools:
            return []
        taken = {tool["function"]["name"] for tool in [*toolbox.openai_tools(), *extra_tools]}
        names = [str(tool["function"]["name"]) for tool in client_tools]
        clash = sorted(taken.intersection(names))
        if clash:
            raise QueryRejected(
                "invalid_query",
                f"tool name(s) {', '.join(map(repr, clash))} belong to the hub's own tools; rename yours",
            )
        hooks.external = frozenset(names)
        return list(client_tools)

    async def store_history(self, session_id: str, history: Sequence[Any], owner: str) -> list[Turn]:
        """A stateless asker's earlier messages, stored as the new session's first turns."""
        turns = turns_from_messages(history)
        try:
            await self._sessions.append(session_id, turns, owner=owner)
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        return turns

    async def owner(self, principal: Principal, session_id: str, new_session: bool) -> str:
        """The tenant that owns the session (:func:`master.runs.work.session_owner`)."""
        return await session_owner(self._sessions, principal, session_id, new_session)

    def collaboration_hook(
        self,
        hooks: RunHooks,
        toolbox: Toolbox,
        session_id: str,
        query_id: str,
        scope: Scope,
        owner: Callable[[], Awaitable[str]],
    ) -> list[dict[str, Any]]:
        """Offer ``start_collaboration`` when two or more linked agents support it (the model may
        name any agent: the manager refuses one not offered to the asker's ``scope``)."""
        manager = self._collaboration
        if manager is None:
            return []
        eligible = manager.eligible(agent.agent_id for agent, _ in toolbox.entries())  # it drops repeats
        if len(eligible) < 2:
            return []

        async def collaborate(agents: list[str], task: str) -> dict[str, Any]:
            outcome = await manager.run(
                parent_session_id=session_id,
                agent_ids=agents,
                task=task,
                scope=scope,
                query_id=query_id,
                tenant=await owner(),
            )
            return {
                "collab_session_id": outcome.collab_session_id,
                "agents": outcome.agents,
                "completed": outcome.completed,
                "reason": outcome.reason,
                "summary": outcome.summary,
                "message_count": outcome.message_count,
            }

        hooks.collaborate = collaborate
        return [collaboration_tool(eligible)]

    def decode_attachments(self, request: QueryRequest) -> list[NewFile]:
        """The query's files, checked against the limits before anything runs or is stored."""
        if not request.attachments:
            return []
        if self._rag is None:
            raise QueryRejected(
                "not_implemented", "this master stores no attachments (no RAG link configured)"
            )
        return decode_attachments(
            request.attachments,
            max_count=self._settings.rag_max_attachments,
            max_bytes=self._settings.rag_max_attachment_bytes,
        )

    async def rag_query(
        self,
        session_id: str,
        toolbox: Toolbox,
        new_files: list[NewFile],
        seconds: float,
        *,
        new_session: bool,
        principal: Principal,
    ) -> RagQuery | None:
        # A session whose id was made for this query has no files but the ones it brings: no
        # Redis round trip to find that out.
        if self._rag is None or (new_session and not new_files):
            return None
        try:
            owner = await self.owner(principal, session_id, new_session) if new_files else principal.tenant
            return await self._rag.prepare(
                session_id, toolbox, new_files, Scope.of(principal), owner=owner, seconds=seconds
            )
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None

    async def finish_rag(self, rag: RagQuery, runs: list[ToolRun]) -> None:
        assert self._rag is not None
        try:
            await self._rag.finish(rag, runs)
        except SessionStoreUnavailable as exc:
            logger.warning("could not record the indexing state of session %s: %s", rag.session_id, exc)

    def spawn_hook(
        self, hooks: RunHooks, request: QueryRequest, principal: Principal
    ) -> list[dict[str, Any]]:
        """Offer ``spawn_agent`` in auto mode when saved agents are not running (sandbox on; an
        administrator's queries only: the agents it starts belong to tenant ``default``)."""
        spawner = self._spawner
        if (
            spawner is None
            or not request.auto_mode
            or request.auto_plan_execute is not None
            or not principal.is_admin
        ):
            return []
        candidates = spawner.candidates(request.allowed_agent_ids)
        if not candidates:
            return []
        hooks.spawn = functools.partial(spawner.spawn, tenant=principal.tenant)
        return [spawn_tool(candidates)]

    async def thread_session(self, thread_id: str, scope: Scope) -> tuple[str | None, str | None]:
        """``(session_id, new_session_id)`` of a client's thread (:attr:`RunExtras.thread_id`): its
        session when ``scope`` sees it, else a new session of that id when the id is free; another
        tenant's is unknown, as everywhere."""
        try:
            if await self._sessions.load(thread_id, scope) is not None:
                return thread_id, None
            taken = await self._sessions.taken(thread_id)
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        if taken:
            raise QueryRejected(
                "unknown_session",
                f"unknown or expired session {thread_id!r}; start a new thread (a new threadId)",
            )
        return None, thread_id

    async def load_session(
        self, session_id: str | None, scope: Scope, new_id: str | None = None
    ) -> tuple[str, list[Turn]]:
        """The session's turns; either way Redis has answered (for a new session: within
        :data:`CHECK_FRESH_SECONDS`, over a connection still open), so no LLM or tool call runs
        for an answer that could not be stored (tools may have side effects). A session
        ``scope`` does not see (another tenant's) is unknown."""
        try:
            if session_id is None:
                await self._sessions.check(fresh_within=CHECK_FRESH_SECONDS)
                return new_id or self._sessions.new_session_id(), []
            loaded = await self._sessions.load(session_id, scope)
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        if loaded is None:
            raise QueryRejected(
                "unknown_session",
                f"unknown or expired session {session_id!r}; omit session_id to start a new session",
            )
        return session_id, loaded

    def check_known(self, allowed: list[str], scope: Scope, *, auto_mode: bool) -> None:
        """Refuse (``unknown_agent``) ``allowed_agent_ids`` naming an agent no source knows: not
        connected here or to another master, not registered for HTTP invocation (down or not), and
        in auto mode not a saved agent that could be started. The refusal names the unknown ids
        and up to :data:`MAX_KNOWN_LISTED` known ones."""
        found = self._agents.known_ids(scope, allowed)
        unknown = [agent_id for agent_id in dict.fromkeys(allowed) if agent_id not in found]
        if unknown and auto_mode and self._spawner is not None and scope.every_tenant:
            startable = set(self._spawner.candidates(unknown))
            unknown = [agent_id for agent_id in unknown if agent_id not in startable]
        if not unknown:
            return
        listed = sorted(self._agents.known_ids(scope))
        some = ", ".join(repr(agent_id) for agent_id in listed[:MAX_KNOWN_LISTED])
        more = f" and {len(listed) - MAX_KNOWN_LISTED} more" if len(listed) > MAX_KNOWN_LISTED else ""
        raise QueryRejected(
            "unknown_agent",
            f"allowed_agent_ids names unknown agent(s) {', '.join(map(repr, unknown))}; "
            + (f"known agents: {some}{more}" if listed else "no agent is connected or registered"),
        )
