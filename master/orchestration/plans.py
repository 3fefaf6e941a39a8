"""Auto-mode plans: proposed by the model, approved by the user, executed later.

With ``auto_require_plan_approval`` the model is offered a single function,
``submit_plan``, and the tools of the linked agents are described in the prompt.
The plan (ordered steps: agent, tool, intent, arguments) is stored in the
session as a ``{"decision": "plan"}`` turn, so ``auto_plan_execute`` can run it
from another request, another client or after a master restart. Before anything
runs, every step must name a linked agent and one of its tools, with arguments
that fit the tool's schema.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from master.agents.dispatch import Target
from master.agents.toolbox import Toolbox
from master.errors import InvalidPlan
from master.llm.model import ChatResult
from protocol import Plan, PlanStep

SUBMIT_PLAN: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "submit_plan",
        "description": "Submit the ordered plan of tool calls that answers the user's request.",
        "parameters": {
            "type": "object",
            "properties": {
                "summary": {"type": "string", "description": "One sentence: what the plan achieves."},
                "steps": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "agent_id": {"type": "string"},
                            "tool_name": {"type": "string"},
                            "intent": {"type": "string", "description": "Why this step is needed."},
                            "arguments": {"type": "object"},
                        },
                        "required": ["agent_id", "tool_name", "arguments"],
                    },
                },
            },
            "required": ["steps"],
        },
    },
}

PLAN_PROMPT = (
    "Plan how to answer the user's request with the tools below, without calling them. "
    "Call the function submit_plan once with the ordered steps; each step names the agent_id, "
    "the tool_name, its intent and the arguments. Available tools (agent_id / tool_name: description; "
    "JSON Schema of the arguments):\n{catalog}"
)


def planning_prompt(toolbox: Toolbox) -> str:
    lines = [
        f"- {agent.agent_id} / {tool.schema.name}: {tool.schema.description} "
        f"{json.dumps(tool.schema.parameters, separators=(',', ':'))}"
        for agent, tool in toolbox.entries()
    ]
    return PLAN_PROMPT.format(catalog="\n".join(lines) or "(none: no agent is linked)")


def plan_from_reply(reply: ChatResult) -> Plan:
    """The plan in the model's reply (a ``submit_plan`` call, or JSON text)."""
    raw: Any = None
    for call in reply.tool_calls:
        if call.name == "submit_plan":
            raw = call.arguments
            break
    else:
        raw = reply.content
    try:
        data = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise InvalidPlan("the model did not produce a plan (no submit_plan call with a JSON object)")
    try:
        steps = [PlanStep.model_validate(step) for step in data.get("steps") or []]
    except ValidationError as exc:
        raise InvalidPlan(f"the model's plan is malformed: {exc.errors()[0]['msg']}") from None
    if not steps:
        raise InvalidPlan("the model's plan has no steps")
    return Plan(plan_id=uuid.uuid4().hex[:12], steps=steps, summary=str(data.get("summary") or ""))


def resolve_steps(toolbox: Toolbox, steps: Sequence[PlanStep]) -> list[tuple[Target, str, dict[str, Any]]]:
    """Map every step to a linked agent's tool and check its arguments; raises :class:`InvalidPlan`."""
    resolved = []
    for number, step in enumerate(steps, start=1):
        found = toolbox.find(step.agent_id, step.tool_name)
        if found is None:
            raise InvalidPlan(
                f"step {number} names unknown agent or tool {step.agent_id!r} / {step.tool_name!r} "
                "(not among the linked, available agents)"
            )
        agent, tool = found
        problems = tool.validate(step.arguments)
        if problems:
            raise InvalidPlan(
                f"step {number} ({step.agent_id}.{step.tool_name}) has invalid arguments: "
                + "; ".join(problems)
            )
        resolved.append((agent, step.tool_name, step.arguments))
    return resolved


def describe(plan: Plan) -> str:
    """The plan in words, as the answer of an ``awaiting_approval`` response."""
    lines = [f"Proposed plan {plan.plan_id}" + (f": {plan.summary}" if plan.summary else "")]
    lines += [
        f"{n}. {step.agent_id}.{step.tool_name}({json.dumps(step.arguments)})"
        + (f" — {step.intent}" if step.intent else "")
        for n, step in enumerate(plan.steps, start=1)
    ]
    lines.append("Send it back as auto_plan_execute (edited if you wish) to run it.")
    return "\n".join(lines)


def find_plan(turns: Sequence[dict[str, Any]], plan_id: str) -> tuple[Plan | None, bool]:
    """(the stored plan, whether it was already executed)."""
    plan: Plan | None = None
    executed = False
    for turn in turns:
        if turn.get("plan_id") != plan_id:
            continue
        if turn.get("decision") == "plan":
            plan = Plan.model_validate(turn["plan"])
        elif turn.get("decision") == "plan_executed":
            executed = True
    return plan, executed
