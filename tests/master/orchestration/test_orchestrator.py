"""Auto mode, step limit, plans and approval, prompt profiles, summarization, budgets and SSE, end to end."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from master.agents.toolbox import Toolbox
from master.conversation.outcome import Outcome
from master.llm.chat_endpoint import ChatEndpoint
from master.llm.model import (
    ChatMessage,
    ChatResult,
    FunctionChatModel,
    OpenAIChatModel,
    ToolCallRequest,
)
from master.orchestration.budgets import BudgetTracker
from master.orchestration.orchestrator import Orchestrator, RunHooks
from openagent import ClientConfig, OrchestratorActionAgent, ToolSchema
from openagent.testing import ScriptedOpenAIServer
from protocol import ToolCall
from tests.factories import (
    InProcessMaster,
    MasterProcess,
    answering_agent,
    dispatcher_for_tests,
    in_process_master,
)
from tests.master.conversation.test_context import faithful

COUNTER_TOOL = ToolSchema(
    name="step",
    description="Do one step of work",
    parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
)


def counter_agent(
    master: MasterProcess | InProcessMaster, agent_id: str, calls: list[int], delay: float = 0.0
) -> OrchestratorActionAgent:
    async def handler(tool_name: str, arguments: dict[str, Any], *, progress_callback: Any) -> dict[str, Any]:
        calls.append(arguments["n"])
        await progress_callback(f"working on {arguments['n']}", 0.5)
        await asyncio.sleep(delay)
        return {"done": arguments["n"]}

    config = ClientConfig(master_ws=master.ws_url, api_key=None)
    return OrchestratorActionAgent(agent_id, [COUNTER_TOOL], handler, config=config)


@pytest.fixture
async def http(master: MasterProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as client:
        yield client


async def session_turns(redis_client: aioredis.Redis, session_id: str) -> list[dict[str, Any]]:
    raw = await redis_client.get(f"session:{session_id}")
    return json.loads(raw) if raw else []


async def test_three_step_auto_mode_records_each_step(
    master: MasterProcess, http: httpx.AsyncClient, llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    calls: list[int] = []
    async with counter_agent(master, "auto-agent", calls):
        for n in (1, 2, 3):
            llm.add_tool_call("auto-agent__step", {"n": n})
        llm.add_text("Did steps 1, 2 and 3.")
        body = (await http.post("/query", json={"query": "do three steps", "auto_mode": True})).json()
    assert body["success"] and body["status"] == "completed" and body["answer"] == "Did steps 1, 2 and 3."
    assert calls == [1, 2, 3]
    assert body["agents_used"] == [{"agent_id": "auto-agent", "tool_name": "step"}]
    turns = await session_turns(redis_client, body["session_id"])
    assert [t["decision"] for t in turns] == ["call_tool", "call_tool", "call_tool", "final_answer"]
    assert [t["result"] for t in turns[:3]] == [{"done": 1}, {"done": 2}, {"done": 3}]
    assert turns[-1]["steps"] == 3 and turns[-1]["answer"] == "Did steps 1, 2 and 3."
    assert all("tools" in request for request in llm.requests)  # tools offered at every round


async def test_step_limit_ends_with_an_answer_that_says_so(llm: ScriptedOpenAIServer) -> None:
    scripted_llm = llm
    async with in_process_master(openai_base_url=llm.base_url, orchestrator_auto_max_steps=2) as m:
        calls: list[int] = []
        async with counter_agent(m, "limited-agent", calls), httpx.AsyncClient(timeout=30) as http:
            for n in (1, 2, 3):
                scripted_llm.add_tool_call("limited-agent__step", {"n": n})
            scripted_llm.add_text("Did 2 of the steps; step 3 remains.")
            body = (
                await http.post(f"{m.base_url}/query", json={"query": "many steps", "auto_mode": True})
            ).json()
    assert calls == [1, 2]
    assert body["status"] == "stopped" and body["stopped_by"] == "max_steps"
    assert body["answer"].startswith("[Stopped at the step limit of 2 tool rounds.]")
    last = scripted_llm.requests[-1]
    assert "tools" not in last and "step limit of 2" in last["messages"][-1]["content"]


def plan_call(steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {"summary": "count", "steps": steps}


async def test_plan_approval_then_execution_after_restart(
    llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    """The plan lives in the session: a new master (same Redis, same port) executes it."""
    scripted_llm = llm
    steps = [
        {"agent_id": "plan-agent", "tool_name": "step", "intent": "first", "arguments": {"n": 1}},
        {"agent_id": "plan-agent", "tool_name": "step", "intent": "second", "arguments": {"n": 2}},
    ]
    calls: list[int] = []
    async with in_process_master(openai_base_url=llm.base_url) as first:
        async with counter_agent(first, "plan-agent", calls), httpx.AsyncClient(timeout=30) as http:
            scripted_llm.add_tool_call("submit_plan", plan_call(steps))
            proposed = (
                await http.post(
                    f"{first.base_url}/query",
                    json={"query": "count to two", "auto_mode": True, "auto_require_plan_approval": True},
                )
            ).json()
        port = first.port
    assert proposed["status"] == "awaiting_approval" and calls == []
    plan = proposed["plan"]
    assert [s["arguments"] for s in plan["steps"]] == [{"n": 1}, {"n": 2}]
    assert "plan-agent.step" in proposed["answer"]
    assert [t["function"]["name"] for t in scripted_llm.requests[0]["tools"]] == ["submit_plan"]

    async with in_process_master(openai_base_url=llm.base_url, port=port) as second:
        async with counter_agent(second, "plan-agent", calls), httpx.AsyncClient(timeout=30) as http:
            # a refused (edited) plan runs nothing
            bad = {
                "plan_id": plan["plan_id"],
                "steps": [*steps, {"agent_id": "plan-agent", "tool_name": "nope"}],
            }
            refused = await http.post(
                f"{second.base_url}/query",
                json={"query": "go", "session_id": proposed["session_id"], "auto_plan_execute": bad},
            )
            assert refused.status_code == 400, refused.text
            assert "step 3" in refused.json()["error"] and calls == []

            scripted_llm.add_text("Counted to two.")
            edited = {"plan_id": plan["plan_id"], "steps": [*steps, {**steps[0], "arguments": {"n": 3}}]}
            done = (
                await http.post(
                    f"{second.base_url}/query",
                    json={"query": "go", "session_id": proposed["session_id"], "auto_plan_execute": edited},
                )
            ).json()
            assert done["success"] and done["answer"] == "Counted to two." and calls == [1, 2, 3]
            again = await http.post(
                f"{second.base_url}/query",
                json={
                    "query": "go",
                    "session_id": proposed["session_id"],
                    "auto_plan_execute": {"plan_id": plan["plan_id"]},
                },
            )
            assert again.status_code == 409
    turns = await session_turns(redis_client, proposed["session_id"])
    assert [t["decision"] for t in turns] == ["plan", "call_tool", "call_tool", "call_tool", "plan_executed"]


@pytest.mark.parametrize(
    ("profile", "needle"),
    [("default", "concise"), ("auto_multi", "several tools"), ("reasoning", "step by step")],
)
async def test_each_prompt_profile_reaches_the_model(
    http: httpx.AsyncClient, llm: ScriptedOpenAIServer, profile: str, needle: str
) -> None:
    llm.add_text("ok")
    await http.post("/query", json={"query": "x", "orchestrator_prompt_profile": profile})
    assert needle in llm.requests[0]["messages"][0]["content"]


async def test_summarization_with_small_limits(
    llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    scripted_llm = llm
    limits = {
        "orchestrator_context_max_tokens": 1200,
        "orchestrator_recent_turns": 2,
        "summarizer_model": "gpt-4o",
    }
    long_text = "The quick brown fox jumps over the lazy dog. " * 25
    async with (
        in_process_master(openai_base_url=llm.base_url, **limits) as m,
        httpx.AsyncClient(base_url=m.base_url, timeout=30) as http,
    ):
        session_id = None
        scripted_llm.set_handler(  # the summarizer keeps the numbers of what it covers
            lambda request: (
                faithful(request["messages"][-1]["content"])
                if request["model"] == "gpt-4o"
                else f"answer {len(scripted_llm.requests)}"
            )
        )
        for i in range(6):
            body = (
                await http.post("/query", json={"query": f"q{i} {long_text}", "session_id": session_id})
            ).json()
            session_id = body["session_id"]
        summary_requests = [r for r in scripted_llm.requests if r["model"] == "gpt-4o"]
        assert summary_requests, "no summarization happened"
        turns = await session_turns(redis_client, session_id)
        summaries = [(i, t) for i, t in enumerate(turns) if t["decision"] == "summary"]
        index, summary = summaries[-1]
        covered = summary["covers_through_index"]
        assert covered < index and turns[covered]["decision"] != "summary"
        # the next query sees the summaries, then only the raw turns after the last one
        scripted_llm.add_text("ok")
        await http.post("/query", json={"query": "and now?", "session_id": session_id})
        messages = scripted_llm.requests[-1]["messages"]
        assert (
            messages[1]["role"] == "system"
            and "Summary of the earlier conversation" in messages[1]["content"]
        )
        raw_after = [t for i, t in enumerate(turns) if i > covered and t["decision"] != "summary"]
        assert [m["content"] for m in messages if m["role"] == "user"][:-1] == [t["query"] for t in raw_after]


@pytest.mark.parametrize(
    ("budget", "stopped_by", "needle"),
    [
        ({"max_tool_calls": 1}, "max_tool_calls", "tool-call budget"),
        ({"max_tokens": 1}, "max_tokens", "token budget"),
    ],
)
async def test_budgets_stop_a_run(
    master: MasterProcess,
    http: httpx.AsyncClient,
    llm: ScriptedOpenAIServer,
    redis_client: aioredis.Redis,
    budget: dict[str, Any],
    stopped_by: str,
    needle: str,
) -> None:
    calls: list[int] = []
    async with counter_agent(master, f"budget-{stopped_by}", calls):
        llm.add_tool_calls(
            [(f"budget-{stopped_by}__step", {"n": 1}), (f"budget-{stopped_by}__step", {"n": 2})]
        )
        llm.add_text("never reached")
        body = (await http.post("/query", json={"query": "work", "auto_mode": True, "budget": budget})).json()
    assert body["success"] and body["status"] == "stopped" and body["stopped_by"] == stopped_by
    assert needle in body["answer"]
    turns = await session_turns(redis_client, body["session_id"])
    assert turns[-1]["stopped_by"] == stopped_by
    if stopped_by == "max_tool_calls":
        assert calls == [1]


async def test_time_budget_stops_a_slow_run(
    master: MasterProcess, http: httpx.AsyncClient, llm: ScriptedOpenAIServer
) -> None:
    calls: list[int] = []
    async with counter_agent(master, "slow-budget", calls, delay=5):
        llm.add_tool_call("slow-budget__step", {"n": 1})
        response = await http.post("/query", json={"query": "slow", "budget": {"max_seconds": 0.5}})
    body = response.json()
    assert body["stopped_by"] == "max_seconds" and "time budget (0.5 s)" in body["answer"]


async def test_sse_stream_events_in_order(
    master: MasterProcess, http: httpx.AsyncClient, llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    calls: list[int] = []
    async with counter_agent(master, "stream-agent", calls, delay=0.1):
        llm.add_tool_call("stream-agent__step", {"n": 7})
        llm.add_text("Step seven is done.")
        events: list[tuple[str, dict[str, Any]]] = []
        async with http.stream("POST", "/query", json={"query": "do step 7", "stream": True}) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            event = None
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event:
                    events.append((event, json.loads(line[6:])))
    names = [name for name, _ in events]
    assert names[0] == "step" and names[-1] == "query_result"
    assert (
        names.index("tool_call")
        < names.index("tool_progress")
        < names.index("tool_result")
        < names.index("token")
    )
    tokens = "".join(data["text"] for name, data in events if name == "token")
    assert tokens == "Step seven is done."
    result = events[-1][1]
    assert result["success"] and result["answer"] == "Step seven is done."
    assert dict(events)["tool_result"]["result"] == {"done": 7}


async def test_sse_client_disconnect_keeps_the_turns(
    master: MasterProcess, llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    calls: list[int] = []
    async with counter_agent(master, "drop-agent", calls, delay=0.5):
        llm.add_tool_call("drop-agent__step", {"n": 1})
        llm.add_text("Finished anyway.")
        async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
            async with http.stream("POST", "/query", json={"query": "go", "stream": True}) as response:
                async for line in response.aiter_lines():
                    if line.startswith("event: tool_call"):
                        break  # the client goes away mid-run
        async with asyncio.timeout(90):
            while True:
                keys = [k async for k in redis_client.scan_iter("session:*")]
                for key in keys:
                    turns = json.loads(await redis_client.get(key) or "[]")
                    if turns and turns[-1].get("answer") == "Finished anyway.":
                        assert turns[-1]["result"] == {"done": 1}
                        return
                await asyncio.sleep(0.1)


async def test_budget_override_validation(http: httpx.AsyncClient) -> None:
    response = await http.post("/query", json={"query": "x", "budget": {"max_seconds": -1}})
    assert response.status_code == 422


# In-process: the orchestrator with a function-driven model and a real dispatcher.

STEP_TOOL = {**COUNTER_TOOL.model_dump(exclude_none=True)}


def budget(**limits: Any) -> BudgetTracker:
    values: dict[str, Any] = {"max_tool_calls": 50, "max_tokens": 10**6, "max_seconds": 600.0, **limits}
    return BudgetTracker(**values)


class Recorded:
    """A model that asks for ``step`` on every request and records what it was offered."""

    def __init__(self, tool_name: str, rounds_wanting_tools: int = 10**6) -> None:
        self.offered: list[list[str] | None] = []
        self._tool_name = tool_name
        self._wanting = rounds_wanting_tools

    def __call__(self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None) -> ChatResult:
        self.offered.append(None if tools is None else [t["function"]["name"] for t in tools])
        if len(self.offered) <= self._wanting:
            n = len(self.offered)
            return ChatResult(None, [ToolCallRequest(f"c{n}", self._tool_name, json.dumps({"n": n}))])
        return ChatResult(f"answer after {len(self.offered) - 1} rounds")


async def run_once(
    model: Recorded, *, auto_mode: bool, max_steps: int = 20
) -> tuple[Outcome, list[ToolCall]]:
    calls: list[ToolCall] = []
    async with dispatcher_for_tests() as dispatcher:
        agent = answering_agent(
            dispatcher, "unit-agent", [STEP_TOOL], lambda name, args: {"done": args["n"]}, calls=calls
        )
        toolbox = Toolbox([agent])
        orchestrator = Orchestrator(FunctionChatModel(model), dispatcher, auto_max_steps=max_steps)
        outcome = await orchestrator.run(
            messages=[{"role": "user", "content": "work"}],
            tools=toolbox.openai_tools(),
            toolbox=toolbox,
            model="m",
            auto_mode=auto_mode,
            budget=budget(),
            hooks=RunHooks(),
        )
    return outcome, calls


async def test_without_auto_mode_one_tool_round_then_the_answer_without_tools() -> None:
    # The model keeps asking for tools: without auto mode it gets one round, and the
    # second request offers no tools at all, so the model has to answer.
    model = Recorded("unit-agent__step")
    outcome, calls = await run_once(model, auto_mode=False)
    assert model.offered == [["unit-agent__step"], None]
    assert [call.arguments for call in calls] == [{"n": 1}]
    assert outcome.steps == 1 and outcome.status == "completed"
    assert "unit-agent.step returned" in outcome.answer  # the model wrote no text: what was done


async def test_without_auto_mode_the_second_request_has_the_result_and_no_tools() -> None:
    model = Recorded("unit-agent__step", rounds_wanting_tools=1)
    outcome, calls = await run_once(model, auto_mode=False)
    assert model.offered == [["unit-agent__step"], None]
    assert outcome.answer == "answer after 1 rounds" and len(calls) == 1


async def test_auto_mode_offers_tools_every_round_until_the_step_limit() -> None:
    model = Recorded("unit-agent__step")
    outcome, calls = await run_once(model, auto_mode=True, max_steps=3)
    assert model.offered == [["unit-agent__step"]] * 4 + [None]
    assert len(calls) == 3 and outcome.stopped_by == "max_steps"


async def test_tools_are_not_offered_on_the_wire_in_the_second_round(
    llm: ScriptedOpenAIServer,
) -> None:
    """The same promise through the real LLM client: the second request has no ``tools`` key."""
    llm.add_tool_call("wire-agent__step", {"n": 1})
    llm.add_tool_call("wire-agent__step", {"n": 2})  # a model that asks again is not obeyed
    async with dispatcher_for_tests() as dispatcher:
        agent = answering_agent(dispatcher, "wire-agent", [STEP_TOOL], lambda name, args: {"done": args["n"]})
        toolbox = Toolbox([agent])
        chat = OpenAIChatModel(ChatEndpoint(api_key="t", base_url=llm.base_url, timeout=30, max_retries=0))
        try:
            outcome = await Orchestrator(chat, dispatcher, auto_max_steps=20).run(
                messages=[{"role": "user", "content": "work"}],
                tools=toolbox.openai_tools(),
                toolbox=toolbox,
                model="m",
                auto_mode=False,
                budget=budget(),
                hooks=RunHooks(),
            )
        finally:
            await chat.aclose()
    first, second = llm.requests
    assert [t["function"]["name"] for t in first["tools"]] == ["wire-agent__step"]
    assert "tools" not in second and "tool_choice" not in second
    assert second["messages"][-1]["role"] == "tool"
    assert outcome.steps == 1
