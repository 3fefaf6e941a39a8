"""How an A2A task ends, and the decisions a message on a waiting task carries.

:func:`ending` maps a query's answer to the task's terminal state (``INPUT_REQUIRED`` for a run that
waits for approvals), :func:`direct_ending` a direct call held for approval once decided;
:func:`decisions_in` reads the decisions of a message on a waiting task (a data part per approval,
or the text ``approve`` / ``reject: reason`` when a single one waits), and :func:`as_decision` gives
each as the run's verb takes it (:meth:`master.query.verbs.RunVerbs.resume`).
"""

from __future__ import annotations

from typing import Any

from a2a.helpers import new_text_part
from a2a.types.a2a_pb2 import Part, Task, TaskState
from a2a.utils.errors import InvalidParamsError
from google.protobuf import json_format

from master.doors.a2a.updates import result_parts, status_parts
from master.query.entry import DirectOutcome
from master.runs.decisions import Approve, Reject
from protocol import Approval, ErrorCode, QueryResponse


def direct_ending(outcome: DirectOutcome) -> tuple[TaskState, list[Part], list[Part] | None, dict[str, Any]]:
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
            status_parts(f"{label} returned", details),
            result_parts(run.result),
            details,
        )
    details["error"] = run.error
    if outcome.decision in ("rejected", "expired"):
        details["approval"] = outcome.decision
        return (
            TaskState.TASK_STATE_REJECTED,
            status_parts(f"{label} was not run: {run.error}", details),
            None,
            details,
        )
    return TaskState.TASK_STATE_FAILED, status_parts(f"{label} failed: {run.error}", details), None, details


def waiting_session(task: Task) -> str | None:
    """The session a waiting task's status names (the data part :func:`ending` wrote)."""
    for part in task.status.message.parts:
        if part.HasField("data"):
            session_id = json_format.MessageToDict(part.data).get("session_id")
            if isinstance(session_id, str) and session_id:
                return session_id
    return None


def ending(response: QueryResponse, *, paused: bool = False) -> tuple[TaskState, list[Part], dict[str, Any]]:
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
        return TaskState.TASK_STATE_INPUT_REQUIRED, status_parts(text, details), details
    if not response.success:
        details["error_code"] = str(response.error_code) if response.error_code else None
        if response.error_code == ErrorCode.RUN_CANCELLED:  # by any door's cancel, on any master
            return (
                TaskState.TASK_STATE_CANCELED,
                status_parts(response.error or "the run was cancelled", details),
                details,
            )
        return (
            TaskState.TASK_STATE_FAILED,
            status_parts(response.error or "the query failed", details),
            details,
        )
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
            status_parts(
                f"waiting for a person to approve: {waiting}; {how} on this task, "
                "or decide with POST /approvals/{approval_id}",
                {**details, "approvals": approvals},
            ),
            details,
        )
    return TaskState.TASK_STATE_COMPLETED, [new_text_part(response.answer or "")], details


_DECISION_FIELDS = frozenset({"approval_id", "decision", "message", "arguments", "remember"})


def decisions_in(text: str, data: list[Any], pending: list[Approval]) -> list[dict[str, Any]]:
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


def as_decision(decision: dict[str, Any]) -> Approve | Reject:
    """A decision a message carries, as the run's verb takes it."""
    if decision["decision"] == "approve":
        return Approve(
            approval_id=decision["approval_id"],
            arguments=decision.get("arguments"),
            message=decision.get("message"),
            remember=decision.get("remember"),
        )
    return Reject(approval_id=decision["approval_id"], reason=decision.get("message"))
