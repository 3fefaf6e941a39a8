"""The bounded context of a run's first round: its system prompt, the session's turns and the
query within the model's window, summarizing older turns when they do not fit.

A summary is made under the session's summary lock and stored at once, so that concurrent
queries on the session wait for it and reuse it instead of making their own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from master.auth import Scope
from master.conversation.context import Context, ContextBuilder
from master.conversation.store import SessionStore
from master.llm.tokens import count_tool
from master.llm.windows import ContextWindows
from master.orchestration.model_catalog import ModelCatalog
from master.runs.work import RunWork
from master.settings import Settings

logger = logging.getLogger("master.runs.context")


class ContextMaker:
    """Builds a run's bounded context (module docstring)."""

    def __init__(
        self,
        *,
        settings: Settings,
        sessions: SessionStore,
        catalog: ModelCatalog,
        windows: ContextWindows | None,
        on_summary_rejected: Callable[[str], None] | None = None,
    ) -> None:
        self._settings = settings
        self._on_summary_rejected = on_summary_rejected
        self._sessions = sessions
        self._catalog = catalog
        self._windows = windows

    async def build(
        self, run: RunWork, system: str, tools: list[dict[str, Any]], tool_costs: list[int] | None = None
    ) -> Context:
        """The bounded context. A summary is made under the session's summary lock and stored at once,
        so that concurrent queries on the session wait for it and reuse it instead of making their own."""
        budget = (
            await self._windows.budget(run.model)
            if self._windows is not None
            else self._settings.orchestrator_context_max_tokens
        )
        builder = ContextBuilder(
            run.orchestrator.llm,
            max_tokens=budget,
            recent_turns=self._settings.orchestrator_recent_turns,
            summarizer_model=self._catalog.summarizer_model,
            on_rejected=self._on_summary_rejected,
            window_bound=self._windows is not None and await self._windows.window_bound(run.model),
        )
        if tool_costs is None:
            tool_costs = [count_tool(tool) for tool in tools]
        query = run.request.query
        if not run.turns or not builder.wants_summary(
            system=system, turns=run.turns, query=query, tool_costs=tool_costs
        ):
            context, spent = await builder.build(
                system=system, turns=run.turns, query=query, tools=tools, tool_costs=tool_costs
            )
            run.budget.add_tokens(spent)
            return context
        session_id = run.recorder.session_id
        async with self._sessions.summary_lock(session_id):
            run.turns = (
                await self._sessions.load(session_id, Scope.of(run.principal)) or run.turns
            )  # with the summary another query made
            context, spent = await builder.build(
                system=system, turns=run.turns, query=query, tools=tools, tool_costs=tool_costs
            )
            if context.summary_turn is not None:
                seen = sum(1 for turn in run.turns if turn.get("decision") == "summary")
                if not await self._sessions.append_summary(session_id, context.summary_turn, seen):
                    logger.info(
                        "session %s: a summary of this span was stored first; this one is not", session_id
                    )
        run.budget.add_tokens(spent)
        return context
