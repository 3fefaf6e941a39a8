"""The one way into a query: :meth:`QueryEntry.submit`, called by every door.

A door translates its request into a :class:`protocol.QueryRequest`, calls ``submit`` and
translates what comes back (:mod:`master.query.events`) into its own wire form. The doors today:
``POST /query`` as JSON and as Server-Sent Events (:mod:`master.routes.query`) and WebSocket
``query`` frames (:mod:`master.gateway.hub`); MCP, A2A and the OpenAI-compatible API
(:mod:`master.doors`). Everything a query needs whatever its door lives here, once:

- **admission**: the master's cap, the asker's tenant's cap and the draining refusal
  (:class:`QueryRefused`, raised by ``submit`` before anything runs);
- **the asker** (:class:`master.auth.Principal`, the door passes
  :func:`master.auth.principal_of` of its request): its tenant owns the sessions the query
  starts, and only its tenant's sessions and agents (and the shared agents) are on offer to it;
- **the run** (:meth:`master.query.service.QueryService.run`: budgets, the session, the
  orchestrator, the turns stored), started as a task the entry owns, so it outlives its door: a
  client that disconnects mid-run stops hearing about it, while the run goes on to its end
  (bounded by the query's budgets and timeouts), the session keeps every turn and no tool call is
  left waiting;
- **events** for a door that streams (:meth:`QueryRun.events`);
- **the outcome**: every admitted query ends as one :class:`protocol.QueryResponse`, a refusal by
  the service (``unknown_session``, ``llm_timeout``...) and a bug (``internal_error``) included.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from master.agents.calls import ToolRun
from master.agents.directory import AgentDirectory
from master.agents.tool_calls import ToolCaller
from master.agents.toolbox import Toolbox, function_name
from master.auth import DEFAULT_TENANT, Principal, Scope
from master.errors import QueryRejected, SessionStoreUnavailable
from master.query.admission import Admission
from master.query.events import Finished, Progress, QueryEvent, QueryRefused
from master.query.service import QueryService, rejected_response
from master.runs.cancel import CancelRefused, RunCanceller
from master.runs.extras import RunExtras
from master.runs.state import RunState, RunStatus
from master.runs.store import LiveRun, RunStore
from protocol import (
    AgentUsed,
    ErrorCode,
    QueryRequest,
    QueryResponse,
    RunEvent,
    TokenEvent,
    ToolCallEvent,
    ToolProgress,
    ToolProgressEvent,
    ToolResultEvent,
)
from protocol.events import run_paused

logger = logging.getLogger("master.query.entry")

Door = Literal["http", "sse", "websocket", "mcp", "a2a", "openai", "agui", "responses"]
"""Which front door a query came through (in the log line of a failure and the run's task name)."""

Deliver = Callable[[QueryResponse], Awaitable[None]]
"""Sends the outcome to the asker, within the run (see :meth:`QueryEntry.submit`)."""


class ToolRefused(QueryRejected):
    """A direct tool call that was not sent: ``unknown_agent``, ``unknown_tool`` or
    ``invalid_arguments`` (the message names the tool and each offending field)."""


@dataclass(frozen=True, slots=True)
class DirectOutcome:
    """How a direct call held for approval ended, once decided (:meth:`QueryEntry.call_tool`)."""

    decision: Literal["approved", "rejected", "expired"]
    run: ToolRun
    """The call as it went: the agent's result or error when approved; else not sent, with the
    error that says why (refused with the person's reason, or no one decided in time)."""


@dataclass(frozen=True, slots=True)
class OfferedTool:
    """A tool the orchestrator could call now, as a door lists it."""

    name: str
    """The function name the orchestrator gives it (``<agent_id>__<tool>``, see
    :func:`master.agents.toolbox.function_name`)."""
    agent_id: str
    tool_name: str
    description: str
    parameters: dict[str, Any]
    """The JSON Schema of its arguments."""
    annotations: dict[str, Any] | None = None
    """Hints about the tool's behaviour (MCP tool annotations), when the agent gave them."""


class QueryRun:
    """One admitted query, running: await :meth:`result`, or iterate :meth:`events` when streamed."""

    __slots__ = ("_events", "_live", "_task", "_waiter", "direct", "query_id", "run_id")

    def __init__(self, query_id: str, *, streamed: bool, run_id: str = "") -> None:
        self.query_id = query_id
        self.direct: DirectOutcome | None = None
        """Set when the run was a held direct call going on (its answer is the call's)."""
        self.run_id = run_id
        """The run's id (a resumed run keeps the id it had; a continuation found by its calls'
        ids takes its run's id later: the answer's ``run_id`` is the one that holds)."""
        self._events: asyncio.Queue[QueryEvent | asyncio.Future[None] | None] | None = (
            asyncio.Queue() if streamed else None
        )
        self._task: asyncio.Task[QueryResponse] | None = None
        self._live: LiveRun | None = None
        self._waiter: asyncio.Future[QueryResponse] | None = None
        """What the first door that waits awaits: the run settles it as it ends, in its own last
        step (a door wakes one event-loop iteration sooner than through the task's callbacks)."""

    async def result(self) -> QueryResponse:
        """The outcome. A door that stops waiting (it is cancelled) does not stop the run."""
        task = self._task
        assert task is not None
        if task.done():
            return task.result()
        if self._waiter is not None:  # another wait already (or a door that gave up): its own
            return await asyncio.shield(task)
        waiter: asyncio.Future[QueryResponse] = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        return await waiter  # cancelling the door cancels this future, not the run

    def _settle(self, response: QueryResponse | None, error: BaseException | None = None) -> None:
        """Give the waiting door the run's outcome (as ``shield`` would: its answer, its error, or
        its cancellation)."""
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if response is not None:
            waiter.set_result(response)
        elif isinstance(error, asyncio.CancelledError):
            waiter.cancel()
        else:
            waiter.set_exception(error or RuntimeError("the run ended without an answer"))

    async def events(self, *, join_tokens: bool = False) -> AsyncIterator[QueryEvent]:
        """:class:`Progress` events as they happen, then one :class:`Finished` (``submit(stream=True)``).

        Ends without :class:`Finished` when the run was cancelled (the master stopped). With
        ``join_tokens``, the ``token`` events already waiting when one is read come as one (a door
        whose every event costs a store write keeps up with a fast model; nothing waits longer)."""
        queue = self._events
        if queue is None:
            raise RuntimeError("events() needs submit(..., stream=True)")
        carried: QueryEvent | asyncio.Future[None] | None = None
        has_carried = False
        while True:
            if has_carried:
                event, has_carried = carried, False
            else:
                event = await queue.get()
            if join_tokens and isinstance(event, Progress) and isinstance(event.event, TokenEvent):
                texts = [event.event.text]
                while not queue.empty():
                    following = queue.get_nowait()
                    if isinstance(following, Progress) and isinstance(following.event, TokenEvent):
                        texts.append(following.event.text)
                        continue
                    carried, has_carried = following, True
                    break
                if len(texts) > 1:
                    event = Progress(TokenEvent(text="".join(texts)))
            if event is None:
                return
            if isinstance(event, asyncio.Future):  # a mark of :meth:`taken`
                if not event.done():
                    event.set_result(None)
                continue
            yield event
            if isinstance(event, Finished):
                return

    def cancel(self, reason: str | None = None) -> None:
        """Stop the run (a door's client cancelled it): the orchestrator stops where it is, its tool
        calls are abandoned (a result that still comes is discarded) and the turn is not stored.
        With a ``reason`` (a client's cancel of a run this master holds, not yet recorded: see
        :meth:`QueryEntry.cancel` for one by id), the run ends ``cancelled`` and answers
        ``run_cancelled``."""
        if reason is not None and self._live is not None and self._live.cancelled is None:
            self._live.cancelled = reason
        if self._task is not None:
            self._task.cancel()

    def on_done(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when the run has ended (delivered, failed or cancelled)."""
        assert self._task is not None
        self._task.add_done_callback(lambda _: callback())

    def _emit(self, event: RunEvent) -> None:
        assert self._events is not None
        self._events.put_nowait(Progress(event))

    def taken(self) -> asyncio.Future[None]:
        """Done once the reader of :meth:`events` has handled every event emitted before now
        (it asked for the next one): a door that delivers the answer itself sends it after them."""
        assert self._events is not None
        mark: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._events.put_nowait(mark)
        return mark

    def _end(self, event: Finished | None) -> None:
        if self._events is not None:
            self._events.put_nowait(event)


class QueryEntry:
    """Admits, runs and answers queries from every door (see the module docstring)."""

    def __init__(
        self,
        queries: QueryService,
        admission: Admission,
        *,
        agents: AgentDirectory | None = None,
        tools: ToolCaller | None = None,
        runs: RunStore | None = None,
        canceller: RunCanceller | None = None,
    ) -> None:
        self.queries = queries
        self.runs = runs
        self.canceller = canceller
        """Cancels runs by id from any master (:meth:`cancel`); ``None`` where runs are not recorded."""
        self.admission = admission
        self.agents = agents
        self._tools = tools
        self._tasks: set[asyncio.Task[QueryResponse]] = set()

    def submit(
        self,
        request: QueryRequest,
        *,
        door: Door,
        query_id: str | None = None,
        stream: bool = False,
        deliver: Deliver | None = None,
        extras: RunExtras | None = None,
        principal: Principal,
    ) -> QueryRun:
        """Admit ``request`` and start it; the run goes on whatever the door does next.

        Raises :class:`QueryRefused` (``too_many_queries``, ``draining``) when it is not
        admitted, before anything runs. ``query_id`` defaults to a new ``<door>-<hex>`` id;
        ``stream`` makes :meth:`QueryRun.events` available. ``deliver`` (a door that pushes its
        answer, like the WebSocket) is awaited with the outcome before the run gives its slot
        back, so a draining master hands its connections off only once the answers are sent.
        ``extras`` are a door's inputs beyond the protocol's (:class:`master.runs.extras.RunExtras`).
        ``principal`` is who asks (its tenant's cap admits it; see the module docstring); one
        nothing resolved (:data:`~master.auth.ANONYMOUS`) is refused (``unauthorized``).
        """
        check_resolved(principal)
        self.admission.enter(principal.tenant)
        run_id = (extras.run_id if extras is not None else None) or f"run-{secrets.token_hex(16)}"
        run = QueryRun(query_id or f"{door}-{secrets.token_hex(16)}", streamed=stream, run_id=run_id)
        task = asyncio.create_task(
            self._run(request, run, door, deliver, extras, principal), name=f"query {run.query_id} ({door})"
        )
        run._task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return run

    async def _run(
        self,
        request: QueryRequest,
        run: QueryRun,
        door: Door,
        deliver: Deliver | None,
        extras: RunExtras | None,
        principal: Principal,
    ) -> QueryResponse:
        finished: Finished | None = None
        direct = extras is not None and extras.direct
        live = None if direct else self._begin(run, request, extras, principal)
        if live is not None:
            live.task = asyncio.current_task()  # what a cancel from any master cancels
            run._live = live
        try:
            try:
                events = run._emit if run._events is not None else None
                if live is not None and (
                    (events is not None and extras is None) or (extras is not None and extras.announce)
                ):
                    # A stream names its run before the end (SSE header, A2A task), as a background
                    # response does: readable as soon as the service accepts the request (a refusal
                    # leaves no record).
                    live.announce = True
                more: dict[str, Any] = {}
                if extras is not None:
                    more["extras"] = extras
                if live is not None:
                    more["live"] = live
                if direct:
                    response = await self._resume_direct(request, run, principal)
                else:
                    response = await self.queries.run(
                        request, run.query_id, events=events, principal=principal, **more
                    )
            except QueryRejected as exc:
                response = rejected_response(request, run.query_id, exc)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                # Cancelled through DELETE /runs/{run_id} only (not the master stopping): answered.
                if live is None or live.cancelled is None or task is None or task.uncancel() > 0:
                    raise
                response = rejected_response(
                    request,
                    run.query_id,
                    QueryRejected(ErrorCode.RUN_CANCELLED, f"the run was {live.cancelled}"),
                )
            except Exception:  # a bug must not leave the asker waiting, nor answer without a code
                logger.exception("query %s (%s) failed", run.query_id, door)
                response = rejected_response(
                    request,
                    run.query_id,
                    QueryRejected(
                        ErrorCode.INTERNAL_ERROR, "internal error while answering; see the master's log"
                    ),
                )
            if live is not None and not live.accepted:  # refused: no run, nothing of it stored
                response.run_id = None
                live = None
            elif live is not None:
                response.run_id = run.run_id = live.run_id
                assert self.runs is not None
                if live.cancelled is not None:
                    await self.runs.end(live, "cancelled", reason=live.cancelled)
                elif not live.ended:  # written with the session's answer, as a rule
                    await self.runs.end(live, _state_of(response), reason=_reason_of(response))
                live = None
            else:
                response.run_id = run.run_id
            finished = Finished(response)
            paused = run_paused(response) if run._events is not None else None
            if paused is not None:  # what the result says, as an event before it
                run._emit(paused)
            if deliver is not None:
                await deliver(response)
            run._settle(response)
            return response
        except BaseException as exc:
            run._settle(None, exc)
            raise
        finally:
            if live is not None:  # cancelled: no answer
                assert self.runs is not None
                self.runs.abandon(live, "the run was cancelled (its client, or the master stopping)")
            self.admission.leave(principal.tenant)
            run._end(finished)

    async def cancel(self, run_id: str, *, principal: Principal, door: Door = "http") -> dict[str, Any]:
        """Cancel the run ``run_id`` for ``principal``, whichever master holds it and whatever
        door asks (:class:`master.runs.cancel.RunCanceller`: a running run is stopped by its
        master, a paused one ends in the store and can no longer resume, a cancelled one is
        answered again). Returns the run's record as it stands after. Raises
        :class:`~master.runs.cancel.CancelRefused`: ``unknown_run`` (also another tenant's run),
        ``run_not_running`` (it finished), ``session_store_unavailable``."""
        if not principal.resolved:
            raise CancelRefused(
                ErrorCode.UNAUTHORIZED, "no API key was resolved: nothing is cancelled for it"
            )
        if self.canceller is None:
            raise CancelRefused(ErrorCode.UNKNOWN_RUN, f"no run {run_id!r} (runs are not recorded here)")
        return await self.canceller.cancel(run_id, Scope.of(principal), door=door)

    def _begin(
        self, run: QueryRun, request: QueryRequest, extras: RunExtras | None, principal: Principal
    ) -> LiveRun | None:
        runs = self.runs
        if runs is None:
            return None
        tenant = principal.tenant if principal.tenant != DEFAULT_TENANT else None
        live = runs.begin(run.run_id, query_id=run.query_id, session_id=request.session_id, tenant=tenant)
        if extras is not None and extras.resume_run is not None:
            runs.claimed(live, dict(extras.resume_run.record), extras.resume_run.checkpoint)
        return live

    def offered_tools(
        self, allowed: Iterable[str] | None = None, *, principal: Principal
    ) -> list[OfferedTool]:
        """Every tool the orchestrator could call now for ``principal`` (cluster-wide, every
        transport), named as the orchestrator names them; only the agents ``allowed`` when given."""
        assert self.agents is not None, "QueryEntry(agents=...) lists tools"
        toolbox = Toolbox(self.agents.tool_targets(Scope.of(principal), allowed))
        return [
            OfferedTool(
                name,
                agent.agent_id,
                tool.schema.name,
                tool.schema.description,
                tool.schema.parameters,
                tool.schema.annotations,
            )
            for name, (agent, tool) in toolbox.named()
        ]

    async def call_tool(
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

    async def _resume_direct(
        self, request: QueryRequest, run: QueryRun, principal: Principal
    ) -> QueryResponse:
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

    async def aclose(self) -> None:
        """Cancel the runs still in flight (the master stops)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _state_of(response: QueryResponse) -> RunStatus:
    if not response.success:
        return "failed"
    status = response.status
    if status is None or status == "completed":
        return "completed"
    return status


def _reason_of(response: QueryResponse) -> str | None:
    if not response.success:
        return f"{response.error_code}: {response.error}" if response.error_code else response.error
    if response.status == "stopped":
        return f"stopped by {response.stopped_by}"
    return None


def check_resolved(principal: Principal) -> None:
    """Refuse (``unauthorized``) a caller nothing resolved: no door runs anything for it."""
    if not principal.resolved:
        raise QueryRefused(
            ErrorCode.UNAUTHORIZED,
            "no API key was resolved for this request: nothing runs for an anonymous caller",
        )


__all__ = [
    "CancelRefused",
    "DirectOutcome",
    "Door",
    "Finished",
    "OfferedTool",
    "Progress",
    "QueryEntry",
    "QueryEvent",
    "QueryRefused",
    "QueryRun",
    "RunExtras",
    "ToolRefused",
    "check_resolved",
]
