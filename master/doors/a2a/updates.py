"""What an A2A task shows of its run: the message parts it reads, the status updates it writes.

:class:`Updater` writes a task's ``WORKING`` updates (a text part and a data part per step, the
answer's tokens as ``append`` chunks of the ``answer`` artifact) and its terminal state; a blocking
``SendMessage`` of a new task gets its task written once, finished.
"""

from __future__ import annotations

import uuid
from typing import Any

from a2a.helpers import new_data_part, new_task, new_text_part
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Artifact, Message, Part, Task, TaskState
from a2a.utils.errors import ContentTypeNotSupportedError
from google.protobuf import json_format

from master.runs.a2a_tasks import RUN_ID_KEY
from protocol import (
    ApprovalRequiredEvent,
    PlanEvent,
    RunEvent,
    RunPausedEvent,
    StepEvent,
    SubtaskStartedEvent,
    ToolCallEvent,
    ToolProgressEvent,
    ToolResultEvent,
    VerdictEvent,
)


def whole(value: Any) -> Any:
    """JSON numbers from a ``google.protobuf.Value`` come back as floats: 2.0 becomes 2 again."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: whole(item) for key, item in value.items()}
    if isinstance(value, list):
        return [whole(item) for item in value]
    return value


def parts_of(message: Message | None) -> tuple[str, list[Any]]:
    """The text (text parts joined) and the data of ``message``'s parts."""
    if message is None:
        return "", []
    texts: list[str] = []
    data: list[Any] = []
    for part in message.parts:
        if part.HasField("text"):
            texts.append(part.text)
        elif part.HasField("data"):
            data.append(whole(json_format.MessageToDict(part.data)))
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


def status_parts(text: str, data: dict[str, Any]) -> list[Part]:
    return [new_text_part(text), new_data_part(data)]


def describe(event: RunEvent) -> str:
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


def result_parts(result: Any) -> list[Part]:
    if isinstance(result, str):
        return [new_text_part(result)]
    return [new_data_part(result)]


class Updater(TaskUpdater):
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
        await self._enqueue_new(task, message)

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
        await self._enqueue_new(task, message)

    async def _enqueue_new(self, task: Task, message: Message | None) -> None:
        """The new task, stamped now, with its status message and its run's id."""
        task.status.timestamp.GetCurrentTime()
        if message is not None:
            task.status.message.CopyFrom(message)
        if self.run_id:
            task.metadata.update({RUN_ID_KEY: self.run_id})
        await self.event_queue.enqueue_event(task)
