"""The MCP door's approval dialogue: an ``ask`` whose run waits for a person asks the client's user.

A 2025 client that can elicit is asked within the call (one form per approval); a 2026 client
gets an ``input_required`` result and retries ``ask`` with its user's answers, keyed by
``approval_id``. Either way the answers become the run's decisions
(:class:`~master.runs.decisions.Approve`, :class:`~master.runs.decisions.Reject`), taken through
the run's verb (:meth:`master.query.verbs.RunVerbs.resume`) as every door's are: who may decide,
exactly once, then the run goes on and the door follows it. A question the user dismissed waits.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from master.auth import ANONYMOUS, Principal, Scope, principal_of
from master.doors.mcp.tools import (
    DECISION_SCHEMA,
    answer_result,
    approval_question,
    input_required,
    refused_result,
    run_result,
)
from master.query.approvals import ApprovalDesk, ApprovalRefused, settled
from master.query.entry import QueryEntry, QueryRun
from master.query.events import QueryRefused
from master.query.verbs import RunRefused, RunVerbs
from master.runs.decisions import Approve, Reject
from protocol import ErrorCode, QueryResponse

logger = logging.getLogger("master.doors.mcp")

MAX_APPROVAL_ROUNDS = 16
"""Rounds of approvals one ``ask`` asks its client about before answering with what still waits."""


class ApprovalDialogue:
    """The approval rounds of an ``ask`` call (module docstring); mixed into the MCP door."""

    entry: QueryEntry
    _approvals: ApprovalDesk | None

    async def _follow(self, ctx: ServerRequestContext[Any], run: QueryRun) -> QueryResponse | None:
        raise NotImplementedError

    async def _answer(
        self, ctx: ServerRequestContext[Any], response: QueryResponse
    ) -> types.CallToolResult | types.InputRequiredResult:
        """An ``ask``'s outcome; a run that waits for a person asks the client's user where it can."""
        for _ in range(MAX_APPROVAL_ROUNDS):
            pending = [a for a in response.approvals or [] if a.status == "pending"]
            if response.status != "awaiting_approval" or not pending or not self._can_ask(ctx):
                break
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                return input_required(pending)
            decisions: list[Approve | Reject] = []
            for approval in pending:  # 2025: ask now, within this call
                try:
                    answer = await ctx.session.elicit_form(
                        approval_question(approval).message,
                        DECISION_SCHEMA,
                        related_request_id=ctx.request_id,
                    )
                except MCPError as exc:
                    logger.info("MCP client did not answer approval %s: %s", approval.approval_id, exc)
                    answer = None
                decision = _decision(approval.approval_id, answer) if answer is not None else None
                if decision is None:  # dismissed: it waits (the answers given are taken)
                    kept = await self._resume(ctx, approval.approval_id, decisions) if decisions else None
                    return kept if isinstance(kept, types.CallToolResult) else answer_result(response)
                decisions.append(decision)
            followed = await self._resume(ctx, pending[0].approval_id, decisions)
            if isinstance(followed, types.CallToolResult):
                return followed
            response = followed
        return answer_result(response)

    def _can_ask(self, ctx: ServerRequestContext[Any]) -> bool:
        if self._approvals is None:
            return False
        asks = types.ClientCapabilities(elicitation=types.ElicitationCapability())
        if not ctx.session.check_client_capability(asks):
            return False
        return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS or ctx.session.can_send_request

    async def _answered(
        self, ctx: ServerRequestContext[Any], answers: types.InputResponses
    ) -> types.CallToolResult | types.InputRequiredResult:
        """A 2026 client retried ``ask`` with its user's answers, keyed by ``approval_id``."""
        desk = self._approvals
        assert desk is not None
        scope = Scope.of(principal_of_request(ctx))  # another tenant's approval is unknown
        sessions: set[str] = set()
        for approval_id, answer in answers.items():
            if not isinstance(answer, types.ElicitResult):
                return refused_result(
                    ErrorCode.INVALID_ARGUMENTS.value,
                    f"the answer for {approval_id!r} is not an elicitation result",
                )
            try:
                sessions.add(str((await desk.record(approval_id, scope))["session_id"]))
            except ApprovalRefused as exc:
                return refused_result(exc.code.value, str(exc))
        if len(sessions) != 1:
            return refused_result(
                ErrorCode.INVALID_ARGUMENTS.value,
                "the answers name the approvals of several runs: answer one run's",
            )
        decisions: list[Approve | Reject] = []
        for approval_id, answer in answers.items():
            assert isinstance(answer, types.ElicitResult)
            decision = _decision(approval_id, answer)
            if decision is not None:  # dismissed: it waits
                decisions.append(decision)
        followed = await self._resume(ctx, next(iter(answers)), decisions)
        if isinstance(followed, types.CallToolResult):
            return followed
        return await self._answer(ctx, followed)

    async def _resume(
        self, ctx: ServerRequestContext[Any], approval_id: str, decisions: list[Approve | Reject]
    ) -> QueryResponse | types.CallToolResult:
        """The run of ``approval_id`` resumed with the user's ``decisions`` (the run's verb,
        :meth:`RunVerbs.resume`): a decision taken meanwhile (or an expiry) stands and is not an
        error; any other refusal is the call's result (``forbidden`` when the key may not decide,
        ``unknown_approval`` for another tenant's)."""
        assert self._approvals is not None
        principal = principal_of_request(ctx)
        verbs = RunVerbs(self.entry, self._approvals)
        started: QueryRun | QueryResponse
        try:
            if decisions:
                run_id = await verbs.run_of(approval_id, principal)
                started = await verbs.resume(
                    run_id, decisions, principal, door="mcp", stream=True, tell=False, decided_stands=True
                )
            else:  # every question dismissed: the round as it stands, nothing decided
                record = await self._approvals.record(approval_id, Scope.of(principal))
                started = await self._approvals.start_resume(
                    str(record["session_id"]), Scope.of(principal), door="mcp", stream=True, tell=False
                )
        except (RunRefused, ApprovalRefused) as exc:
            return refused_result(exc.code.value, str(exc))
        except QueryRefused as exc:
            return refused_result(exc.code.value, exc.message)
        if isinstance(started, QueryResponse):
            return started
        response = await self._follow(ctx, started)
        if response is None:
            return refused_result(ErrorCode.INTERNAL_ERROR.value, "the master stopped before answering")
        if started.direct is not None:  # a held direct call: its answer is the tool's
            return run_result(started.direct.run)  # the decided call: its result, or why it did not run
        return settled(response.session_id or "", response)


def principal_of_request(ctx: ServerRequestContext[Any]) -> Principal:
    """Who sent the MCP request (:func:`master.auth.principal_of` of its HTTP request;
    :data:`~master.auth.ANONYMOUS` without one: fail closed)."""
    scope = getattr(ctx.request, "scope", None)
    return principal_of(scope) if isinstance(scope, dict) else ANONYMOUS


def _decision(approval_id: str, answer: types.ElicitResult) -> Approve | Reject | None:
    """The decision the client's user answered; ``None`` when they dismissed the question."""
    if answer.action == "cancel":
        return None
    content = answer.content or {}
    reason = content.get("message")
    message = reason if isinstance(reason, str) and reason else None
    if answer.action == "decline" or content.get("decision") == "reject":
        if answer.action == "decline" and message is None:
            message = "declined through the MCP client"
        return Reject(approval_id=approval_id, reason=message)
    remember: Literal["session"] | None = "session" if content.get("remember") is True else None
    return Approve(approval_id=approval_id, message=message, remember=remember)
