"""``master.builder.analysis``: agent definitions read from source, never imported."""

from __future__ import annotations

import pytest

from master.builder.analysis import analyse
from tests.factories import ROOT
from tests.master.builder.samples import NEGOTIATOR, UNIT_CONVERTER


@pytest.mark.parametrize(
    ("path", "agent_id", "transport", "tools"),
    [
        ("sample_agents/action_weather.py", "weather-agent", "websocket", ["get_weather"]),
        ("sample_agents/negotiation_seller.py", "seller-agent", "websocket", ["get_quote"]),
        (
            "sample_agents/demo_invocation_agent.py",
            "demo-invocation-agent",
            "invocation",
            ["echo", "get_time", "long_task"],
        ),
    ],
)
def test_the_sample_agents_are_read(path: str, agent_id: str, transport: str, tools: list[str]) -> None:
    [agent] = analyse((ROOT / path).read_text()).agents
    assert (agent.agent_id, agent.transport) == (agent_id, transport)
    assert [tool["name"] for tool in agent.tools] == tools
    assert not agent.problems


def test_a_generated_module_and_its_collaboration_handler() -> None:
    [agent] = analyse(UNIT_CONVERTER).agents
    assert agent.agent_id == "unit-converter"
    assert agent.tools[0]["parameters"]["required"] == ["value", "from_unit", "to_unit"]
    [negotiator] = analyse(NEGOTIATOR).agents
    assert negotiator.collaboration_handler == "handle_collaboration"


def test_a_subclass_defines_its_agent_through_super_init() -> None:
    source = """
from openagent import OrchestratorWebSocketActionAgent, ToolSchema
TOOLS = [{"name": "ping", "description": "Ping"}]
class Pinger(OrchestratorWebSocketActionAgent):
    def __init__(self, config=None):
        super().__init__("pinger", TOOLS, config=config)
    async def handle_tool(self, tool_name, arguments, *, progress_callback):
        return "pong"
"""
    [agent] = analyse(source).agents
    assert (agent.agent_id, [t["name"] for t in agent.tools]) == ("pinger", ["ping"])


def test_values_computed_at_run_time_are_reported_not_guessed() -> None:
    source = """
import os
from openagent import OrchestratorActionAgent
agent = OrchestratorActionAgent(os.environ["AGENT"], load_tools(), handler)
"""
    [agent] = analyse(source).agents
    assert agent.agent_id is None
    assert any("computed at run time" in problem for problem in agent.problems)


def test_analysis_does_not_execute_the_module(tmp_path: object) -> None:
    source = "raise SystemExit('imported!')\nfrom openagent import OrchestratorActionAgent\nOrchestratorActionAgent('x', [], h)\n"
    [agent] = analyse(source).agents
    assert agent.agent_id == "x"
