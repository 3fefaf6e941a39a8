"""What a run reports as it goes: :data:`RunEvent`, one discriminated union on ``type``.

The master builds these where they happen (the orchestrator, the roles coordinator, the query
entry) and every door translates them into its own wire form: ``POST /query``'s Server-Sent
Events (``event: <type>``, ``data:`` the event's JSON, ``type`` included), the WebSocket
``run_event`` frame (:class:`RunEventFrame`, for a query client that sent ``stream: true``),
MCP progress notifications, A2A status updates and the OpenAI-compatible stream.

The events, by ``type`` (the names of the SSE events, unchanged since they were untyped):

- ``step`` (:class:`StepEvent`): a tool round starts;
- ``plan`` (:class:`PlanEvent`): the roles' planner made its plan;
- ``subtask_started`` (:class:`SubtaskStartedEvent`): the executor starts a sub-task (again on a retry);
- ``verdict`` (:class:`VerdictEvent`): a reviewer, a critic or a person judged a sub-task;
- ``tool_call`` (:class:`ToolCallEvent`): a tool call was sent;
- ``tool_progress`` (:class:`ToolProgressEvent`): a running call reported progress;
- ``tool_result`` (:class:`ToolResultEvent`): a call finished (or was refused before it ran);
- ``token`` (:class:`TokenEvent`): a piece of the model's answer as it writes;
- ``approval_required`` (:class:`ApprovalRequiredEvent`): a call (or a disagreement) waits for a person;
- ``run_paused`` (:class:`RunPausedEvent`): the run waits (approvals, the asker's tool results),
  just before its result;
- ``query_result`` (:class:`protocol.QueryResult`): the run finished; its full result, always last.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from protocol.queries import Approval, QueryResponse, QueryResult


class _Event(BaseModel):
    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)


class StepEvent(_Event):
    """A tool round starts."""

    type: Literal["step"] = "step"
    step: int
    """The round's number in the run, from 1."""
    tool_calls: list[str] = Field(default_factory=list)
    """The function names the model called in this round."""


class PlannedSubtask(_Event):
    """One sub-task of a :class:`PlanEvent`."""

    task: str
    criteria: list[str] = Field(default_factory=list)
    """How the reviewer tells it was done."""


class PlanEvent(_Event):
    """The roles' planner made its plan (auto mode with ``roles``)."""

    type: Literal["plan"] = "plan"
    subtasks: list[PlannedSubtask]


class SubtaskStartedEvent(_Event):
    """The executor starts a sub-task: its first attempt, or its retry after ``needs_retry``."""

    type: Literal["subtask_started"] = "subtask_started"
    index: int
    """The sub-task's index in the plan, from 0."""
    task: str
    attempt: int = 1


class VerdictEvent(_Event):
    """A judgement of a sub-task's result."""

    type: Literal["verdict"] = "verdict"
    index: int
    """The sub-task's index in the plan, from 0."""
    role: Literal["reviewer", "critic", "person"]
    """Who judged (``person``: the decision of a disagreement between reviewer and critic)."""
    verdict: Literal["pass", "fail", "needs_retry"]
    reason: str = ""
    attempt: int = 1
    """The attempt of the sub-task it judged."""


class ToolCallEvent(_Event):
    """A tool call was sent to its agent."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str | None = None
    agent_id: str | None = None
    """``None`` for the master's own tools (``start_collaboration``)."""
    tool_name: str | None = None
    function_name: str | None = None
    """The function name the model used (set for an approved direct call)."""
    arguments: Any = None


class ToolProgressEvent(_Event):
    """A running call reported progress."""

    type: Literal["tool_progress"] = "tool_progress"
    call_id: str
    message: str = ""
    progress: float | None = None
    """Fraction done, 0..1, when known."""
    agent_id: str | None = None
    tool_name: str | None = None
    function_name: str | None = None


