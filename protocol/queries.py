"""The frames of a query and its run: what a query client asks and what it gets back.

``query`` (:class:`Query`, the fields of ``POST /query``'s :class:`QueryRequest`) and its
``query_result`` (:class:`QueryResult`, the body of ``POST /query``'s :class:`QueryResponse`),
``cancel`` and ``cancel_result``, and the shapes they carry: a query's budget, an auto-mode plan,
the coordinator's roles, the tokens a run spent, the calls it waits on (a person's approval, the
asker's own tools). The frames of an agent's connection are in :mod:`protocol.messages`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import ConfigDict, Field, model_validator

from protocol.errors import ErrorCode
from protocol.messages import _Model

__all__ = [
    "AgentUsed",
    "Approval",
    "Attachment",
    "Budget",
    "Cancel",
    "CancelResult",
    "PendingToolCall",
    "Plan",
    "PlanExecution",
    "PlanStep",
    "PromptProfile",
    "Query",
    "QueryRequest",
    "QueryResponse",
    "QueryResult",
    "RoleConfig",
    "RoleName",
    "Usage",
]

PromptProfile: TypeAlias = Literal["default", "auto_multi", "reasoning", "roles"]
RoleName: TypeAlias = Literal["planner", "executor", "reviewer", "critic"]
"""The roles of auto mode's coordinator (:attr:`QueryRequest.roles`)."""
DEFAULT_ROLES: tuple[RoleName, ...] = ("planner", "executor", "reviewer")
"""The roles of the ``roles`` prompt profile when the query names none."""


class AgentUsed(_Model):
    """One tool the orchestrator called while answering a query."""

    agent_id: str
    tool_name: str


class Attachment(_Model):
    """A file sent with a query (base64-encoded)."""

    filename: str
    mime_type: str = "application/octet-stream"
    content_base64: str


class Budget(_Model):
    """Per-query limits; each one omitted falls back to the master's default."""

    max_tool_calls: Annotated[int, Field(ge=0)] | None = None
    """Tool calls the run may make (default ``ORCHESTRATOR_MAX_TOOL_CALLS``)."""
    max_tokens: Annotated[int, Field(gt=0)] | None = None
    """LLM tokens (prompt + completion, summed over calls; default ``ORCHESTRATOR_MAX_TOKENS``)."""
    max_seconds: Annotated[float, Field(gt=0)] | None = None
    """Wall-clock seconds (default ``ORCHESTRATOR_MAX_SECONDS``)."""


class PlanStep(_Model):
    """One step of an auto-mode plan: a tool to call and why."""

    agent_id: str
    tool_name: str
    intent: str = ""
    """What the step is for, in words."""
    arguments: dict[str, Any] = Field(default_factory=dict)


class Plan(_Model):
    """An ordered plan the orchestrator proposes when plan approval is required."""

    plan_id: str
    steps: list[PlanStep]
    summary: str = ""


class PlanExecution(_Model):
    """Run an approved plan (``auto_plan_execute``)."""

    plan_id: str
    """The plan returned by an earlier ``auto_require_plan_approval`` query in the same session."""
    steps: list[PlanStep] | None = None
    """The steps as edited by the user; omit to run the plan as proposed."""


