"""A round that calls a tool the asker runs itself pauses the run; the results continue it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from master.agents.toolbox import Toolbox
from master.llm.model import ChatMessage, ChatResult, FunctionChatModel, ToolCallRequest
from master.orchestration.budgets import BudgetTracker
from master.orchestration.orchestrator import Orchestrator, RunHooks
from tests.factories import WEATHER_TOOL, answering_agent, dispatcher_for_tests

CLOCK = {
    "type": "function",
    "function": {"name": "local_time", "parameters": {"type": "object", "properties": {}}},
}


def _model(messages: Sequence[ChatMessage], tools: Any) -> ChatResult:
    if messages[-1]["role"] == "tool":
        results = [m["content"] for m in messages if m["role"] == "tool"]
        return ChatResult(" | ".join(results))
    return ChatResult(
        "Looking.",
        [
            ToolCallRequest("c1", "weather__get_weather", '{"city": "Paris"}'),
            ToolCallRequest("c2", "local_time", "{}"),
        ],
    )


async def test_the_agents_calls_run_and_the_askers_wait() -> None:
    async with dispatcher_for_tests() as dispatcher:
        agent = answering_agent(dispatcher, "weather", [WEATHER_TOOL], lambda name, args: {"sunny": True})
        toolbox = Toolbox([agent])
        orchestrator = Orchestrator(FunctionChatModel(_model), dispatcher, auto_max_steps=5)
        messages: list[ChatMessage] = [{"role": "user", "content": "Weather and time in Paris?"}]
        tools = [*toolbox.openai_tools(), CLOCK]
        hooks = RunHooks(external=frozenset({"local_time"}))

        def budget() -> BudgetTracker:
            return BudgetTracker(max_tool_calls=10, max_tokens=100_000, max_seconds=60)

        paused = await orchestrator.run(
            messages=messages,
            tools=tools,
            toolbox=toolbox,
            model="m",
            auto_mode=False,
            budget=budget(),
            hooks=hooks,
        )
        assert paused.status == "awaiting_tool_results" and paused.answer == "Looking."
        assert [(call.id, call.name) for call in paused.pending] == [("c2", "local_time")]
        assert [run.tool_name for run in paused.tool_runs] == ["get_weather"] and paused.steps == 1
        assert [c["id"] for c in messages[-2]["tool_calls"]] == ["c1", "c2"]  # the round, as the model asked
        assert messages[-1]["tool_call_id"] == "c1" and json.loads(messages[-1]["content"]) == {
            "result": {"sunny": True}
        }

        messages.append({"role": "tool", "tool_call_id": "c2", "content": "10:30"})
        done = await orchestrator.run(
            messages=messages,
            tools=tools,
            toolbox=toolbox,
            model="m",
            auto_mode=False,
            budget=budget(),
            hooks=hooks,
            steps_done=paused.steps,
        )
    assert done.status == "completed" and done.answer == '{"result": {"sunny": true}} | 10:30'
    assert done.steps == 1 and not done.pending  # one tool round: no tools offered after it
