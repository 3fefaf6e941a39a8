"""The tools and prompts of the planner, the reviewer and the critic.

They answer through a tool offered to them (any model with tool calling can play them, and
tests script them): ``submit_plan`` with ``{"subtasks": [{"task", "criteria"}]}`` and
``submit_review`` with ``{"verdict": "pass" | "fail" | "needs_retry", "reason"}``.
:func:`plan_of` and :func:`review_of` read a reply; ``None`` means the model did not use the tool.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from master.llm.model import ChatResult
from master.orchestration.roles.state import Subtask, VerdictName

SUBMIT_PLAN = "submit_plan"
SUBMIT_REVIEW = "submit_review"

PLAN_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": SUBMIT_PLAN,
        "description": "Submit the ordered sub-tasks that together answer the user's request.",
        "parameters": {
            "type": "object",
            "properties": {
                "subtasks": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "task": {"type": "string", "description": "What to do."},
                            "criteria": {
                                "type": "array",
                                "items": {"type": "string"},
                                "description": "How to tell the sub-task was done.",
                            },
                        },
                        "required": ["task"],
                    },
                }
            },
            "required": ["subtasks"],
        },
    },
}

REVIEW_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": SUBMIT_REVIEW,
        "description": "Submit your verdict on the sub-task's result.",
        "parameters": {
            "type": "object",
            "properties": {
                "verdict": {"type": "string", "enum": ["pass", "fail", "needs_retry"]},
                "reason": {"type": "string", "description": "Why, in a sentence or two."},
            },
            "required": ["verdict", "reason"],
        },
    },
}

PLANNER_PROMPT = (
    "You are the planner of a team of AI agents. Split the user's request into a short ordered "
    "list of sub-tasks, each with acceptance criteria. Do not do the work and do not call any "
    "other tool: call the function submit_plan once with the sub-tasks.{catalog}"
)
REVIEWER_PROMPT = (
    "You are the {role} of a team of AI agents. Judge whether the result of a sub-task meets its "
    "acceptance criteria. Call the function submit_review once: verdict 'pass' when it does, "
    "'needs_retry' when another attempt could fix it (say what to fix), 'fail' when the sub-task "
    "cannot be done as planned."
)
REMINDER = "Answer by calling the function {tool} (and only that function)."


class _PlanArgs(BaseModel):
    subtasks: list[Subtask] = Field(min_length=1)


class _ReviewArgs(BaseModel):
    verdict: VerdictName
    reason: str = ""


def planner_prompt(tools: list[str]) -> str:
    catalog = f" The executor will have these tools: {', '.join(tools)}." if tools else ""
    return PLANNER_PROMPT.format(catalog=catalog)


def reviewer_prompt(role: str) -> str:
    return REVIEWER_PROMPT.format(role=role)


def review_request(query: str, subtask: Subtask, reviewer: tuple[str, str] | None = None) -> str:
    """What the reviewer (and, with the reviewer's verdict, the critic) is asked."""
    criteria = "\n".join(f"- {c}" for c in subtask.criteria) or "- (none given)"
    text = (
        f"The user's request: {query}\n\nSub-task: {subtask.task}\nAcceptance criteria:\n{criteria}\n\n"
        f"The executor's result:\n{subtask.output or '(no answer)'}"
    )
    if reviewer is not None:
        text += f"\n\nThe reviewer's verdict: {reviewer[0]} ({reviewer[1]}). Give your own."
    return text


def executor_request(query: str, subtasks: list[Subtask], index: int) -> str:
    """What the executor is asked for sub-task ``index``: the request, what was done, the task."""
    subtask = subtasks[index]
    done = "\n".join(
        f"{n}. {s.task}: {s.output}" for n, s in enumerate(subtasks[:index], start=1) if s.status == "passed"
    )
    criteria = "\n".join(f"- {c}" for c in subtask.criteria) or "- (none given)"
    text = f"The user's request: {query}\n"
    if done:
        text += f"\nDone so far:\n{done}\n"
    text += (
        f"\nYour sub-task ({index + 1} of {len(subtasks)}): {subtask.task}\nAcceptance criteria:\n{criteria}"
    )
    if subtask.retry_reason:
        text += f"\n\nA reviewer sent your previous attempt back: {subtask.retry_reason}"
    return text


def _arguments(reply: ChatResult, name: str) -> Any:
    for call in reply.tool_calls:
        if call.name == name:
            try:
                return json.loads(call.arguments or "{}")
            except ValueError:
                return None
    return None


def plan_of(reply: ChatResult) -> list[Subtask] | None:
    """The sub-tasks of a ``submit_plan`` call (``None``: no usable call)."""
    try:
        return [
            Subtask(task=s.task, criteria=s.criteria)
            for s in _PlanArgs.model_validate(_arguments(reply, SUBMIT_PLAN)).subtasks
        ]
    except ValidationError:
        return None


def review_of(reply: ChatResult) -> tuple[VerdictName, str] | None:
    """The verdict and reason of a ``submit_review`` call (``None``: no usable call)."""
    try:
        args = _ReviewArgs.model_validate(_arguments(reply, SUBMIT_REVIEW))
    except ValidationError:
        return None
    return args.verdict, args.reason