class RoleConfig(_Model):
    """How one role of the coordinator is played."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    model: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    """Model id for this role (from ``GET /query/orchestrator-models``); the query's
    ``orchestrator_model`` when omitted."""


class QueryRequest(_Model):
    """The body of ``POST /query`` and the fields of a WebSocket ``query``."""

    model_config = ConfigDict(
        extra="ignore",
        use_attribute_docstrings=True,
        # auto_plan_execute needs the session the plan was proposed in (the master refuses it without).
        json_schema_extra={
            "if": {
                "required": ["auto_plan_execute"],
                "properties": {"auto_plan_execute": {"type": "object"}},
            },
            "then": {"required": ["session_id"], "properties": {"session_id": {"type": "string"}}},
        },
    )

    query: Annotated[str, Field(min_length=1, max_length=100_000)]
    """The user's question."""
    session_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,128}$")] | None = None
    """Continue this session; omit to start a new one."""
    allowed_agent_ids: list[str] | None = None
    """Only offer tools of these agents (``None``: every connected action agent)."""
    attachments: list[Attachment] | None = None
    """Files for the RAG agents."""
    orchestrator_model: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    """Model id from ``GET /query/orchestrator-models``; default when omitted."""
    orchestrator_prompt_profile: PromptProfile = "default"
    """System prompt profile."""
    auto_mode: bool = False
    """Multi-step tool loop."""
    roles: list[RoleName] | dict[RoleName, RoleConfig] | None = None
    """Auto mode as a coordinator of roles: a ``planner`` splits the question into sub-tasks with
    acceptance criteria, the ``executor`` runs each with the agents' tools, a ``reviewer`` judges
    each result (``pass``, ``fail``, ``needs_retry``), an optional ``critic`` gives a second
    opinion. A list of role names, or a map of role name to its settings (its own ``model``).
    ``planner`` and ``executor`` are required; ``critic`` needs ``reviewer``. Needs ``auto_mode``
    (the ``roles`` prompt profile implies planner, executor and reviewer)."""
    auto_require_plan_approval: bool = False
    """Return a plan for approval instead of running tools."""
    auto_plan_execute: PlanExecution | None = None
    """Run this approved plan (needs ``session_id``)."""
    budget: Budget | None = None
    """Limits for this query (tool calls, tokens, seconds)."""
    approval: Literal["never", "always", "policy"] = "policy"
    """Which tool calls wait for a person: ``policy`` (the tools whose schema has
    ``requires_approval``, plus ``OPENAGENT_APPROVAL_TOOLS`` less ``OPENAGENT_APPROVAL_EXEMPT``),
    ``always`` (every agent tool call) or ``never`` (none: a call of a tool whose schema requires
    approval is refused with an error the model sees)."""
    stream: bool = False
    """Stream the run's events (:data:`protocol.RunEvent`): ``POST /query`` answers with
    Server-Sent Events; a WebSocket ``query`` gets ``run_event`` frames before its ``query_result``."""

    @model_validator(mode="after")
    def _check_roles(self) -> QueryRequest:
        """``roles`` as a map, checked; the ``roles`` profile's defaults."""
        if self.roles is None and self.orchestrator_prompt_profile == "roles":
            self.roles = list(DEFAULT_ROLES)
            self.auto_mode = True
        if self.roles is None:
            return self
        if isinstance(self.roles, list):
            if len(set(self.roles)) != len(self.roles):
                raise ValueError("roles: each role may be named once")
            self.roles = {name: RoleConfig() for name in self.roles}
        missing = [name for name in ("planner", "executor") if name not in self.roles]
        if missing:
            raise ValueError(f"roles: {' and '.join(missing)} missing (a coordinated run needs both)")
        if "critic" in self.roles and "reviewer" not in self.roles:
            raise ValueError("roles: a critic gives a second opinion on the reviewer's verdict: add reviewer")
        if not self.auto_mode:
            raise ValueError("roles: the coordinator of roles is part of auto mode: set auto_mode to true")
        if self.auto_require_plan_approval or self.auto_plan_execute is not None:
            raise ValueError("roles: not with auto_require_plan_approval or auto_plan_execute")
        return self

    def role_map(self) -> dict[RoleName, RoleConfig]:
        """``roles`` as a map (empty without roles)."""
        roles = self.roles or {}
        return roles if isinstance(roles, dict) else {name: RoleConfig() for name in roles}


class Usage(_Model):
    """LLM tokens a query spent, summed over the orchestrator's rounds (as the provider reported them)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class PendingToolCall(_Model):
    """A call of a tool the asker runs itself (a client tool of the OpenAI-compatible API): the run
    waits for its result."""

    id: str
    """The call's id; the result is sent back with it."""
    name: str
    """The function's name, as the asker offered it."""
    arguments: str
    """The arguments as JSON text, as the model wrote them."""