class ToolResultEvent(_Event):
    """A call finished, failed, or was refused before it ran (then ``call_id`` is ``None``)."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str | None = None
    agent_id: str | None = None
    tool_name: str | None = None
    function_name: str | None = None
    success: bool
    result: Any = None
    """The tool's result (when ``success``)."""
    error: str | None = None
    """Why it failed (when not ``success``)."""


class TokenEvent(_Event):
    """A piece of the model's text as it writes."""

    type: Literal["token"] = "token"
    text: str


class ApprovalRequiredEvent(Approval):
    """A call waits for a person's decision (``POST /approvals/{approval_id}``)."""

    type: Literal["approval_required"] = "approval_required"


class RunPausedEvent(_Event):
    """The run waits: for people's decisions (``awaiting_approval``) or for the results of the
    calls the asker runs itself (``awaiting_tool_results``). Sent just before ``query_result``."""

    type: Literal["run_paused"] = "run_paused"
    run_id: str | None = None
    status: Literal["awaiting_approval", "awaiting_tool_results"]
    approval_ids: list[str] = Field(default_factory=list)
    """The approvals to decide (``awaiting_approval`` without a plan)."""
    tool_call_ids: list[str] = Field(default_factory=list)
    """The calls whose results the run waits for (``awaiting_tool_results``)."""
    plan: bool = False
    """A proposed plan waits for ``auto_plan_execute``."""


RunFinishedEvent = QueryResult
"""The run finished: its full result (``type: query_result``, the fields of ``POST /query``'s JSON)."""

RunEvent: TypeAlias = Annotated[
    StepEvent
    | PlanEvent
    | SubtaskStartedEvent
    | VerdictEvent
    | ToolCallEvent
    | ToolProgressEvent
    | ToolResultEvent
    | TokenEvent
    | ApprovalRequiredEvent
    | RunPausedEvent
    | QueryResult,
    Field(discriminator="type"),
]
"""Any event of a run (module docstring)."""

RUN_EVENT_ADAPTER: TypeAdapter[RunEvent] = TypeAdapter(RunEvent)


class RunEventFrame(_Event):
    """WebSocket, master → query client: an event of a query the client sent with ``stream: true``,
    as it happens (before the query's ``query_result`` frame)."""

    type: Literal["run_event"] = "run_event"
    query_id: str
    """The query it belongs to."""
    event: RunEvent


def parse_run_event(data: str | bytes | dict[str, Any]) -> RunEvent:
    """One event from its JSON (text or parsed). Raises :class:`pydantic.ValidationError`."""
    if isinstance(data, dict):
        return RUN_EVENT_ADAPTER.validate_python(data)
    return RUN_EVENT_ADAPTER.validate_json(data)


def run_event_schema(ref_template: str = "#/components/schemas/{model}") -> dict[str, Any]:
    """The JSON Schema of :data:`RunEvent` (a ``oneOf`` with its ``discriminator``), its models in
    ``$defs``; each model's ``type`` is required, as every event sent has it (so generated
    clients narrow on it)."""
    schema = RUN_EVENT_ADAPTER.json_schema(ref_template=ref_template, mode="serialization")
    names = {ref.rsplit("/", 1)[-1] for ref in schema["discriminator"]["mapping"].values()}
    for name in names:
        model = schema["$defs"][name]
        required = model.setdefault("required", [])
        if "type" not in required:
            required.insert(0, "type")
    return schema


def run_paused(response: QueryResponse) -> RunPausedEvent | None:
    """The :class:`RunPausedEvent` of a result that waits, else ``None``."""
    if response.status == "awaiting_approval":
        return RunPausedEvent(
            run_id=response.run_id,
            status="awaiting_approval",
            approval_ids=[a.approval_id for a in response.approvals or ()],
            plan=response.plan is not None,
        )
    if response.status == "awaiting_tool_results":
        return RunPausedEvent(
            run_id=response.run_id,
            status="awaiting_tool_results",
            tool_call_ids=[c.id for c in response.tool_calls or ()],
        )
    return None


def run_finished(response: QueryResponse) -> QueryResult:
    """The ``query_result`` event of ``response``."""
    return QueryResult(**dict(response))
