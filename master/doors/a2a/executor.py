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
see, gets its task written once, finished: :class:`_Updater`): ``COMPLETED``, or ``FAILED`` with the error (the failed tool's
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

from a2a.helpers import new_data_part, new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Artifact, Message, Part, Role, Task, TaskState
from a2a.utils.errors import ContentTypeNotSupportedError, InternalError, InvalidParamsError
from google.protobuf import json_format
from pydantic import ValidationError

from master.auth import ANONYMOUS, SYSTEM, Principal, Scope
from master.query.approvals import ApprovalDesk, ApprovalRefused, check_arguments, settled
from master.query.entry import DirectOutcome, QueryEntry, QueryRefused, QueryRun, ToolRefused
from master.query.events import Finished
from master.query.verbs import RunRefused, RunVerbs
from master.runs.a2a_tasks import RUN_ID_KEY, SCOPE_KEY, STREAMING_KEY, RedisTaskStore, principal_of_call
from master.runs.decisions import Approve, Reject
from protocol import (
    Approval,
    ApprovalRequiredEvent,
    ErrorCode,
    PlanEvent,
    QueryRequest,
    QueryResponse,
    RunEvent,
    RunPausedEvent,
    StepEvent,
    SubtaskStartedEvent,
    TokenEvent,
    ToolCallEvent,
    ToolProgress,
    ToolProgressEvent,
    ToolResultEvent,
    VerdictEvent,
)

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


def _whole(value: Any) -> Any:
    """JSON numbers from a ``google.protobuf.Value`` come back as floats: 2.0 becomes 2 again."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _whole(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole(item) for item in value]
    return value


def _parts(message: Message | None) -> tuple[str, list[Any]]:
    """The text (text parts joined) and the data of ``message``'s parts."""
    if message is None:
        return "", []
    texts: list[str] = []
    data: list[Any] = []
    for part in message.parts:
        if part.HasField("text"):
            texts.append(part.text)
        elif part.HasField("data"):
            data.append(_whole(json_format.MessageToDict(part.data)))
    return "\n".join(texts).strip(), data


def check_parts(message: Message | None) -> None:
    """Refuse a file part (raw bytes or a URL), whatever its media type: the hub reads text and
    data parts only (the SDK refuses a text or data part of a media type the cards do not name)."""
    if message is None:
        return
    for part in message.parts:
        if part.HasField("raw") or part.HasField("url"):
            kind = f"of media type {part.media_type!r}" if part.media_type else "without a media type"
            raise ContentTypeNotSupportedError(
                message=(
                    f"a file part {kind} cannot be read: the hub takes text parts (text/plain) "
                    "and data parts (application/json) only"
                )
            )


def _status(text: str, data: dict[str, Any]) -> list[Part]:
    return [new_text_part(text), new_data_part(data)]


def _describe(event: RunEvent) -> str:
    match event:
        case ToolCallEvent() | ToolProgressEvent() | ToolResultEvent():
            target = f"{event.agent_id}.{event.tool_name}" if event.agent_id else event.tool_name
            if isinstance(event, ToolCallEvent):
                return f"calling {target}"
            if isinstance(event, ToolProgressEvent):
                message = event.message or "working"
                progress = event.progress
                return f"{target}: {message}" + (f" ({progress:.0%})" if progress is not None else "")
            return f"{target} returned" if event.success else f"{target} failed: {event.error}"
        case PlanEvent():
            return f"plan of {len(event.subtasks)} sub-task(s)"
        case SubtaskStartedEvent():
            return f"sub-task {event.index + 1} (attempt {event.attempt}): {event.task}"
        case VerdictEvent():
            return f"{event.role}: {event.verdict} ({event.reason})"
        case StepEvent():
            return f"step {event.step}: {', '.join(event.tool_calls)}"
        case ApprovalRequiredEvent():
            return f"{event.agent_id}.{event.tool_name} waits for approval {event.approval_id}"
        case RunPausedEvent():
            return f"the run waits ({event.status})"
    return event.type


def _result_parts(result: Any) -> list[Part]:
    if isinstance(result, str):
        return [new_text_part(result)]
    return [new_data_part(result)]


class _Updater(TaskUpdater):
    """The SDK's updater, writing as few events as a client can tell apart.

    The first ``WORKING`` creates the task. A blocking ``SendMessage`` of a new task (``quiet``)
    shows no step to anyone (the client learns the task's id from the answer), so its task is
    written once, finished: one store write, not three."""

    first: list[Message] | None = None
    """The new task's history, until the task exists (``None``: it does)."""
    quiet: bool = False
    run_id: str = ""
    """The hub run answering the task (kept in the task's metadata)."""
    answer_id: str = ""
    """The ``answer`` artifact the tokens are streamed into (``""``: none yet); the final answer
    replaces it under the same id, or, when the task ends otherwise, the text streamed so far
    with ``{"partial": true}``."""
    streamed: list[str] | None = None

    async def token(self, text: str) -> None:
        """A token of the answer, as a chunk of the ``answer`` artifact (streaming callers only)."""
        if self.quiet or self.first is not None or not text:
            return
        first = not self.answer_id
        if first:
            self.answer_id = str(uuid.uuid4())
            self.streamed = []
        assert self.streamed is not None
        self.streamed.append(text)
        await self.add_artifact(
            [new_text_part(text)],
            artifact_id=self.answer_id,
            name="answer",
            append=not first,
            last_chunk=False,
        )

    async def working(self, message: Message | None) -> None:
        if self.quiet:
            return
        if self.first is None:
            await self.update_status(TaskState.TASK_STATE_WORKING, message)
            return
        task = new_task(self.task_id, self.context_id, TaskState.TASK_STATE_WORKING, history=self.first)
        self.first = None
        task.status.timestamp.GetCurrentTime()
        if message is not None:
            task.status.message.CopyFrom(message)
        if self.run_id:
            task.metadata.update({RUN_ID_KEY: self.run_id})
        await self.event_queue.enqueue_event(task)

    async def finish(
        self,
        state: TaskState,
        message: Message | None = None,
        *,
        parts: list[Part] | None = None,
        name: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """End the task in ``state``, with an artifact of ``parts`` when given."""
        if self.first is None:
            if parts is None and self.streamed:  # ended without an answer: what was streamed, marked
                parts, name, metadata = [new_text_part("".join(self.streamed))], "answer", {"partial": True}
            if parts is not None:  # replaces the streamed tokens, if any
                await self.add_artifact(
                    parts, artifact_id=self.answer_id or None, name=name, metadata=metadata, last_chunk=True
                )
            await self.update_status(state, message)
            return
        artifacts = None
        if parts is not None:
            artifact = Artifact(artifact_id=str(uuid.uuid4()), name=name, parts=parts)
            if metadata:
                artifact.metadata.update(metadata)
            artifacts = [artifact]
        task = new_task(self.task_id, self.context_id, state, artifacts=artifacts, history=self.first)
        self.first = None
        task.status.timestamp.GetCurrentTime()
        if message is not None:
            task.status.message.CopyFrom(message)
        if self.run_id:
            task.metadata.update({RUN_ID_KEY: self.run_id})
        await self.event_queue.enqueue_event(task)


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
        text, data = _parts(context.message)
        current = context.current_task
        if current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            updater = _Updater(event_queue, task_id, context_id)
            await self._decide(context.message, current, updater, principal)
            return
        calls = [item for item in data if isinstance(item, dict) and "tool" in item]
        if not calls and not text:
            raise InvalidParamsError(
                message='send a text part (a question) or a data part {"tool": name, "arguments": {...}}'
            )
        updater = _Updater(event_queue, task_id, context_id)
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
        self, scope: str, text: str, context_id: str, updater: _Updater, principal: Principal
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

    async def _follow(self, run: QueryRun, updater: _Updater, context_id: str, principal: Principal) -> None:
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
                            _status(_describe(event.event), {"event": event.type, **event.data()})
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

    async def _finish_query(self, response: QueryResponse, updater: _Updater, principal: Principal) -> None:
        paused = await self._still_paused(response, Scope.of(principal))
        state, status, details = _ending(response, paused=paused)
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
        session_id = _waiting_session(task) or (
            await self._store.session_of(task.context_id, principal.tenant) if task.context_id else None
        )
        scope = Scope.of(principal)
        try:
            pending = await desk.pending(session_id, scope) if session_id else []
            if session_id is not None and not pending and await desk.paused(session_id, scope):
                return session_id, []  # every call decided, the resume failed: try again
            if session_id is None or not pending:
                raise InvalidParamsError(message="no approval of this task waits for a decision any more")
            text, data = _parts(message)
            decisions = _decisions(text, data, pending)
            for decision in decisions:
                if decision["decision"] == "approve" and decision.get("arguments") is not None:
                    check_arguments(await desk.record(decision["approval_id"], scope), decision["arguments"])
        except ApprovalRefused as exc:
            detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail.get("message"))
            raise InvalidParamsError(message=detail, data={"error_code": str(exc.code)}) from None
        return session_id, decisions

    async def _decide(
        self, message: Message | None, task: Task, updater: _Updater, principal: Principal
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
                    [_decision(d) for d in decisions],
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
            state, status, parts, details = _direct_ending(direct)
        else:
            state, status, details = _ending(
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

    async def _call(self, scope: str, call: dict[str, Any], updater: _Updater, principal: Principal) -> None:
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
                _status(
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
    async def _finish_direct(outcome: DirectOutcome, updater: _Updater) -> None:
        """End a direct call's task as the call ended (:func:`_direct_ending`)."""
        state, status, parts, details = _direct_ending(outcome)
        if parts is not None:  # completed: the result is the artifact
            await updater.finish(state, parts=parts, name="result", metadata=details)
        else:
            await updater.finish(state, updater.new_agent_message(status))

    @staticmethod
    async def _canceled(updater: _Updater) -> None:
        """End a run another master canceled: the store already says ``CANCELED`` (this write
        loses to it, and the SDK hands that state to this master's subscribers)."""
        await updater.cancel(updater.new_agent_message([new_text_part("canceled by the client")]))

    def _abandoned_now(self, task_id: str) -> bool:
        if task_id in self._abandoned:
            self._abandoned.discard(task_id)
            return True
        return False

    @staticmethod
    async def _progress(updater: _Updater, agent_id: str, tool: str, progress: ToolProgress) -> None:
        if updater.quiet:
            return
        data = {"event": "tool_progress", **progress.model_dump(exclude={"type"}), "agent_id": agent_id}
        await updater.working(
            updater.new_agent_message(
                _status(f"{agent_id}.{tool}: {progress.message or 'working'}", {**data, "tool_name": tool})
            ),
        )


def _direct_ending(outcome: DirectOutcome) -> tuple[TaskState, list[Part], list[Part] | None, dict[str, Any]]:
    """How a direct call's task ends: ``COMPLETED`` with the result as its artifact's parts,
    ``FAILED`` with the tool's error, or ``REJECTED`` when a person refused it or no one decided
    in time (it was not run). Returns the state, the status message's parts, the artifact's parts
    (``None``: no artifact) and the details."""
    run = outcome.run
    label = run.label
    details: dict[str, Any] = {
        "event": "tool_result",
        "agent_id": run.agent_id,
        "tool_name": run.tool_name,
        "success": run.success,
    }
    if run.success:
        return (
            TaskState.TASK_STATE_COMPLETED,
            _status(f"{label} returned", details),
            _result_parts(run.result),
            details,
        )
    details["error"] = run.error
    if outcome.decision in ("rejected", "expired"):
        details["approval"] = outcome.decision
        return (
            TaskState.TASK_STATE_REJECTED,
            _status(f"{label} was not run: {run.error}", details),
            None,
            details,
        )
    return TaskState.TASK_STATE_FAILED, _status(f"{label} failed: {run.error}", details), None, details


def _waiting_session(task: Task) -> str | None:
    """The session a waiting task's status names (the data part :func:`_ending` wrote)."""
    for part in task.status.message.parts:
        if part.HasField("data"):
            session_id = json_format.MessageToDict(part.data).get("session_id")
            if isinstance(session_id, str) and session_id:
                return session_id
    return None


def _ending(response: QueryResponse, *, paused: bool = False) -> tuple[TaskState, list[Part], dict[str, Any]]:
    """How a task ends with ``response``: its state, its status message's parts and the details
    (the answer's artifact metadata when completed). ``paused``: the run failed to resume but
    can be resumed again (the task waits)."""
    details: dict[str, Any] = {
        "query_id": response.query_id,
        "run_id": response.run_id,
        "session_id": response.session_id,
        "agents_used": [used.model_dump() for used in response.agents_used],
    }
    if not response.success and paused:
        details["error_code"] = str(response.error_code) if response.error_code else None
        text = (
            f"the run could not go on ({response.error or 'it failed'}); its decisions stand: send a "
            "message on this task to try again"
        )
        return TaskState.TASK_STATE_INPUT_REQUIRED, _status(text, details), details
    if not response.success:
        details["error_code"] = str(response.error_code) if response.error_code else None
        if response.error_code == ErrorCode.RUN_CANCELLED:  # by any door's cancel, on any master
            return (
                TaskState.TASK_STATE_CANCELED,
                _status(response.error or "the run was cancelled", details),
                details,
            )
        return TaskState.TASK_STATE_FAILED, _status(response.error or "the query failed", details), details
    if response.status == "awaiting_approval":
        # The run waits for a person: INPUT_REQUIRED, naming each call that waits and how it is
        # decided (a message on this task, or POST /approvals/{approval_id} on any master).
        approvals = [approval.model_dump(mode="json") for approval in response.approvals or []]
        waiting = ", ".join(f"{a['agent_id']}.{a['tool_name']} ({a['approval_id']})" for a in approvals)
        how = (
            'reply "approve" or "reject: <reason>"'
            if len([a for a in approvals if a["status"] == "pending"]) == 1
            else 'reply with a data part {"approval_id": ..., "decision": "approve" | "reject"} per call'
        )
        return (
            TaskState.TASK_STATE_INPUT_REQUIRED,
            _status(
                f"waiting for a person to approve: {waiting}; {how} on this task, "
                "or decide with POST /approvals/{approval_id}",
                {**details, "approvals": approvals},
            ),
            details,
        )
    return TaskState.TASK_STATE_COMPLETED, [new_text_part(response.answer or "")], details


_DECISION_FIELDS = frozenset({"approval_id", "decision", "message", "arguments", "remember"})


def _decisions(text: str, data: list[Any], pending: list[Approval]) -> list[dict[str, Any]]:
    """The decisions a message on a waiting task carries (module docstring), each checked."""
    waiting = {a.approval_id for a in pending}
    given = [item for item in data if isinstance(item, dict) and "approval_id" in item]
    if not given:
        word, _, reason = text.partition(":")
        word = word.strip().lower()
        if word not in ("approve", "reject"):
            raise InvalidParamsError(
                message=(
                    f"this task waits for approvals ({', '.join(sorted(waiting))}): send a data part "
                    '{"approval_id": ..., "decision": "approve" | "reject"} for each, or the text '
                    '"approve" or "reject: <reason>" when a single one waits'
                )
            )
        if len(pending) > 1:
            raise InvalidParamsError(
                message=(
                    f"{len(pending)} approvals wait ({', '.join(sorted(waiting))}): decide each with a "
                    'data part {"approval_id": ..., "decision": "approve" | "reject"}'
                )
            )
        decision: dict[str, Any] = {"approval_id": pending[0].approval_id, "decision": word}
        if reason.strip():
            decision["message"] = reason.strip()
        return [decision]
    for item in given:
        unknown = sorted(set(item) - _DECISION_FIELDS)
        if unknown:
            raise InvalidParamsError(
                message=f"unknown field(s) {', '.join(map(repr, unknown))} in a decision "
                f"(it takes {', '.join(sorted(_DECISION_FIELDS))})"
            )
        if item["approval_id"] not in waiting:
            raise InvalidParamsError(
                message=f"approval {item['approval_id']!r} does not wait on this task "
                f"(these do: {', '.join(sorted(waiting))})"
            )
        if item.get("decision") not in ("approve", "reject"):
            raise InvalidParamsError(message='\'decision\' must be "approve" or "reject"')
        if item.get("message") is not None and not isinstance(item["message"], str):
            raise InvalidParamsError(message="'message' must be a string")
        if item.get("arguments") is not None and not isinstance(item["arguments"], dict):
            raise InvalidParamsError(message="'arguments' must be an object")
        if item.get("remember") not in (None, "session") or (
            item.get("remember") is not None and item["decision"] != "approve"
        ):
            raise InvalidParamsError(message='\'remember\' may only be "session", with decision "approve"')
    return given


__all__ = ["HubExecutor", "ServerUnavailableError", "unavailable"]


def _decision(decision: dict[str, Any]) -> Approve | Reject:
    """A decision a message carries, as the run's verb takes it."""
    if decision["decision"] == "approve":
        return Approve(
            approval_id=decision["approval_id"],
            arguments=decision.get("arguments"),
            message=decision.get("message"),
            remember=decision.get("remember"),
        )
    return Reject(approval_id=decision["approval_id"], reason=decision.get("message"))
