"""The run's state: one typed object, what a paused, halted or lost run goes on from.

A :class:`RunState` is kept where the run waits: in its session's pause slot while it waits for
its asker or a person (:meth:`master.conversation.store.SessionStore.pause`), and as the run's
checkpoint (``run_checkpoint:{run_id}``, :meth:`master.runs.store.RunStore.save`) when it can be
resumed with ``POST /runs/{run_id}/resume``. Its :attr:`RunState.pending` says what it waits for,
a tagged union (``kind``):

- ``approval``: calls held for a person's decision (:class:`ApprovalPending`);
- ``client_tool_results``: calls of tools its asker runs itself (:class:`ClientToolResultPending`);
- ``budget``: a budget or the step limit stopped it; it goes on with a raised one (:class:`BudgetPending`);
- ``operator_decision``: the reviewer and the critic of a coordinated run disagree (:class:`OperatorDecisionPending`).

``pending`` is ``None`` for a run that waits for nothing but was lost (a coordinated run's
checkpoint between phases).

States written before this model (untyped dictionaries with a top-level ``kind``, ``held`` or a
list ``pending``) are read leniently: :meth:`RunState._legacy` maps them onto these fields, so a
run paused or halted before an upgrade still resumes. Anything else that does not validate is not
a state (:func:`read_state` returns ``None`` and logs why).
"""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from master.orchestration.budgets import BudgetTracker
from master.orchestration.roles import CoordinatorState

logger = logging.getLogger("master.runs.state")

RunStatus = Literal[
    "running", "awaiting_approval", "awaiting_tool_results", "stopped", "completed", "failed", "cancelled"
]
"""A run's state as its record shows it (``GET /runs/{run_id}``)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class CallRef(_Model):
    """A tool call as the model asked for it: its id, function name and arguments (JSON text,
    or an object for an edited call)."""

    id: str
    name: str = ""
    arguments: Any = None

    def as_sent(self) -> tuple[str, str, Any]:
        return self.id, self.name, self.arguments

    def ref(self) -> dict[str, Any]:
        """As the run's record lists it (``in_flight``, ``unknown``)."""
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


class HeldCall(CallRef):
    """A call held for a person's decision: the approval that decides it."""

    approval_id: str


class Asker(_Model):
    """Who asked for the run (a paused run goes on as its asker: :func:`master.query.approvals.resumer`)."""

    key: str | None = None
    name: str | None = None
    tenant: str | None = None
    admin: bool = False


class ApprovalPending(_Model):
    """Calls held for a person's decision, in order; the run goes on once each is decided."""

    kind: Literal["approval"] = "approval"
    held: list[HeldCall] = Field(default_factory=list)
    asker: Asker | None = None
    direct: bool = False
    """A door's direct call (no model): it ends with the call."""


class OperatorDecisionPending(_Model):
    """A coordinated run's reviewer and critic disagree: a person decides, through the approval
    of :attr:`held` (approve keeps the reviewer's verdict, reject takes the critic's)."""

    kind: Literal["operator_decision"] = "operator_decision"
    held: list[HeldCall] = Field(default_factory=list)
    asker: Asker | None = None


class ClientToolResultPending(_Model):
    """Calls of tools the asker runs itself: the run goes on with their results."""

    kind: Literal["client_tool_results"] = "client_tool_results"
    calls: list[CallRef] = Field(default_factory=list)


class BudgetPending(_Model):
    """A budget (or the step limit) stopped the run: it goes on with a raised one."""

    kind: Literal["budget"] = "budget"
    stopped_by: str | None = None


Pending = Annotated[
    ApprovalPending | OperatorDecisionPending | ClientToolResultPending | BudgetPending,
    Field(discriminator="kind"),
]
HeldPending = ApprovalPending | OperatorDecisionPending
"""The pending kinds a person decides through approvals."""


class Limits(_Model):
    """The limits a run ran under."""

    max_tool_calls: int | None = None
    max_tokens: int | None = None
    max_seconds: float | None = None

    @classmethod
    def of(cls, budget: BudgetTracker) -> Limits:
        return cls(
            max_tool_calls=budget.max_tool_calls, max_tokens=budget.max_tokens, max_seconds=budget.max_seconds
        )


