"""sample_agents/calculator.py: the arithmetic, and the offline first run with the demo LLM."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from openagent import ClientConfig, ToolError
from openagent.testing import ScriptedOpenAIServer, demo_handler
from sample_agents.calculator import AGENT_ID, TOOLS, build_agent, calculate
from tests.factories import MasterProcess, agent_rows


@pytest.mark.parametrize(
    ("tool_name", "a", "b", "expression", "result"),
    [
        ("add", 2, 3, "2 + 3", 5),
        ("subtract", 5, 8, "5 - 8", -3),
        ("multiply", 12, 7, "12 × 7", 84),
        ("divide", 10, 4, "10 ÷ 4", 2.5),
        ("power", 2, 0.5, "2 ^ 0.5", 2**0.5),
    ],
)
def test_each_tool_computes_and_shows_the_expression(
    tool_name: str, a: float, b: float, expression: str, result: float
) -> None:
    assert calculate(tool_name, {"a": a, "b": b}) == {"expression": expression, "result": result}


@pytest.mark.parametrize(
    ("tool_name", "arguments", "error"),
    [
        ("divide", {"a": 1, "b": 0}, "cannot divide by zero"),
        ("power", {"a": 10, "b": 1000}, "no finite result"),
        ("power", {"a": -8, "b": 0.5}, "no finite real result"),
        ("add", {"a": "1", "b": 2}, "argument 'a' must be a number, got '1'"),
        ("add", {"a": True, "b": 2}, "argument 'a' must be a number"),
        ("modulo", {"a": 1, "b": 2}, "unknown tool 'modulo'"),
    ],
)
def test_bad_calls_are_tool_errors_naming_the_problem(
    tool_name: str, arguments: dict[str, Any], error: str
) -> None:
    with pytest.raises(ToolError, match=error):
        calculate(tool_name, arguments)


def test_every_tool_takes_two_required_numbers() -> None:
    assert [tool.name for tool in TOOLS] == ["add", "subtract", "multiply", "divide", "power"]
    for tool in TOOLS:
        assert tool.parameters["required"] == ["a", "b"]


async def test_demo_llm_answers_the_readme_question_with_the_calculator(
    master: MasterProcess, llm: ScriptedOpenAIServer
) -> None:
    """The first run: no LLM, the demo one, the calculator agent, the README's curl question."""
    llm.set_handler(demo_handler)
    agent = build_agent(ClientConfig(master_ws=master.ws_url, api_key=None))
    async with agent:
        async with asyncio.timeout(90):
            while AGENT_ID not in {row["agent_id"] for row in await agent_rows(master.base_url)}:
                await asyncio.sleep(0.05)
        async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
            response = await http.post(
                "/query", json={"query": "What is 12 times 7?", "allowed_agent_ids": [AGENT_ID]}
            )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["success"] is True
    assert body["agents_used"] == [{"agent_id": AGENT_ID, "tool_name": "multiply"}]
    assert body["answer"] == "The multiply tool of calculator-agent answered: expression 12 × 7, result 84."
