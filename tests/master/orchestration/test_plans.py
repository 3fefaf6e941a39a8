"""Plans: read from the model's reply, checked against the linked tools, found in the session."""

from __future__ import annotations

import json
from typing import Any

import pytest

from master.agents.toolbox import Toolbox
from master.errors import InvalidPlan
from master.llm.model import ChatResult, ToolCallRequest
from master.orchestration.plans import (
    SUBMIT_PLAN,
    describe,
    find_plan,
    plan_from_reply,
    planning_prompt,
    resolve_steps,
)
from protocol import Plan, PlanStep
from tests.factories import WEATHER_TOOL, answering_agent, dispatcher_for_tests

STEPS = [
    {"agent_id": "w.1", "tool_name": "get_weather", "intent": "look", "arguments": {"city": "Oslo"}},
    {"agent_id": "w.1", "tool_name": "get_weather", "arguments": {"city": "Rome"}},
]


def reply(arguments: Any, name: str = "submit_plan") -> ChatResult:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ChatResult(None, [ToolCallRequest("c1", name, text)])


def test_plan_from_a_submit_plan_call_or_json_text() -> None:
    plan = plan_from_reply(reply({"summary": "two cities", "steps": STEPS}))
    assert plan.summary == "two cities" and [s.arguments for s in plan.steps] == [
        {"city": "Oslo"},
        {"city": "Rome"},
    ]
    assert len(plan.plan_id) == 12
    assert plan_from_reply(ChatResult(json.dumps({"steps": STEPS}))).steps == plan.steps
    assert plan_from_reply(reply({"steps": STEPS})).plan_id != plan.plan_id


@pytest.mark.parametrize(
    ("result", "needle"),
    [
        (ChatResult("I would check the weather."), "did not produce a plan"),
        (reply("{not json"), "did not produce a plan"),
        (reply({"steps": []}), "has no steps"),
        (reply({"steps": [{"agent_id": "w.1"}]}), "malformed"),
        (reply({"steps": STEPS}, name="other"), "did not produce a plan"),
    ],
)
def test_unusable_replies_are_invalid_plans(result: ChatResult, needle: str) -> None:
    with pytest.raises(InvalidPlan, match=needle):
        plan_from_reply(result)


async def test_steps_resolve_to_linked_tools_with_valid_arguments() -> None:
    async with dispatcher_for_tests() as dispatcher:
        toolbox = Toolbox([answering_agent(dispatcher, "w.1", [WEATHER_TOOL])])
        steps = [PlanStep.model_validate(s) for s in STEPS]
        resolved = resolve_steps(toolbox, steps)
        assert [(t.agent_id, name, args) for t, name, args in resolved] == [
            ("w.1", "get_weather", {"city": "Oslo"}),
            ("w.1", "get_weather", {"city": "Rome"}),
        ]
        with pytest.raises(InvalidPlan, match="step 2 names unknown agent or tool 'w.1' / 'nope'"):
            resolve_steps(toolbox, [steps[0], PlanStep(agent_id="w.1", tool_name="nope")])
        with pytest.raises(InvalidPlan, match=r"step 1 \(w.1.get_weather\) has invalid arguments: \(root\)"):
            resolve_steps(toolbox, [PlanStep(agent_id="w.1", tool_name="get_weather", arguments={})])
        prompt = planning_prompt(toolbox)
        assert "- w.1 / get_weather: Current weather in a city" in prompt
    assert "(none: no agent is linked)" in planning_prompt(Toolbox([]))
    assert SUBMIT_PLAN["function"]["name"] == "submit_plan"


def test_find_plan_and_whether_it_ran() -> None:
    plan = Plan(plan_id="p1", steps=[PlanStep.model_validate(s) for s in STEPS], summary="s")
    turns: list[dict[str, Any]] = [
        {"decision": "answer_directly"},
        {"decision": "plan", "plan_id": "p1", "plan": plan.model_dump()},
        {"decision": "plan", "plan_id": "p2", "plan": {**plan.model_dump(), "plan_id": "p2"}},
    ]
    assert find_plan(turns, "p1") == (plan, False)
    assert find_plan(turns, "p3") == (None, False)
    assert find_plan([*turns, {"decision": "plan_executed", "plan_id": "p1"}], "p1") == (plan, True)
    assert find_plan([*turns, {"decision": "plan_executed", "plan_id": "p2"}], "p1") == (plan, False)


def test_describe_lists_the_steps() -> None:
    plan = Plan(plan_id="p1", steps=[PlanStep.model_validate(s) for s in STEPS], summary="two cities")
    assert describe(plan).splitlines() == [
        "Proposed plan p1: two cities",
        '1. w.1.get_weather({"city": "Oslo"}) — look',
        '2. w.1.get_weather({"city": "Rome"})',
        "Send it back as auto_plan_execute (edited if you wish) to run it.",
    ]
