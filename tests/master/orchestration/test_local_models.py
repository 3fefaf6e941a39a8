"""A hub on a local model's server: what it sends, how it streams, how it repairs weak tool calls.

A real master in this event loop, a WebSocket agent with a ``multiply`` tool, and a scripted
server imitating llama.cpp (:meth:`Quirks.llamacpp`: it refuses ``"content": null`` and
reports its window). The doors are driven by their clients: ``httpx`` for the native SSE, the
official ``openai`` client for the OpenAI-compatible door.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from openagent import OrchestratorActionAgent, ToolSchema
from openagent.config import ClientConfig
from openagent.testing import EmptyReply, Quirks, ScriptedOpenAIServer, TextReply
from tests.factories import EVERY_TENANT, InProcessMaster, in_process_master

KEY = "local-model-key"
LONG_ID = "call__0_calc__multiply_cmpl-78c618cb-1d5e-4a8e-9d0b-5f0a2c6e7b11-and-more"
MULTIPLY = ToolSchema(
    name="multiply",
    description="Multiply two numbers",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
)


@dataclass
class Hub:
    master: InProcessMaster
    llm: ScriptedOpenAIServer
    http: httpx.AsyncClient
    calls: list[dict[str, Any]]

    async def ask(self, query: str, **extra: Any) -> httpx.Response:
        return await self.http.post("/query", json={"query": query, **extra})

    async def repairs(self) -> dict[str, float]:
        text = (await self.http.get("/metrics")).text
        return {
            sample.labels["kind"]: sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "openagent_llm_tool_call_repairs_total"
        }


@pytest.fixture
def local_llm() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(quirks=Quirks.llamacpp()) as server:
        yield server


@pytest.fixture
async def hub(local_llm: ScriptedOpenAIServer) -> AsyncIterator[Hub]:
    calls: list[dict[str, Any]] = []

    async def handler(tool_name: str, arguments: dict[str, Any], **_: Any) -> dict[str, Any]:
        calls.append(arguments)
        return {"product": arguments["a"] * arguments["b"]}

    async with in_process_master(
        openai_base_url=local_llm.base_url, openai_api_key="local", openagent_api_key=KEY
    ) as master:
        config = ClientConfig(master_ws=master.ws_url, api_key=KEY)
        async with OrchestratorActionAgent("calc", [MULTIPLY], handler, config=config):
            async with asyncio.timeout(30):
                while "calc" not in master.services.agents.known_ids(EVERY_TENANT):
                    await asyncio.sleep(0.01)
            headers = {"Authorization": f"Bearer {KEY}"}
            async with httpx.AsyncClient(base_url=master.base_url, headers=headers, timeout=60) as http:
                yield Hub(master, local_llm, http, calls)


def held_reply(text: str) -> tuple[TextReply, threading.Event, list[bool]]:
    """A reply whose second word waits (up to 30 s) until the test saw the first one arrive."""
    seen_first = threading.Event()
    held: list[bool] = []

    def before(word: int) -> None:
        if word == 1:
            held.append(seen_first.wait(30))

    return TextReply(text, token_delay=0.1, before_token=before), seen_first, held


async def test_tokens_reach_the_native_sse_and_the_openai_door_as_they_are_written(hub: Hub) -> None:
    reply, seen_first, held = held_reply("Hello from a slow model.")
    hub.llm.add(reply)
    tokens: list[str] = []
    async with hub.http.stream("POST", "/query", json={"query": "hi", "stream": True}) as response:
        event = None
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "token":
                tokens.append(json.loads(line[6:])["text"])
                seen_first.set()  # the second word is sent only now
    assert held == [True] and "".join(tokens) == "Hello from a slow model."

    reply, seen_first, held = held_reply("Hello again, slowly.")
    hub.llm.add(reply)
    client = openai.AsyncOpenAI(base_url=f"{hub.master.base_url}/v1", api_key=KEY, max_retries=0)
    try:
        stream = await client.chat.completions.create(
            model="openagent", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        content: list[str] = []
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                content.append(chunk.choices[0].delta.content)
                seen_first.set()
    finally:
        await client.close()
    assert held == [True] and "".join(content) == "Hello again, slowly."


async def test_a_tool_round_on_llamacpp_sends_what_its_template_takes(hub: Hub) -> None:
    hub.llm.add_tool_call("calc__multiply", {"a": 12, "b": 7}, call_id=LONG_ID)
    hub.llm.add_text("84.")
    answer = (await hub.ask("What is 12 times 7?")).json()
    assert answer["success"] and answer["answer"] == "84." and hub.calls == [{"a": 12, "b": 7}]
    first, second = hub.llm.requests
    assert first["tool_choice"] == "auto" and first["max_tokens"] > 0
    assistant, tool = second["messages"][-2:]
    assert assistant["content"] == "" and len(tool["tool_call_id"]) <= 40
    assert assistant["tool_calls"][0]["id"] == tool["tool_call_id"]
    assert answer["usage"]["total_tokens"] > 0


MALFORMED: list[tuple[dict[str, Any] | str, str, str, str]] = [
    ('{"a": 12, "b": ', "calc__multiply", "bad_json", "arguments are not valid JSON"),
    (
        {"a": 12, "b": 7},
        "calc__times",
        "unknown_tool",
        "unknown tool 'calc__times'; the tools are: calc__multiply",
    ),
    ({"a": "twelve"}, "calc__multiply", "bad_arguments", "invalid arguments for 'multiply'"),
]
"""Malformed calls: the arguments or name the model sends, the kind counted, the error it sees."""


async def test_a_malformed_call_gets_one_repair_round_with_the_exact_error(hub: Hub) -> None:
    for arguments, name, kind, error in MALFORMED:  # one hub for all: a master per case is slow
        hub.llm.reset()
        hub.calls.clear()
        before = (await hub.repairs()).get(kind, 0.0)
        hub.llm.add_tool_call(name, arguments)
        hub.llm.add_tool_call("calc__multiply", {"a": 12, "b": 7})
        hub.llm.add_text("84.")
        answer = (await hub.ask("What is 12 times 7?")).json()
        assert answer["success"] and answer["answer"] == "84." and hub.calls == [{"a": 12, "b": 7}], kind
        repair = hub.llm.requests[1]
        assert repair["tools"], "the repair round offers the tools again"
        assert error in repair["messages"][-1]["content"]  # the model sees the exact error
        assert (await hub.repairs())[kind] == before + 1


async def test_after_a_failed_repair_the_master_answers_plainly(hub: Hub) -> None:
    hub.llm.add_tool_call("calc.times", {"a": 1})  # a name the API refuses to see again
    hub.llm.add_tool_call("calc__times", {"a": 2})
    hub.llm.add_text("I could not use the tools.")
    response = await hub.ask("What is 12 times 7?")
    assert response.status_code == 200 and response.json()["answer"] == "I could not use the tools."
    assert "tools" not in hub.llm.requests[2] and hub.calls == []
    recalled = hub.llm.requests[1]["messages"][-2]["tool_calls"][0]["function"]["name"]
    assert recalled == "calc_times"


TEXT_CALLS = [
    'Let me call it. <tool_call>{"name": "calc__multiply", "arguments": {"a": 12, "b": 7}}</tool_call>',
    'Calling:\n```json\n{"name": "calc__multiply", "arguments": {"a": 12, "b": 7}}\n```',
]


async def test_a_call_written_as_text_is_run(hub: Hub) -> None:
    for text in TEXT_CALLS:
        hub.llm.reset()
        hub.calls.clear()
        before = (await hub.repairs()).get("text_call", 0.0)
        hub.llm.add_text(text)
        hub.llm.add_text("84.")
        answer = (await hub.ask("What is 12 times 7?")).json()
        assert answer["answer"] == "84." and hub.calls == [{"a": 12, "b": 7}], text
        assert hub.llm.requests[1]["messages"][-1]["role"] == "tool"
        assert (await hub.repairs())["text_call"] == before + 1


async def test_a_model_failure_after_a_tool_ran_says_so_and_keeps_the_result(hub: Hub) -> None:
    hub.llm.add_tool_call("calc__multiply", {"a": 12, "b": 7})
    hub.llm.add_error(500, "template exploded", retry=False)
    response = await hub.ask("What is 12 times 7?")
    assert response.status_code == 200
    answer = response.json()
    assert answer["status"] == "stopped" and answer["stopped_by"] == "llm_error"
    assert "template exploded" in answer["answer"] and '"product": 84' in answer["answer"]
    assert hub.calls == [{"a": 12, "b": 7}]


async def test_an_empty_answer_is_an_error_not_a_success(hub: Hub) -> None:
    hub.llm.add(EmptyReply())
    response = await hub.ask("hi", stream=False)
    assert response.status_code == 502 and response.json()["error_code"] == "llm_empty_answer"


async def test_a_small_window_gets_the_most_relevant_tools_and_never_overflows() -> None:
    filler = " ".join(f"word{i}" for i in range(60))
    tools = [
        ToolSchema(
            name=f"tool_{i:02d}",
            description=f"Does task number {i}. {filler}",
            parameters={"type": "object", "properties": {"text": {"type": "string"}}},
        )
        for i in range(19)
    ]
    tools.append(
        ToolSchema(
            name="weather",
            description=f"The weather forecast of a city. {filler}",
            parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        )
    )

    async def handler(tool_name: str, arguments: dict[str, Any], **_: Any) -> dict[str, Any]:
        return {"sky": "clear"}

    with ScriptedOpenAIServer(quirks=Quirks.llamacpp(context_size=2048)) as small:
        small.add_tool_call("many__weather", {"city": "Paris"})
        small.add_text("Clear in Paris.")
        async with in_process_master(
            openai_base_url=small.base_url,
            openai_api_key="local",
            openagent_api_key=KEY,
            openagent_llm_max_tokens=256,
        ) as master:
            config = ClientConfig(master_ws=master.ws_url, api_key=KEY)
            async with OrchestratorActionAgent("many", tools, handler, config=config):
                async with asyncio.timeout(30):
                    while "many" not in master.services.agents.known_ids(EVERY_TENANT):
                        await asyncio.sleep(0.01)
                headers = {"Authorization": f"Bearer {KEY}"}
                async with httpx.AsyncClient(base_url=master.base_url, headers=headers, timeout=60) as http:
                    response = await http.post(
                        "/query", json={"query": "What is the weather forecast in Paris?"}
                    )
        assert response.status_code == 200 and response.json()["answer"] == "Clear in Paris."
        first = small.requests[0]
        offered = [tool["function"]["name"] for tool in first["tools"]]
        assert "many__weather" in offered and len(offered) < 20  # the relevant one first, not all
        assert all(r.get("tools") is not None or r["messages"] for r in small.requests)
        assert len(small.requests) == 2  # none refused for its size
