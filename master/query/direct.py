"""A door's direct tool call, without the model: called, or held for a person's approval.

:meth:`DirectCalls.call` is :meth:`master.query.entry.QueryEntry.call_tool` (an MCP or A2A
``tools/call``); a call the approval policy holds waits as a paused run of kind ``direct``, and
once its approval is decided (through any door's :meth:`master.query.verbs.RunVerbs.resume`, or
expired) the approval desk resumes it through the entry, which runs it here
(:meth:`DirectCalls.resume`): once, without the model.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any, Literal

from master.agents.calls import ToolRun
from master.agents.directory import AgentDirectory
from master.agents.tool_calls import ToolCaller
from master.agents.toolbox import function_name
from master.auth import Principal, Scope
from master.errors import QueryRejected, SessionStoreUnavailable
from master.query.admission import Admission
from master.query.events import QueryRefused
from master.query.run import DirectOutcome, QueryRun
from master.query.service import QueryService
from master.runs.state import RunState
from protocol import (
    AgentUsed,
    ErrorCode,
    QueryRequest,
    QueryResponse,
    ToolCallEvent,
    ToolProgress,
    ToolProgressEvent,
    ToolResultEvent,
)

Door = Literal["http", "sse", "websocket", "mcp", "a2a", "openai", "agui", "responses"]
"""Which front door a query came through (in the log line of a failure and the run's task name)."""


class ToolRefused(QueryRejected):
    """A direct tool call that was not sent: ``unknown_agent``, ``unknown_tool`` or
    ``invalid_arguments`` (the message names the tool and each offending field)."""


class DirectCalls:
    """Calls tools directly for the doors, and runs the held ones once decided (module docstring)."""

    def __init__(
        self,
        queries: QueryService,
        admission: Admission,
        *,
        agents: AgentDirectory | None,
        tools: ToolCaller | None,
    ) -> None:
        self.queries = queries
        self.admission = admission
        self.agents = agents
        self._tools = tools

    async def call(
        self,
        agent_id: str,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        door: Door,
        on_progress: Callable[[ToolProgress], None] | None = None,
        principal: Principal,
    ) -> ToolRun | QueryResponse:
        """Call one tool directly, without the model: a door's ``tools/call``.

        Admitted like a query (raises :class:`QueryRefused` before anything runs), checked
        (raises :class:`ToolRefused`: the agent and the tool must be on offer, the arguments must
        fit the tool's schema), then given the approval policy's verdict, the orchestrator's own
        (:class:`master.query.policy.ApprovalPolicy`): a call that needs a person's approval is
        not sent but held (:meth:`QueryService.hold_direct`), and the answer is then a
        ``QueryResponse`` with ``status: "awaiting_approval"`` and its approval, as a held query's;
        once decided (through any door, or expired) the approval desk runs it once and ends the
        run with the call's outcome (:class:`DirectOutcome`). Otherwise the call is sent through
        the same :class:`ToolCaller` as the orchestrator's calls (metrics, trace, call records).
        A tool that fails is a :class:`ToolRun` with ``success`` false and its ``error``.
        Cancelling the caller abandons the call: the dispatcher forgets it and a late result is
        dropped. Another tenant's agent is unknown to ``principal`` (``unknown_agent``), as one
        that does not exist.
        """
        assert self.agents is not None and self._tools is not None, "QueryEntry(agents=, tools=) calls tools"
        check_resolved(principal)
        targets = self.agents.tool_targets(Scope.of(principal), [agent_id])
        if not targets:
            raise ToolRefused(
                ErrorCode.UNKNOWN_AGENT, f"no agent {agent_id!r} with tools is connected or registered"
            )
        agent = targets[0]
        tool = agent.tools.get(tool_name)
        if tool is None:
            raise ToolRefused(
                ErrorCode.UNKNOWN_TOOL,
                f"agent {agent_id!r} has no tool {tool_name!r} (its tools: {', '.join(sorted(agent.tools))})",
            )
        if not isinstance(arguments, dict):
            raise ToolRefused(
                ErrorCode.INVALID_ARGUMENTS, f"arguments of {tool_name!r} must be a JSON object"
            )
        problems = tool.validate(arguments)
        if problems:
            raise ToolRefused(
                ErrorCode.INVALID_ARGUMENTS, f"invalid arguments for {tool_name!r}: " + "; ".join(problems)
            )
        verdict = self.queries.policy.verdict(function_name(agent.agent_id, tool_name), agent.agent_id, tool)
        if verdict == "refuse":
            raise ToolRefused(
                ErrorCode.INVALID_REQUEST,
                f"{agent_id}.{tool_name} requires a person's approval and this master keeps no "
                "approvals to wait for one; it was not run",
            )
        self.admission.enter(principal.tenant)
        try:
            if verdict == "hold":
                query_id = f"{door}-{secrets.token_hex(16)}"
                try:
                    return await self.queries.hold_direct(
                        agent.agent_id, tool, arguments, query_id=query_id, principal=principal
                    )
                except QueryRejected as exc:  # Redis did not answer: nothing was held, nothing ran
                    raise QueryRefused(exc.code, exc.message) from None
            run, _ = await self._tools.run(agent, tool_name, arguments, on_progress=on_progress)
            return run
        finally:
            self.admission.leave(principal.tenant)

    async def resume(self, request: QueryRequest, run: QueryRun, principal: Principal) -> QueryResponse:
        """Go on with a direct call held for approval, every approval decided: run it once when
        approved (with the edited arguments, if any), never when rejected or expired; the answer
        is the call's outcome (also :attr:`QueryRun.direct`), stored in the held call's session.
        Of two resumes one takes the held call; the other is refused ("resumed already")."""
        assert self.agents is not None and self._tools is not None, "QueryEntry(agents=, tools=) calls tools"
        store = self.queries.approvals
        session_id = request.session_id
        assert store is not None and session_id is not None
        state, _ = await self._held(session_id, Scope.of(principal))
        assert state.held is not None  # a direct call's state, one call (checked by _held)
        [held] = state.held.held
        try:
            record = await store.record(held.approval_id, Scope.of(principal)) or {"status": "expired"}
        except SessionStoreUnavailable as exc:
            raise QueryRejected(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
        state = await self.queries.take_direct(session_id)  # the decision stands: take it once
        agent_id, tool_name = str(record.get("agent_id")), str(record.get("tool_name"))
        name = held.name or function_name(agent_id, tool_name)
        edited = record.get("edited_arguments")
        arguments = edited if isinstance(edited, dict) else json.loads(str(held.arguments or "{}"))
        decision: Literal["approved", "rejected", "expired"]
        if record.get("status") == "approved":
            decision = "approved"
            tool_run = await self._run_approved(run, agent_id, tool_name, arguments, principal)
        elif record.get("status") == "rejected":
            decision = "rejected"
            reason = record.get("message") or "no reason given"
            tool_run = ToolRun(
                name,
                agent_id,
                tool_name,
                arguments,
                error=f"a person refused this call; it was not run: {reason}",
            )
        else:
            decision = "expired"
            tool_run = ToolRun(
                name,
                agent_id,
                tool_name,
                arguments,
                error="no one decided on this call in time (its approval expired); it was not run",
            )
        run.direct = DirectOutcome(decision, tool_run)
        await self.queries.record_direct(session_id, tool_run, principal.tenant)
        used = [AgentUsed(agent_id=agent_id, tool_name=tool_name)] if tool_run.dispatched else []
        return QueryResponse(
            query_id=state.query_id or run.query_id,
            session_id=session_id,
            success=tool_run.success,
            answer=_text(tool_run.result) if tool_run.success else None,
            error=tool_run.error,
            status="completed",
            agents_used=used,
        )

    async def _held(self, session_id: str, scope: Scope) -> tuple[RunState, list[Any]]:
        try:
            state, approvals = await self.queries.held_run(session_id, scope)
        except SessionStoreUnavailable as exc:
            raise QueryRejected(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
        if state is None or not state.direct:
            raise QueryRejected(ErrorCode.INVALID_QUERY, "the paused run was resumed already")
        return state, approvals

    async def _run_approved(
        self, run: QueryRun, agent_id: str, tool_name: str, arguments: dict[str, Any], principal: Principal
    ) -> ToolRun:
        """Send an approved direct call, still on offer to its asker and fitting its tool's schema."""
        assert self.agents is not None and self._tools is not None
        name = function_name(agent_id, tool_name)
        targets = self.agents.tool_targets(Scope.of(principal), [agent_id])
        tool = targets[0].tools.get(tool_name) if targets else None
        if tool is None:
            return ToolRun(
                name,
                agent_id,
                tool_name,
                arguments,
                error=f"agent {agent_id!r} no longer offers {tool_name!r}; the approved call was not run",
            )
        problems = tool.validate(arguments)
        if problems:
            return ToolRun(
                name,
                agent_id,
                tool_name,
                arguments,
                error=f"invalid arguments for {tool_name!r}: " + "; ".join(problems),
            )
        labels = {"agent_id": agent_id, "tool_name": tool_name, "function_name": name}
        emit = run._emit if run._events is not None else None
        if emit is not None:
            emit(ToolCallEvent(**labels, arguments=arguments))

        def progress(update: ToolProgress) -> None:
            if emit is not None:
                emit(
                    ToolProgressEvent(
                        call_id=update.call_id, message=update.message, progress=update.progress, **labels
                    )
                )

        tool_run, _ = await self._tools.run(targets[0], tool_name, arguments, on_progress=progress)
        if emit is not None:
            emit(ToolResultEvent(**labels, success=tool_run.success, error=tool_run.error))
        return tool_run


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def check_resolved(principal: Principal) -> None:
    """Refuse (``unauthorized``) a caller nothing resolved: no door runs anything for it."""
    if not principal.resolved:
        raise QueryRefused(
            ErrorCode.UNAUTHORIZED,
            "no API key was resolved for this request: nothing runs for an anonymous caller",
        )