class Spent(_Model):
    """What a run spent so far."""

    tool_calls: int = 0
    tokens: int = 0
    seconds: float = 0.0

    @classmethod
    def of(cls, budget: BudgetTracker) -> Spent:
        return cls(tool_calls=budget.tool_calls, tokens=budget.tokens, seconds=budget.elapsed)

    def charge(self, budget: BudgetTracker) -> None:
        """Count what the run spent before against a resumed run's ``budget``."""
        budget.tool_calls = self.tool_calls
        budget.tokens = self.tokens
        budget.started -= self.seconds


class RunState(_Model):
    """Where a run is, all it needs to go on (see the module docstring)."""

    run_id: str | None = None
    tenant: str | None = None
    session_id: str | None = None
    query: str = ""
    query_id: str = ""
    request: dict[str, Any] = Field(default_factory=dict)
    """The query as asked (:class:`protocol.QueryRequest`'s JSON, without attachments and stream)."""
    messages: list[Any] = Field(default_factory=list)
    """The run's messages so far (OpenAI's format)."""
    steps: int = 0
    status: RunStatus = "running"
    stopped_by: str | None = None
    reason: str | None = None
    created_at: float | None = None
    completed: list[dict[str, Any]] = Field(default_factory=list)
    """The calls it completed, as its record lists them."""
    in_flight: list[CallRef] = Field(default_factory=list)
    unknown: list[CallRef] = Field(default_factory=list)
    """Calls sent before the run stopped whose outcome is unknown: never sent again."""
    budget: Limits | None = None
    """The limits it ran under (a halted run's resume must raise the one that stopped it)."""
    spent: Spent = Field(default_factory=Spent)
    """What it spent, counted against a resumed run's budget."""
    roles: CoordinatorState | None = None
    """The coordinator's state of a run with roles."""
    pending: Pending | None = None

    @property
    def held(self) -> HeldPending | None:
        """What a person decides, when the run waits for approvals."""
        pending = self.pending
        return pending if isinstance(pending, ApprovalPending | OperatorDecisionPending) else None

    @property
    def direct(self) -> bool:
        return isinstance(self.pending, ApprovalPending) and self.pending.direct

    def dump(self) -> dict[str, Any]:
        """As stored (JSON-ready)."""
        return self.model_dump(mode="json")

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: Any) -> Any:
        """Map a state written before this model onto its fields (module docstring)."""
        if not isinstance(data, dict) or not (
            "kind" in data or "held" in data or "asker" in data or isinstance(data.get("pending"), list)
        ):
            return data
        data = dict(data)
        kind = data.pop("kind", None)
        held = data.pop("held", None)
        asker = data.pop("asker", None)
        direct = bool(data.pop("direct", False))
        pending = data.get("pending")
        roles = data.get("roles")
        if isinstance(pending, list):
            data["pending"] = {"kind": "client_tool_results", "calls": pending}
            data.setdefault("status", "awaiting_tool_results")
        elif kind == "approval" or held is not None:
            decision = isinstance(roles, dict) and roles.get("phase") not in (None, "execute")
            data["pending"] = {
                "kind": "operator_decision" if decision else "approval",
                "held": held or [],
                "asker": asker if isinstance(asker, dict) else None,
                **({} if decision else {"direct": direct}),
            }
            data.setdefault("status", "awaiting_approval")
        elif kind == "halt":
            data["pending"] = {"kind": "budget", "stopped_by": data.get("stopped_by")}
            data.setdefault("status", "stopped")
        return data


def read_state(value: Any, *, where: str) -> RunState | None:
    """A stored state (a dict or JSON text), or ``None`` when there is none or it is not one
    (logged with ``where``: such a run cannot be resumed)."""
    if value is None or value == b"" or value == "":
        return None
    try:
        if isinstance(value, str | bytes):
            return RunState.model_validate_json(value)
        return RunState.model_validate(value)
    except ValidationError as exc:
        logger.warning("%s: the stored run state is unreadable, the run cannot resume: %s", where, exc)
        return None
