"""The toolbox: OpenAI function names for (agent, tool) pairs, and back.

OpenAI accepts function names matching ``^[a-zA-Z0-9_-]{1,64}$`` only, while agent ids may
carry ``.`` and ``:`` and be 128 characters long: every name offered must still be valid,
distinct within one query, and resolve to the tool it names.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from master.agents.registry import LiveAgent, compile_tools
from master.agents.toolbox import Toolbox, function_name
from protocol import AGENT_ID_PATTERN, ToolSchema

OPENAI_FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

# Agent ids the protocol accepts that are not function names as they stand.
ADVERSARIAL_AGENT_IDS = [
    "weather.agent",
    "team:weather",
    "a.b:c-d_e",
    "x" * 128,
    "0" + ".:" * 63 + "z",
    "svc.eu-west-1:weather.v2",
    "A",
    "a" * 61,  # "a"*61 + "__t": 64 characters, the longest name without a hash
    "a" * 62,  # one over
]
TOOL_NAMES = ["t", "get_weather", "Tool-9", "y" * 64]


async def _no_send(frame: str) -> None:  # pragma: no cover - never called
    raise AssertionError(frame)


async def _no_close(code: int, reason: str) -> None:  # pragma: no cover - never called
    raise AssertionError(code)


def live_agent(agent_id: str, tool_names: list[str]) -> LiveAgent:
    schemas = [
        ToolSchema(name=name, description=f"{name} tool", parameters={"type": "object"})
        for name in tool_names
    ]
    return LiveAgent(agent_id, "action", {}, compile_tools(agent_id, schemas), _no_send, _no_close)


def test_the_adversarial_ids_are_valid_agent_ids() -> None:
    assert all(re.fullmatch(AGENT_ID_PATTERN, agent_id) for agent_id in ADVERSARIAL_AGENT_IDS)


@pytest.mark.parametrize("agent_id", ADVERSARIAL_AGENT_IDS)
@pytest.mark.parametrize("tool_name", TOOL_NAMES)
def test_function_name_is_valid_for_openai(agent_id: str, tool_name: str) -> None:
    assert OPENAI_FUNCTION_NAME.fullmatch(function_name(agent_id, tool_name))


def test_plain_names_are_readable() -> None:
    assert function_name("weather-agent", "get_weather") == "weather-agent__get_weather"
    assert function_name("weather.agent", "get_weather") == "weather_agent__get_weather"


def test_every_offered_name_is_valid_distinct_and_resolves_to_its_tool() -> None:
    # Ids that read alike once '.' and ':' become '_', and long ids equal in their first 64 characters.
    ids = [*ADVERSARIAL_AGENT_IDS, "weather_agent", "team_weather", "x" * 127 + "y", "a" * 61 + "."]
    agents = [live_agent(agent_id, TOOL_NAMES) for agent_id in ids]
    toolbox = Toolbox(agents)
    offered = toolbox.openai_tools()
    names = [tool["function"]["name"] for tool in offered]
    assert len(toolbox) == len(offered) == len(ids) * len(TOOL_NAMES)
    assert [n for n in names if not OPENAI_FUNCTION_NAME.fullmatch(n)] == []
    assert len(set(names)) == len(names), "two tools share a function name in one query"
    for tool in offered:
        found = toolbox.resolve(tool["function"]["name"])
        assert found is not None
        agent, agent_tool = found
        assert tool["function"]["description"].startswith(f"[agent {agent.agent_id}]")
        assert agent_tool is agent.tools[agent_tool.schema.name]
    resolved = [found for found in map(toolbox.resolve, names) if found is not None]
    pairs = {(agent.agent_id, tool.schema.name) for agent, tool in resolved}
    assert pairs == {(agent_id, name) for agent_id in ids for name in TOOL_NAMES}


def test_definition_carries_the_tool_schema() -> None:
    parameters: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}}}
    schema = ToolSchema(name="get_weather", description="Weather now", parameters=parameters)
    agent = LiveAgent("w.1", "action", {}, compile_tools("w.1", [schema]), _no_send, _no_close)
    [definition] = Toolbox([agent]).openai_tools()
    assert definition == {
        "type": "function",
        "function": {
            "name": "w_1__get_weather",
            "description": "[agent w.1] Weather now",
            "parameters": parameters,
        },
    }


def test_find_and_resolve_unknown() -> None:
    toolbox = Toolbox([live_agent("a.b", ["t"])])
    assert toolbox.resolve("a.b__t") is None  # the model only knows the offered name
    assert toolbox.resolve("nope") is None
    found = toolbox.find("a.b", "t")
    assert found is not None and found[0].agent_id == "a.b"
    assert toolbox.find("a.b", "u") is None and toolbox.find("a_b", "t") is None


def test_token_costs_follow_the_offered_order_and_are_memoized() -> None:
    toolbox = Toolbox([live_agent("a", ["t", "u"]), live_agent("b", ["t"])])
    counted: list[str] = []

    def count(definition: dict[str, Any]) -> int:
        counted.append(definition["function"]["name"])
        return len(definition["function"]["name"])

    names = [tool["function"]["name"] for tool in toolbox.openai_tools()]
    assert toolbox.token_costs(count) == [len(n) for n in names]
    assert toolbox.token_costs(count) == [len(n) for n in names]
    assert counted == names  # the second call counted nothing again
