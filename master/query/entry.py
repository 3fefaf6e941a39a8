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

What a door holds of a run is a :class:`master.query.run.QueryRun`; a door's direct tool call
(:meth:`QueryEntry.call_tool`) is :class:`master.query.direct.DirectCalls`'s.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from master.agents.calls import ToolRun
from master.agents.directory import AgentDirectory
from master.agents.tool_calls import ToolCaller
from master.agents.toolbox import Toolbox
from master.auth import DEFAULT_TENANT, Principal, Scope
from master.errors import QueryRejected
from master.query.admission import Admission
from master.query.direct import DirectCalls, Door, ToolRefused, check_resolved
from master.query.events import Finished, Progress, QueryEvent, QueryRefused
from master.query.run import DirectOutcome, QueryRun
from master.query.service import QueryService, rejected_response
from master.runs.cancel import CancelRefused, RunCanceller
from master.runs.extras import RunExtras
from master.runs.state import RunStatus
from master.runs.store import LiveRun, RunStore
from protocol import ErrorCode, QueryRequest, QueryResponse, ToolProgress
from protocol.events import run_paused

logger = logging.getLogger("master.query.entry")

Deliver = Callable[[QueryResponse], Awaitable[None]]
"""Sends the outcome to the asker, within the run (see :meth:`QueryEntry.submit`)."""


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
        self._direct = DirectCalls(queries, admission, agents=agents, tools=tools)
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
                    response = await self._direct.resume(request, run, principal)
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
        """Call one tool directly, without the model: a door's ``tools/call``
        (:meth:`master.query.direct.DirectCalls.call` says how it is admitted, checked and held)."""
        return await self._direct.call(
            agent_id, tool_name, arguments, door=door, on_progress=on_progress, principal=principal
        )

    async def aclose(self) -> None:
        """Cancel the runs still in flight (the master stops)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


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