class Approval(_Model):
    """A tool call that waits for a person's decision (``GET /approvals``)."""

    approval_id: str
    session_id: str
    """The session of the paused run."""
    agent_id: str
    tool_name: str
    arguments: dict[str, Any]
    """The arguments as the model wrote them."""
    created_at: float
    """Unix time the run paused."""
    expires_at: float
    """Unix time after which the call is ``expired`` (``OPENAGENT_APPROVAL_TTL_SECONDS``)."""
    status: Literal["pending", "approved", "rejected", "expired"] = "pending"
    edited_arguments: dict[str, Any] | None = None
    """The arguments the approver sent instead (when edited)."""
    message: str | None = None
    """The approver's reason (a rejection's is told to the model)."""
    decided_at: float | None = None


class QueryResponse(_Model):
    """The answer to a query: the body of ``POST /query``'s response."""

    query_id: str
    run_id: str | None = None
    """The run that answered (``GET /runs/{run_id}`` reads its record; a run stopped by a budget
    resumes with ``POST /runs/{run_id}/resume``). ``None`` when the query was refused before it ran."""
    session_id: str | None = None
    """Session that holds this exchange; send it back with a follow-up."""
    success: bool
    answer: str | None = None
    error: str | None = None
    """Why the query failed (when ``success`` is false)."""
    error_code: ErrorCode | None = None
    """Stable code for the failure (e.g. ``llm_unavailable``, ``unknown_session``)."""
    agents_used: list[AgentUsed] = Field(default_factory=list)
    """Tools called to answer; empty when the orchestrator answered directly."""
    status: Literal["completed", "awaiting_approval", "awaiting_tool_results", "stopped"] | None = None
    """``awaiting_approval``: ``plan`` waits for ``auto_plan_execute``, or ``approvals`` wait for a
    person; ``awaiting_tool_results``:
    the run waits for the results of ``tool_calls``; ``stopped``: a budget or the step limit ended the run."""
    plan: Plan | None = None
    """The proposed plan (when ``status`` is ``awaiting_approval``)."""
    stopped_by: str | None = None
    """What ended a stopped run: ``max_tool_calls``, ``max_tokens``, ``max_seconds``, ``max_steps``, or ``llm_error`` (the model failed after tools had run; the answer keeps their results)."""
    usage: Usage | None = None
    """LLM tokens the run spent (the orchestrator's rounds; context summaries not included)."""
    tool_calls: list[PendingToolCall] | None = None
    """The calls the asker must run (``status: awaiting_tool_results``)."""
    steps: int = 0
    """Tool rounds the run took."""
    approvals: list[Approval] | None = None
    """The calls waiting for a person (``status: awaiting_approval`` without ``plan``): decide
    each with ``POST /approvals/{approval_id}``."""


class Query(QueryRequest):
    """A query agent asks the orchestrator a question."""

    type: Literal["query"] = "query"
    query_id: Annotated[str, Field(min_length=1, max_length=128)]
    """Chosen by the sender and echoed in the :class:`QueryResult`."""


class QueryResult(QueryResponse):
    """The master's answer to a :class:`Query`."""

    type: Literal["query_result"] = "query_result"


class Cancel(_Model):
    """A query client cancels a run: one of this connection's queries (``query_id``), or any run
    its key sees (``run_id``, whichever master holds it). A running run stops (its query's
    ``query_result`` says ``run_cancelled``); a paused one (awaiting approval or tool results,
    stopped by a budget) can no longer resume. Answered with a :class:`CancelResult`, or an
    ``error`` naming the run (``unknown_run``, also for another tenant's; ``run_not_running``
    for one that finished)."""

    type: Literal["cancel"] = "cancel"
    query_id: Annotated[str, Field(min_length=1, max_length=128)] | None = None
    """A query this connection sent and whose ``query_result`` has not come yet."""
    run_id: Annotated[str, Field(min_length=1, max_length=128)] | None = None
    """A run's id (a ``query_result``'s ``run_id``, or any door's)."""

    @model_validator(mode="after")
    def _one_target(self) -> Cancel:
        if (self.query_id is None) == (self.run_id is None):
            raise ValueError("a cancel names exactly one of query_id and run_id")
        return self


class CancelResult(_Model):
    """The master's answer to a :class:`Cancel`: the run's state after it."""

    type: Literal["cancel_result"] = "cancel_result"
    run_id: str
    query_id: str | None = None
    """The ``query_id`` the cancel named (when it named one)."""
    state: str
    """``cancelled``; ``running`` when the master holding the run did not stop it in time."""
    reason: str | None = None
