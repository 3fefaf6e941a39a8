"""The run's events (:mod:`master.query.events`) as AG-UI events (:mod:`ag_ui.core`).

One :class:`RunEvents` per run turns each :class:`~master.query.events.Progress` and the final
:class:`~master.query.events.Finished` into AG-UI events, keeping the streams well formed (a text
message or a step is closed before the next thing starts):

- ``step`` (the model chose tools): ``STEP_FINISHED`` of the step before, ``STEP_STARTED``;
- ``token``: ``TEXT_MESSAGE_START`` (once per message), ``TEXT_MESSAGE_CONTENT``;
- ``tool_call``: ``TOOL_CALL_START``, ``TOOL_CALL_ARGS``, ``TOOL_CALL_END``; ``tool_result``:
  ``TOOL_CALL_RESULT``;
- ``approval_required`` (a call held for a person): its ``TOOL_CALL_*`` events, the call's id
  being the approval's (:func:`~master.doors.agui.wire.tool_call_id`); when the run resumes, the
  call's ``TOOL_CALL_RESULT`` names that id (its start is not sent again, as the spec says);
- any other step (``tool_progress``...): a ``CUSTOM`` event ``openagent.<event>``;
- the outcome: the answer's text not streamed yet, a ``STATE_SNAPSHOT`` (the client's state with
  the hub's under ``openagent``), then ``RUN_FINISHED``: ``interrupt`` with one interrupt per
  approval that waits, ``success`` (with ``pendingToolCallIds`` for the front end's own tools),
  or ``RUN_ERROR`` for a failed run.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from master.agents.toolbox import function_name
from master.doors.agui.wire import interrupt, tool_call_id
from master.query.events import Finished, Progress, QueryEvent
from protocol import Approval, ApprovalRequiredEvent, QueryResponse


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


class RunEvents:
    """Translates one run's events (module docstring)."""

    def __init__(
        self, thread_id: str, run_id: str, state: Any = None, resumed: Sequence[Approval] = ()
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self._state = state
        self._text: str | None = None
        """The id of the text message being written, if any."""
        self._written: list[str] = []
        """The text of the current round (a tool round starts a new one)."""
        self._step: str | None = None
        self._calls: dict[str, str] = {}
        """The hub's call ids → the toolCallIds sent."""
        self._unanswered: dict[tuple[Any, Any], str] = {}
        """The toolCallIds of the calls started last, by agent and tool (a result without an id)."""
        self._held = {approval.approval_id for approval in resumed}
        self._resumed = list(resumed)
        """Approvals decided before this run, whose calls it runs (or refuses) now."""

    def translate(self, event: QueryEvent) -> Iterator[BaseEvent]:
        if isinstance(event, Finished):
            yield from self.finish(event.response)
        else:
            yield from self.progress(event)

    def progress(self, event: Progress) -> Iterator[BaseEvent]:
        typed, kind = event.event, event.type
        data = typed.model_dump(mode="json", exclude={"type"}, fallback=str)
        if kind == "token":
            text = str(data.get("text") or "")
            if not text:
                return
            if self._text is None:
                self._text = _id("msg")
                yield TextMessageStartEvent(message_id=self._text, role="assistant")
            self._written.append(text)
            yield TextMessageContentEvent(message_id=self._text, delta=text)
        elif kind == "step":
            yield from self._end_text()
            yield from self._end_step()
            self._written.clear()
            self._step = f"step {data.get('step')}"
            yield StepStartedEvent(step_name=self._step)
        elif kind == "tool_call":
            yield from self._end_text()
            held = self._resumed_call(data)
            call_id = str(data.get("call_id") or _id("call"))
            sent = call_id if held is None else tool_call_id(held.approval_id)
            self._calls[call_id] = self._unanswered[_key(data)] = sent
            if held is None:  # else started in the interrupted run: its result only
                yield from self._call(call_id, _name(data), data.get("arguments"))
        elif kind == "tool_result":
            yield from self._end_text()
            answered = (
                self._calls.get(str(data["call_id"]))
                if data.get("call_id")
                else self._unanswered.pop(_key(data), None)
            )
            if answered is None:
                held = self._resumed_call(data)
                if held is not None:
                    answered = tool_call_id(held.approval_id)
                else:  # refused before it started (a bad name or arguments): started now
                    answered = _id("call")
                    yield from self._call(answered, _name(data), None)
            content = data.get("result") if data.get("success") else f"error: {data.get('error')}"
            yield ToolCallResultEvent(
                message_id=_id("result"), tool_call_id=answered, content=_text(content), role="tool"
            )
        elif kind == "run_paused":  # said by RUN_FINISHED's interrupts
            return
        elif isinstance(typed, ApprovalRequiredEvent):
            yield from self._end_text()
            yield from self._held_call(Approval.model_validate(data))
        else:
            yield CustomEvent(name=f"openagent.{kind}", value=data)

    def finish(self, response: QueryResponse) -> Iterator[BaseEvent]:
        """The run's end (module docstring)."""
        if not response.success:
            yield from self._end_text()
            yield from self._end_step()
            yield RunErrorEvent(
                message=response.error or "the query failed",
                code=str(response.error_code) if response.error_code else None,
            )
            return
        pending = [a for a in response.approvals or [] if a.status == "pending"]
        streamed = "".join(self._written)
        final = "" if pending else response.answer or ""  # waiting: the interrupts say it
        rest = final[len(streamed) :] if final.startswith(streamed) else ("" if streamed else final)
        if rest:
            if self._text is None:
                self._text = _id("msg")
                yield TextMessageStartEvent(message_id=self._text, role="assistant")
            yield TextMessageContentEvent(message_id=self._text, delta=rest)
        yield from self._end_text()
        for approval in pending:
            yield from self._held_call(approval)
        client_calls = response.tool_calls or [] if response.status == "awaiting_tool_results" else []
        for call in client_calls:
            yield from self._call(call.id, call.name, call.arguments)
        yield from self._end_step()
        yield StateSnapshotEvent(snapshot=self.state(response))
        result = {"answer": response.answer, "sessionId": response.session_id, "runId": response.run_id}
        if pending:
            outcome: Any = RunFinishedInterruptOutcome(interrupts=[interrupt(a) for a in pending])
            result = {"sessionId": response.session_id, "runId": response.run_id}
        elif response.status == "awaiting_approval":  # a plan that waits: not answerable here
            yield RunErrorEvent(
                message="the run waits for its plan's approval, which this door does not take; "
                "ask without plan mode",
                code="invalid_query",
            )
            return
        else:
            outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=[c.id for c in client_calls] or None)
        yield RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, result=result, outcome=outcome)

    def state(self, response: QueryResponse) -> Any:
        """The client's state, with the hub's view of the thread under ``openagent``."""
        hub = {
            "sessionId": response.session_id,
            "runId": response.run_id,
            "status": response.status or "completed",
            "stoppedBy": response.stopped_by,
            "steps": response.steps,
            "agentsUsed": [used.model_dump(mode="json") for used in response.agents_used],
            "usage": response.usage.model_dump(mode="json") if response.usage else None,
            "approvals": [a.model_dump(mode="json") for a in response.approvals or []],
        }
        base = self._state if isinstance(self._state, dict) else {}
        return {**base, "openagent": hub}

    def _held_call(self, approval: Approval) -> Iterator[BaseEvent]:
        if approval.approval_id in self._held:
            return
        self._held.add(approval.approval_id)
        name = function_name(approval.agent_id, approval.tool_name)
        yield from self._call(tool_call_id(approval.approval_id), name, approval.arguments)

    def _resumed_call(self, data: dict[str, Any]) -> Approval | None:
        """The decided approval whose call this is (the first of its agent and tool not matched)."""
        for approval in self._resumed:
            if (approval.agent_id, approval.tool_name) == (data.get("agent_id"), data.get("tool_name")):
                self._resumed.remove(approval)
                return approval
        return None

    def _call(self, call_id: str, name: str, arguments: Any) -> Iterator[BaseEvent]:
        yield ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name)
        args = arguments if isinstance(arguments, str) else json.dumps(arguments or {}, default=str)
        if args:
            yield ToolCallArgsEvent(tool_call_id=call_id, delta=args)
        yield ToolCallEndEvent(tool_call_id=call_id)

    def _end_text(self) -> Iterator[BaseEvent]:
        if self._text is not None:
            yield TextMessageEndEvent(message_id=self._text)
            self._text = None

    def _end_step(self) -> Iterator[BaseEvent]:
        if self._step is not None:
            yield StepFinishedEvent(step_name=self._step)
            self._step = None


def _name(data: dict[str, Any]) -> str:
    agent_id, tool_name = data.get("agent_id"), str(data.get("tool_name"))
    return function_name(str(agent_id), tool_name) if agent_id else tool_name


def _key(data: dict[str, Any]) -> tuple[Any, Any]:
    return data.get("agent_id"), data.get("tool_name")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
