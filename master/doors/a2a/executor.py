"""The A2A ``AgentExecutor`` of the hub: a message becomes a query or one direct tool call.

- **Text** (every text part, joined): a query through :meth:`QueryEntry.submit` (``door="a2a"``,
  streamed), limited to the endpoint's agent (``allowed_agent_ids=[agent_id]``; the hub's
  endpoint offers every agent). The task's ``contextId`` maps to a hub session
  (:meth:`RedisTaskStore.session_of`): a new context starts one, a known one continues it.
- **A data part** ``{"tool": name, "arguments": {...}}`` (on the hub's endpoint also
  ``"agent_id"``): :meth:`QueryEntry.call_tool`, without the LLM, the arguments validated
  against the tool's schema.

Each step becomes a ``WORKING`` status update (a text part saying what happens and a data part
``{"event": "tool_call" | "tool_progress" | "tool_result" | "step", ...}``), the answer's tokens
chunks of an ``answer`` artifact as the model writes them (``append``; a streaming caller's
only), the answer that artifact (replacing the chunks under the same id), then a terminal state (a blocking ``SendMessage`` of a new task, whose steps no one can
see, gets its task written once, finished: :class:`Updater`): ``COMPLETED``, or ``FAILED`` with the error (the failed tool's
or the query's, its ``error_code`` in the status message's data part). A query the master did
not admit (``too_many_queries``, ``draining``) and a direct call it refused are A2A errors
(:func:`unavailable`, ``InvalidParamsError``): no run started.

A run that waits for a person's approval ends its task ``INPUT_REQUIRED``, naming each call that
waits. A message sent on that task decides them (:class:`~master.query.approvals.ApprovalDesk`):
a data part ``{"approval_id": ..., "decision": "approve" | "reject", "message"?, "arguments"?,
"remember"?}`` per approval, or, when a single one waits, the text ``approve`` or ``reject`` (``reject:
reason``). Once none waits the run resumes on the same task (``WORKING``, then its end); a
decision taken elsewhere (``POST /approvals/{approval_id}``, the expiry sweep) moves the task on
too (:meth:`HubExecutor.run_resumed`), whichever master resumes the run. A resume that fails (the
LLM or an agent down) leaves the task ``INPUT_REQUIRED``, the decisions kept: any message on it
tries again.

``CancelTask`` cancels the task's run through the one cancel of every door
(:mod:`master.doors.a2a.cancels`, :meth:`master.query.entry.QueryEntry.cancel`), on whichever master
holds it: a running run stops (its tool calls are abandoned, their results discarded, nothing is
stored in the session for that turn), a run waiting for approvals ends and can no longer resume;
the run's record says ``cancelled`` and the task ``CANCELED``. A run cancelled through another
door (``DELETE /runs/{run_id}``, a WebSocket ``cancel``...) ends its task ``CANCELED`` too. A
direct call's task (no run) is cancelled where the call runs.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from a2a.helpers import new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Artifact, Message, Part, Role, Task, TaskState
from a2a.utils.errors import InternalError, InvalidParamsError
from pydantic import ValidationError

from master.auth import ANONYMOUS, SYSTEM, Principal, Scope
from master.doors.a2a.endings import as_decision, decisions_in, direct_ending, ending, waiting_session
from master.doors.a2a.updates import Updater, describe, parts_of, status_parts
from master.query.approvals import ApprovalDesk, ApprovalRefused, check_arguments, settled
from master.query.entry import DirectOutcome, QueryEntry, QueryRefused, QueryRun, ToolRefused
from master.query.events import Finished
from master.query.verbs import RunRefused, RunVerbs
from master.runs.a2a_tasks import SCOPE_KEY, STREAMING_KEY, RedisTaskStore, principal_of_call
from protocol import QueryRequest, QueryResponse, TokenEvent, ToolProgress

logger = logging.getLogger("master.doors.a2a")

CANCEL_REASON = "cancelled by a client (A2A CancelTask)"


class ServerUnavailableError(InternalError):
    """The master did not admit the work (``too_many_queries`` or ``draining``): retry later.

    A2A defines no "unavailable" error: this is ``InternalError`` (JSON-RPC -32603, HTTP 500)
    whose message and data (``error_code``, ``retry: true``) say so."""


def unavailable(exc: QueryRefused) -> ServerUnavailableError:
    return ServerUnavailableError(
        message=f"{exc.code}: {exc.message} (retry later)",
        data={"error_code": str(exc.code), "retry": True},
    )


class HubExecutor(AgentExecutor):
    """Runs A2A messages as queries or direct tool calls (module docstring)."""

    def __init__(
        self, entry: QueryEntry, store: RedisTaskStore, approvals: ApprovalDesk | None = None
    ) -> None:
        self._entry = entry
        self._store = store
        self._approvals = approvals
        self._running: dict[str, asyncio.Task[Any] | QueryRun] = {}
        self._abandoned: set[str] = set()

    def abandon(self, task_id: str) -> None:
        """Another master marked ``task_id`` ``CANCELED``: stop its run here, if it runs here."""
        running = self._running.pop(task_id, None)
        if running is not None:
            self._abandoned.add(task_id)
            if isinstance(running, QueryRun):
                running.cancel(CANCEL_REASON)  # a run not recorded yet (else the core stopped it)
            else:
                running.cancel()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        scope = context.call_context.state.get(SCOPE_KEY, "") if context.call_context else ""
        principal = principal_of_call(context.call_context) if context.call_context else ANONYMOUS
        text, data = parts_of(context.message)
        current = context.current_task
        if current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            updater = Updater(event_queue, task_id, context_id)
            await self._decide(context.message, current, updater, principal)
            return
        calls = [item for item in data if isinstance(item, dict) and "tool" in item]
        if not calls and not text:
            raise InvalidParamsError(
                message='send a text part (a question) or a data part {"tool": name, "arguments": {...}}'
            )
        updater = Updater(event_queue, task_id, context_id)
        if context.current_task is None:  # the first event creates the task, already WORKING
            updater.first = [context.message] if context.message is not None else []
            configuration = context.configuration
            updater.quiet = not context.call_context.state.get(STREAMING_KEY, True) and not (
                configuration is not None and configuration.return_immediately
            )
        if calls:
            await self._call(scope, calls[0], updater, principal)
        else:
            await self._ask(scope, text, context_id, updater, principal)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        running = self._running.pop(context.task_id or "", None)
        if isinstance(running, QueryRun):
            running.cancel(CANCEL_REASON)
        elif running is not None:
            running.cancel()
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel(updater.new_agent_message([new_text_part("canceled by the client")]))

    # A text message: a query.

    async def _ask(
        self, scope: str, text: str, context_id: str, updater: Updater, principal: Principal
    ) -> None:
        tenant = principal.tenant
        session_id = await self._store.session_of(context_id, tenant) if context_id else None
        try:
            request = QueryRequest(
                query=text, session_id=session_id, allowed_agent_ids=[scope] if scope else None
            )
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise InvalidParamsError(message=f"the message is not a valid query: {problems}") from None
        try:
            run = self._entry.submit(request, door="a2a", stream=True, principal=principal)
        except QueryRefused as exc:
            raise unavailable(exc) from None
        await self._follow(run, updater, context_id, principal)

    async def _follow(self, run: QueryRun, updater: Updater, context_id: str, principal: Principal) -> None:
        """Hand the run's steps on as ``WORKING`` updates, then end the task as the run ended
        (the session is the context's of ``principal``'s tenant)."""
        self._running[updater.task_id] = run
        updater.run_id = run.run_id
        try:
            await updater.working(None)
            response: QueryResponse | None = None
            async for event in run.events(join_tokens=not updater.quiet):
                if isinstance(event, Finished):
                    response = event.response
                elif isinstance(event.event, TokenEvent):
                    await updater.token(event.event.text)
                elif not updater.quiet:
                    await updater.working(
                        updater.new_agent_message(
                            status_parts(describe(event.event), {"event": event.type, **event.data()})
                        ),
                    )
        except asyncio.CancelledError:
            run.cancel()
            raise
        finally:
            self._running.pop(updater.task_id, None)
        if response is None and self._abandoned_now(updater.task_id):
            await self._canceled(updater)
            return
        if response is None:  # the master stopped under the run
            raise InternalError(message="the master stopped before the query ended")
        if run.direct is not None:  # a direct call held for approval, decided: it ends as the call
            await self._finish_direct(run.direct, updater)
            return
        if response.session_id and response.success:
            await self._store.remember_session(context_id, response.session_id, principal.tenant)
        await self._finish_query(response, updater, principal)

    async def _finish_query(self, response: QueryResponse, updater: Updater, principal: Principal) -> None:
        paused = await self._still_paused(response, Scope.of(principal))
        state, status, details = ending(response, paused=paused)
        if state == TaskState.TASK_STATE_INPUT_REQUIRED and response.session_id:
            await self._store.wait_for_approvals(response.session_id, updater.task_id)
        if state != TaskState.TASK_STATE_COMPLETED:
            await updater.finish(state, updater.new_agent_message(status))
            return
        await updater.finish(
            state, parts=[new_text_part(response.answer or "")], name="answer", metadata=details
        )

    # A message on a task that waits for approvals: decisions.

    async def check_decisions(self, message: Message, context: ServerCallContext) -> None:
        """Before the SDK runs a message on a task that waits for approvals: refuse the decisions
        that cannot be taken (``InvalidParamsError``), so that the task stays as it is (an error
        raised once the task runs would fail it)."""
        if not message.task_id or self._approvals is None:
            return
        stored = await self._store.get(message.task_id, context)
        if stored is not None and stored.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            principal = principal_of_call(context)
            _, decisions = await self._decisions_of(message, stored.task, principal)
            try:  # who approves: refused here, the task stays as it is
                for decision in decisions:
                    await self._approvals.check_decider(decision["approval_id"], principal)
            except ApprovalRefused as exc:
                detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail.get("message"))
                raise InvalidParamsError(message=detail, data={"error_code": str(exc.code)}) from None

    async def _decisions_of(
        self, message: Message | None, task: Task, principal: Principal
    ) -> tuple[str, list[dict[str, Any]]]:
        """The session of a waiting task (the one its status names: a held direct call's own, or
        its context's, for ``principal``'s tenant) and the decisions ``message`` carries, checked
        in ``principal``'s scope (an administrator's: every tenant's)."""
        desk = self._approvals
        assert desk is not None
        session_id = waiting_session(task) or (
            await self._store.session_of(task.context_id, principal.tenant) if task.context_id else None
        )
        scope = Scope.of(principal)
        try:
            pending = await desk.pending(session_id, scope) if session_id else []
            if session_id is not None and not pending and await desk.paused(session_id, scope):
                return session_id, []  # every call decided, the resume failed: try again
            if session_id is None or not pending:
                raise InvalidParamsError(message="no approval of this task waits for a decision any more")
            text, data = parts_of(message)
            decisions = decisions_in(text, data, pending)
            for decision in decisions:
                if decision["decision"] == "approve" and decision.get("arguments") is not None:
                    check_arguments(await desk.record(decision["approval_id"], scope), decision["arguments"])
        except ApprovalRefused as exc:
            detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail.get("message"))
            raise InvalidParamsError(message=detail, data={"error_code": str(exc.code)}) from None
        return session_id, decisions

    async def _decide(
        self, message: Message | None, task: Task, updater: Updater, principal: Principal
    ) -> None:
        """Take the decisions of a message on a waiting task (checked already:
        :meth:`check_decisions`), then go on with the run if none waits any more."""
        desk = self._approvals
        if desk is None:
            raise InvalidParamsError(message="approvals are not kept on this master")
        context_id = task.context_id
        session_id, decisions = await self._decisions_of(message, task, principal)
        await self._store.claim_waiting(session_id)  # this task goes on here, not in run_resumed
        verbs = RunVerbs(self._entry, desk)
        try:  # a decision taken meanwhile elsewhere stands
            if decisions:
                run_id = await verbs.run_of(decisions[0]["approval_id"], principal)
                started = await verbs.resume(
                    run_id,
                    [as_decision(d) for d in decisions],
                    principal,
                    door="a2a",
                    stream=True,
                    tell=False,
                    decided_stands=True,
                )
            else:  # every call decided, the resume failed: try again
                started = await desk.start_resume(
                    session_id, Scope.of(principal), door="a2a", stream=True, tell=False
                )
        except (RunRefused, ApprovalRefused) as exc:
            raise InternalError(message=str(exc), data={"error_code": str(exc.code)}) from None
        except QueryRefused as exc:
            raise unavailable(exc) from None
        if isinstance(started, QueryResponse):  # approvals still wait, or another decision resumed it
            await self._finish_query(started, updater, principal)
            return
        await self._follow(started, updater, context_id, principal)

    async def _still_paused(self, response: QueryResponse, scope: Scope) -> bool:
        """A failed run whose decisions stand and which can be resumed (its resume failed: the
        LLM or an agent was down), rather than a run that ended."""
        if response.success or not response.session_id or self._approvals is None:
            return False
        try:
            return await self._approvals.paused(response.session_id, scope)
        except ApprovalRefused:
            return False

    async def run_resumed(
        self, session_id: str, response: QueryResponse, direct: DirectOutcome | None = None
    ) -> None:
        """A run resumed by a decision taken elsewhere ended (:attr:`ApprovalDesk.listeners`):
        the task that waited on it ends as the run did (or waits again, for its next approvals);
        a held direct call's task ends as the call did (``direct``)."""
        task_id = await self._store.claim_waiting(session_id)
        if task_id is None:
            return
        response = settled(session_id, response)
        parts: list[Part] | None = None
        if direct is not None:
            state, status, parts, details = direct_ending(direct)
        else:
            state, status, details = ending(
                response, paused=await self._still_paused(response, Scope.of(SYSTEM))
            )
            if state == TaskState.TASK_STATE_COMPLETED:
                parts = [new_text_part(response.answer or "")]
        if state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await self._store.wait_for_approvals(session_id, task_id)

        def change(task: Task) -> None:
            message = Message(
                role=Role.ROLE_AGENT,
                task_id=task.id,
                context_id=task.context_id,
                message_id=str(uuid.uuid4()),
                parts=status,
            )
            task.status.state = state
            task.status.message.CopyFrom(message)
            task.status.timestamp.GetCurrentTime()
            if parts is not None:
                name = "result" if direct is not None else "answer"
                artifact = Artifact(artifact_id=str(uuid.uuid4()), name=name, parts=parts)
                artifact.metadata.update(details)
                task.artifacts.append(artifact)

        await self._store.change(task_id, change)

    # A data part: one direct tool call.

    async def _call(self, scope: str, call: dict[str, Any], updater: Updater, principal: Principal) -> None:
        agent_id = scope or call.get("agent_id")
        tool, arguments = call.get("tool"), call.get("arguments", {})
        if not isinstance(agent_id, str) or not agent_id:
            raise InvalidParamsError(
                message='on the hub\'s endpoint a direct call names its agent: {"agent_id": ..., "tool": ..., "arguments": {...}}'
            )
        if not isinstance(tool, str) or not tool:
            raise InvalidParamsError(message="'tool' must be the name of one of the agent's tools (a string)")
        if not isinstance(arguments, dict):
            raise InvalidParamsError(message="'arguments' must be an object")
        label = f"{agent_id}.{tool}"
        progress: asyncio.Queue[ToolProgress] = asyncio.Queue()
        await updater.working(
            updater.new_agent_message(
                status_parts(
                    f"calling {label}",
                    {"event": "tool_call", "agent_id": agent_id, "tool_name": tool, "arguments": arguments},
                )
            )
        )
        pending = asyncio.create_task(
            self._entry.call_tool(
                agent_id, tool, arguments, door="a2a", on_progress=progress.put_nowait, principal=principal
            ),
            name=f"a2a call {label}",
        )
        self._running[updater.task_id] = pending
        getter: asyncio.Task[ToolProgress] | None = None
        try:
            while True:
                getter = asyncio.create_task(progress.get())
                done, _ = await asyncio.wait({pending, getter}, return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    break
                await self._progress(updater, agent_id, tool, getter.result())
            getter.cancel()
            if pending.cancelled() and self._abandoned_now(updater.task_id):
                await self._canceled(updater)
                return
            while not progress.empty():
                await self._progress(updater, agent_id, tool, progress.get_nowait())
            try:
                outcome = pending.result()
            except QueryRefused as exc:
                raise unavailable(exc) from None
            except ToolRefused as exc:
                raise InvalidParamsError(message=exc.message, data={"error_code": str(exc.code)}) from None
        except asyncio.CancelledError:
            pending.cancel()
            if getter is not None:
                getter.cancel()
            raise
        finally:
            self._running.pop(updater.task_id, None)
        if isinstance(outcome, QueryResponse):  # held for a person's approval: INPUT_REQUIRED
            await self._finish_query(outcome, updater, principal)
            return
        await self._finish_direct(DirectOutcome("approved", outcome), updater)

    @staticmethod
    async def _finish_direct(outcome: DirectOutcome, updater: Updater) -> None:
        """End a direct call's task as the call ended (:func:`direct_ending`)."""
        state, status, parts, details = direct_ending(outcome)
        if parts is not None:  # completed: the result is the artifact
            await updater.finish(state, parts=parts, name="result", metadata=details)
        else:
            await updater.finish(state, updater.new_agent_message(status))

    @staticmethod
    async def _canceled(updater: Updater) -> None:
        """End a run another master canceled: the store already says ``CANCELED`` (this write
        loses to it, and the SDK hands that state to this master's subscribers)."""
        await updater.cancel(updater.new_agent_message([new_text_part("canceled by the client")]))

    def _abandoned_now(self, task_id: str) -> bool:
        if task_id in self._abandoned:
            self._abandoned.discard(task_id)
            return True
        return False

    @staticmethod
    async def _progress(updater: Updater, agent_id: str, tool: str, progress: ToolProgress) -> None:
        if updater.quiet:
            return
        data = {"event": "tool_progress", **progress.model_dump(exclude={"type"}), "agent_id": agent_id}
        await updater.working(
            updater.new_agent_message(
                status_parts(
                    f"{agent_id}.{tool}: {progress.message or 'working'}", {**data, "tool_name": tool}
                )
            ),
        )


__all__ = ["HubExecutor", "ServerUnavailableError", "unavailable"]
