"""One code path for every query, from ``POST /query`` or a WebSocket ``query``.

:meth:`QueryService.run` validates the request, loads the session, runs the
orchestrator and stores the new turns. It raises :class:`QueryRejected` for
requests it cannot run; :meth:`QueryService.answer` turns every outcome into a
:class:`protocol.QueryResponse` for the WebSocket hub.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from master.dispatch import Target
from master.errors import LLMError, QueryRejected, SessionStoreUnavailable
from master.invocation import InvocationAgents
from master.model_catalog import ModelCatalog
from master.orchestrator import Orchestrator, Outcome, history_messages
from master.registry import Registry
from master.sessions import SessionStore, Turn
from master.toolbox import Toolbox
from protocol import AgentUsed, Query, QueryRequest, QueryResponse

logger = logging.getLogger("master.queries")

NOT_CONFIGURED = (
    "no LLM is configured: set OPENAI_API_KEY (and OPENAI_BASE_URL for Ollama, vLLM, llama.cpp "
    "or another OpenAI-compatible server) in the environment or .env, then restart the master"
)

_NOT_YET: dict[str, str] = {
    "auto_mode": "auto mode",
    "auto_require_plan_approval": "plan approval",
    "auto_plan_execute": "plan execution",
    "attachments": "attachments",
}
"""Request fields whose feature this master does not implement yet (answered with 501)."""


class QueryService:
    """Runs queries against the orchestrator and records them in the session store."""

    def __init__(
        self,
        *,
        registry: Registry,
        invocation: InvocationAgents,
        sessions: SessionStore,
        catalog: ModelCatalog,
        orchestrator: Orchestrator | None,
        unavailable_reason: str = NOT_CONFIGURED,
    ) -> None:
        self._registry = registry
        self._invocation = invocation
        self._sessions = sessions
        self._catalog = catalog
        self._orchestrator = orchestrator
        self._unavailable_reason = unavailable_reason

    def _tool_agents(self, allowed: list[str] | None) -> list[Target]:
        """Connected WebSocket agents, then invocation agents not known to be DOWN (a live
        WebSocket agent shadows an invocation agent with the same id)."""
        live: list[Target] = list(self._registry.action_agents(allowed))
        ids = {agent.agent_id for agent in live}
        wanted = None if allowed is None else set(allowed)
        for agent in self._invocation.available():
            if agent.agent_id not in ids and (wanted is None or agent.agent_id in wanted):
                live.append(agent)
        return live

    async def answer(self, message: Query) -> QueryResponse:
        """Like :meth:`run`, but every failure becomes an unsuccessful response."""
        try:
            return await self.run(message, message.query_id)
        except QueryRejected as exc:
            return QueryResponse(
                query_id=message.query_id,
                session_id=message.session_id,
                success=False,
                error=exc.message,
                error_code=exc.code,
            )

    async def run(self, request: QueryRequest, query_id: str) -> QueryResponse:
        """Answer one query. Raises :class:`QueryRejected` (with an HTTP status) when it cannot."""
        for field_name, feature in _NOT_YET.items():
            if getattr(request, field_name):
                raise QueryRejected(
                    501,
                    "not_implemented",
                    f"{field_name!r} ({feature}) is not implemented yet on this master",
                )
        if self._orchestrator is None:
            raise QueryRejected(503, "llm_not_configured", self._unavailable_reason)
        try:
            model = self._catalog.resolve(request.orchestrator_model)
        except ValueError as exc:
            raise QueryRejected(400, "invalid_model", str(exc)) from None

        session_id = request.session_id
        turns: list[Turn] = []
        try:
            if session_id is None:
                session_id = self._sessions.new_session_id()
            else:
                loaded = await self._sessions.load(session_id)
                if loaded is None:
                    raise QueryRejected(
                        404,
                        "unknown_session",
                        f"unknown or expired session {session_id!r}; omit session_id to start a new session",
                    )
                turns = loaded
        except SessionStoreUnavailable as exc:
            raise QueryRejected(503, "session_store_unavailable", str(exc)) from None

        toolbox = Toolbox(self._tool_agents(request.allowed_agent_ids))
        started = time.monotonic()
        try:
            outcome = await self._orchestrator.run(
                query=request.query,
                history=history_messages(turns),
                toolbox=toolbox,
                model=model,
                profile=request.orchestrator_prompt_profile,
            )
        except LLMError as exc:
            logger.warning("query %s failed: %s", query_id, exc)
            raise QueryRejected(502, exc.code, str(exc)) from None

        try:
            await self._sessions.append(session_id, _turns_of(request, query_id, model, outcome))
        except SessionStoreUnavailable as exc:
            logger.error("query %s answered but not stored: %s", query_id, exc)
            raise QueryRejected(
                503, "session_store_unavailable", f"answered, but not stored: {exc}"
            ) from None
        logger.info(
            "query %s answered in %.0f ms with %d tool call(s)",
            query_id,
            (time.monotonic() - started) * 1000,
            len(outcome.tool_runs),
        )
        return QueryResponse(
            query_id=query_id,
            session_id=session_id,
            success=True,
            answer=outcome.answer,
            agents_used=_agents_used(outcome),
        )


def _agents_used(outcome: Outcome) -> list[AgentUsed]:
    seen: dict[tuple[str, str], AgentUsed] = {}
    for run in outcome.tool_runs:
        if run.dispatched and run.agent_id and run.tool_name:
            seen.setdefault(
                (run.agent_id, run.tool_name), AgentUsed(agent_id=run.agent_id, tool_name=run.tool_name)
            )
    return list(seen.values())


def _turns_of(request: QueryRequest, query_id: str, model: str, outcome: Outcome) -> list[Turn]:
    """The session turns of one answered query (spec: "Session store")."""
    base: dict[str, Any] = {"query": request.query, "query_id": query_id, "model": model, "ts": time.time()}
    if not outcome.tool_runs:
        return [{**base, "decision": "answer_directly", "answer": outcome.answer}]
    turns: list[Turn] = []
    for run in outcome.tool_runs:
        turn: Turn = {
            **base,
            "decision": "call_tool",
            "tool_agent_id": run.agent_id,
            "tool_name": run.tool_name or run.function_name,
            "tool_args": run.arguments,
        }
        if run.success:
            turn["result"] = run.result
        else:
            turn["error"] = run.error
        turns.append(turn)
    turns[-1]["answer"] = outcome.answer
    return turns
