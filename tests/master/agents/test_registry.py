"""The live-agent registry and tool compilation: newest connection wins, schemas checked once."""

from __future__ import annotations

import pytest

from master.agents.registry import LiveAgent, Registry, compile_tools
from master.errors import InvalidToolSchema
from protocol import Register, ToolSchema


async def _send(frame: str) -> None:
    return None


async def _close(code: int, reason: str) -> None:
    return None


def live(agent_id: str, role: str = "action", tools: list[dict[str, object]] | None = None) -> LiveAgent:
    register = Register.model_validate(
        {"agent_id": agent_id, "role": role, "tools": tools if tools is not None else [{"name": "t"}]}
    )
    return LiveAgent.from_register(register, _send, _close)


def test_newest_connection_wins_and_an_old_one_cannot_remove_it() -> None:
    registry = Registry()
    old, new = live("a"), live("a")
    assert registry.add(old) is None
    assert registry.add(new) is old
    assert not registry.remove(old)  # the replaced connection closing later changes nothing
    assert registry.get("a") is new
    assert registry.remove(new) and registry.get("a") is None


def test_action_agents_with_tools_filtered_by_allowed_ids() -> None:
    registry = Registry()
    for agent in (live("a"), live("b"), live("asker", role="query", tools=[]), live("bare", tools=[])):
        registry.add(agent)
    assert [a.agent_id for a in registry.action_agents()] == ["a", "b"]
    assert [a.agent_id for a in registry.action_agents(["b", "asker", "nobody"])] == ["b"]
    assert [a.agent_id for a in registry.action_agents([])] == []
    assert {a.agent_id for a in registry.all()} == {"a", "b", "asker", "bare"}


def test_arguments_are_validated_naming_each_field() -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
        "required": ["city"],
    }
    [tool] = compile_tools("w", [ToolSchema(name="forecast", parameters=schema)]).values()
    assert tool.validate({"city": "Paris", "days": 2}) == []
    problems = tool.validate({"days": 0})
    assert problems == ['(root): "city" is a required property', "days: 0 is less than the minimum of 1"]


@pytest.mark.parametrize(
    ("tools", "needle"),
    [
        ([{"name": "t"}, {"name": "t"}], "declares tool 't' twice"),
        (
            [{"name": "t", "parameters": {"type": "nonsense"}}],
            "tool 't' of agent 'x' has an invalid parameters schema",
        ),
        ([{"name": "t", "parameters": {"$ref": "http://127.0.0.1:9/schema"}}], "remote $ref"),
    ],
)
def test_bad_tool_schemas_are_refused(tools: list[dict[str, object]], needle: str) -> None:
    schemas = [ToolSchema.model_validate(tool) for tool in tools]
    with pytest.raises(InvalidToolSchema) as info:
        tools_by_name = compile_tools("x", schemas)
        [tool.validate({}) for tool in tools_by_name.values()]
    assert needle in str(info.value)


def test_describe_is_the_agents_row() -> None:
    row = live("w", tools=[{"name": "t", "description": "d"}]).describe()
    assert row["agent_id"] == "w" and row["connection_type"] == "websocket" and row["status"] == "online"
    assert row["tools"] == [
        {
            "name": "t",
            "description": "d",
            "parameters": {"type": "object", "properties": {}},
            "requires_approval": False,
        }
    ]
