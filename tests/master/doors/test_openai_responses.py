"""The Responses API (``/v1/responses``), through the official ``openai`` client and the OpenAI
Agents SDK in its default settings (its Responses model).

One real master for the module (lifespan, Redis, uvicorn on loopback) whose LLM is the scripted
server, and a WebSocket agent of the SDK with a ``multiply`` tool and a ``transfer`` tool that
needs a person's approval.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest
import pytest_asyncio

from openagent import OrchestratorActionAgent, ToolSchema
from openagent.config import ClientConfig
from openagent.testing import ScriptedOpenAIServer, TextReply, ToolCall
from tests.factories import EVERY_TENANT, InProcessMaster, in_process_master

pytestmark = pytest.mark.asyncio(loop_scope="module")

KEY = "responses-door-key"
MULTIPLY = ToolSchema(
    name="multiply",
    description="Multiply two numbers",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
)
TRANSFER = ToolSchema(
    name="transfer",
    description="Transfer money to someone",
    parameters={
        "type": "object",
        "properties": {"to": {"type": "string"}, "amount": {"type": "number"}},
        "required": ["to", "amount"],
    },
    requires_approval=True,
)
CLOCK_TOOL = {
    "type": "function",
    "name": "local_time",
    "description": "The time where the user is",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@dataclass
class Hub:
    master: InProcessMaster
    llm: ScriptedOpenAIServer
    calls: list[dict[str, Any]]
    client: openai.AsyncOpenAI

    def http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.master.base_url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60
        )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(scripted_llm: ScriptedOpenAIServer) -> AsyncIterator[Hub]:
    calls: list[dict[str, Any]] = []

    async def handler(tool_name: str, arguments: dict[str, Any], *, progress_callback: Any) -> dict[str, Any]:
        calls.append(arguments)
        if tool_name == "transfer":
            return {"sent": arguments["amount"]}
        return {"product": arguments["a"] * arguments["b"]}

    async with in_process_master(
        openai_base_url=scripted_llm.base_url, openai_api_key="scripted", openagent_api_key=KEY
    ) as master:
        config = ClientConfig(master_ws=master.ws_url, api_key=KEY)
        async with OrchestratorActionAgent("calc", [MULTIPLY, TRANSFER], handler, config=config):
            async with asyncio.timeout(30):
                while "calc" not in master.services.agents.known_ids(EVERY_TENANT):
                    await asyncio.sleep(0.01)
            client = openai.AsyncOpenAI(
                base_url=f"{master.base_url}/v1", api_key=KEY, max_retries=0, timeout=60
            )
            try:
                yield Hub(master, scripted_llm, calls, client)
            finally:
                await client.close()


@pytest.fixture
def hub(shared: Hub, llm: ScriptedOpenAIServer) -> Hub:
    shared.calls.clear()
    return shared


async def test_a_plain_answer_through_a_hub_agent_then_retrieved(hub: Hub) -> None:
    hub.llm.add_tool_call("calc__multiply", {"a": 12, "b": 7})
    hub.llm.add_text("12 times 7 is 84.")
    response = await hub.client.responses.create(
        model="openagent", input="What is 12 times 7?", instructions="Be brief."
    )
    assert response.object == "response" and response.status == "completed"
    assert response.output_text == "12 times 7 is 84."
    assert response.output[0].type == "message"
    assert hub.calls == [{"a": 12, "b": 7}]
    assert response.usage is not None and response.usage.input_tokens > 0
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens
    assert response.instructions == "Be brief."
    sent = hub.llm.requests[0]["messages"]
    assert any(m["role"] == "system" and m["content"] == "Be brief." for m in sent)
    again = await hub.client.responses.retrieve(response.id)
    assert again.id == response.id and again.output_text == "12 times 7 is 84."
    await hub.client.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError, match="no response"):
        await hub.client.responses.retrieve(response.id)


async def test_previous_response_id_continues_the_session(hub: Hub) -> None:
    hub.llm.add_text("Noted: your name is Ada.")
    hub.llm.add_text("Your name is Ada.")
    first = await hub.client.responses.create(model="openagent", input="My name is Ada.")
    second = await hub.client.responses.create(
        model="openagent", input="What is my name?", previous_response_id=first.id
    )
    assert second.output_text == "Your name is Ada." and second.previous_response_id == first.id
    extras = [r.model_extra["openagent"] for r in (first, second)]  # type: ignore[index]
    assert extras[0]["session_id"] == extras[1]["session_id"]
    sent = json.dumps(hub.llm.requests[-1]["messages"])
    assert "My name is Ada." in sent and "Noted: your name is Ada." in sent
    with pytest.raises(openai.NotFoundError, match="previous response") as missing:
        await hub.client.responses.create(model="openagent", input="hi", previous_response_id="resp_none")
    assert missing.value.body["param"] == "previous_response_id"  # type: ignore[index]
    hub.llm.add_text("Hello.")
    unstored = await hub.client.responses.create(model="openagent", input="Hello", store=False)
    with pytest.raises(openai.NotFoundError):
        await hub.client.responses.retrieve(unstored.id)


async def test_streamed_text_and_client_function_call_then_its_output(hub: Hub) -> None:
    hub.llm.add_tool_calls([ToolCall("local_time", {"city": "Paris"}, "call_clock1")])
    hub.llm.add_text("It is 10:30 in Paris.")
    kinds: list[str] = []
    final = None
    async with hub.client.responses.stream(
        model="openagent",
        input="What time is it in Paris?",
        tools=[CLOCK_TOOL],  # type: ignore[list-item]
    ) as stream:
        async for event in stream:
            kinds.append(event.type)
        final = await stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert "response.function_call_arguments.delta" in kinds and kinds[-1] == "response.completed"
    [call] = [item for item in final.output if item.type == "function_call"]
    assert (call.call_id, call.name, json.loads(call.arguments)) == (
        "call_clock1",
        "local_time",
        {"city": "Paris"},
    )
    numbers = []  # the raw stream: numbered events, usage in the last
    hub.llm.add_text("It is 10:30 in Paris.")
    streamed = await hub.client.responses.create(
        model="openagent",
        previous_response_id=final.id,
        input=[{"type": "function_call_output", "call_id": "call_clock1", "output": "10:30"}],
        tools=[CLOCK_TOOL],  # type: ignore[list-item]
        stream=True,
    )
    text = ""
    async for event in streamed:
        numbers.append(event.sequence_number)
        if event.type == "response.output_text.delta":
            text += event.delta
        if event.type == "response.completed":
            done = event.response
    assert numbers == list(range(len(numbers)))
    assert text == "It is 10:30 in Paris." and done.output_text == text
    assert done.usage is not None and done.usage.total_tokens > 0
    results = [m for m in hub.llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert results[-1]["tool_call_id"] == "call_clock1" and results[-1]["content"] == "10:30"


async def test_background_response_is_read_and_cancelled(hub: Hub) -> None:
    hub.llm.add_text("Done in the background.")
    started = await hub.client.responses.create(model="openagent", input="Work on it.", background=True)
    assert started.status in ("queued", "in_progress") and started.background
    async with asyncio.timeout(30):
        while (got := await hub.client.responses.retrieve(started.id)).status in ("queued", "in_progress"):
            await asyncio.sleep(0.02)
    assert got.status == "completed" and got.output_text == "Done in the background."
    hub.llm.add_text("Hello.")
    plain = await hub.client.responses.create(model="openagent", input="Hi", store=True)
    with pytest.raises(openai.BadRequestError, match="background"):
        await hub.client.responses.cancel(plain.id)
    hub.llm.add_text("never seen", delay=30)
    slow = await hub.client.responses.create(model="openagent", input="Take your time.", background=True)
    cancelled = await hub.client.responses.cancel(slow.id)
    assert cancelled.status == "cancelled"
    assert (await hub.client.responses.retrieve(slow.id)).status == "cancelled"
    async with asyncio.timeout(30):
        while slow.id in hub.master.services.responses._running:  # type: ignore[union-attr]
            await asyncio.sleep(0.02)  # the run was stopped, not left to its 30 seconds
    assert (await hub.client.responses.retrieve(slow.id)).status == "cancelled"


async def test_an_approval_is_an_item_that_the_next_request_answers(hub: Hub) -> None:
    hub.llm.add_tool_call("calc__transfer", {"to": "bob", "amount": 250})
    hub.llm.add_text("Sent 250 to bob.")
    first = await hub.client.responses.create(model="openagent", input="Send 250 to bob.")
    [request] = [item for item in first.output if item.type == "mcp_approval_request"]
    assert (request.server_label, request.name) == ("calc", "transfer")
    assert json.loads(request.arguments) == {"to": "bob", "amount": 250}
    assert hub.calls == []
    async with hub.http() as http:  # the same approval record as every door's
        record = (await http.get(f"/approvals/{request.id}")).json()
    assert record["status"] == "pending"
    second = await hub.client.responses.create(
        model="openagent",
        previous_response_id=first.id,
        input=[{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}],
    )
    assert second.status == "completed" and second.output_text == "Sent 250 to bob."
    assert hub.calls == [{"to": "bob", "amount": 250}]
    with pytest.raises(openai.ConflictError):
        await hub.client.responses.create(
            model="openagent",
            input=[{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}],
        )


async def test_errors_are_in_openai_shape(hub: Hub) -> None:
    with pytest.raises(openai.NotFoundError, match="'gpt-4o' does not exist"):
        await hub.client.responses.create(model="gpt-4o", input="hi")
    with pytest.raises(openai.BadRequestError, match="'input' is required") as missing:
        await hub.client.responses.create(model="openagent", input=[])
    assert missing.value.body["param"] == "input"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError, match="background"):
        await hub.client.responses.create(model="openagent", input="hi", background=True, store=False)
    async with hub.http() as http:
        unknown = await http.get("/v1/no-such-route")
        wrong = await http.post("/v1/responses/x/cancel", headers={"Authorization": "Bearer wrong"})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["type"] == "not_found_error" and "/v1/no-such-route" in unknown.text
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "unauthorized"


async def test_the_agents_sdk_in_its_default_settings_runs_a_client_tool(hub: Hub) -> None:
    from agents import Agent, OpenAIProvider, RunConfig, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)  # no export to OpenAI's servers
    hub_provider = OpenAIProvider(openai_client=hub.client)  # its defaults: the Responses API

    @function_tool
    def local_time(city: str) -> str:
        """The local time in a city."""
        return f"10:30 in {city}"

    hub.llm.add_tool_calls(
        [ToolCall("calc__multiply", {"a": 12, "b": 7}), ToolCall("local_time", {"city": "Paris"})]
    )

    def answer(body: dict[str, Any]) -> Any:
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        return TextReply("Results: " + " | ".join(results))

    hub.llm.set_handler(answer)
    agent = Agent(name="assistant", instructions="Use the tools.", model="openagent", tools=[local_time])
    result = await Runner.run(
        agent, "What is 12 times 7, and the time in Paris?", run_config=RunConfig(model_provider=hub_provider)
    )
    output = str(result.final_output)
    assert '"product": 84' in output and "10:30 in Paris" in output
    assert hub.calls == [{"a": 12, "b": 7}]
    ids = [r.response_id or "" for r in result.raw_responses]  # two Responses calls: the tool's round trip
    assert len(ids) == 2 and all(i.startswith("resp_") for i in ids), ids
    system = hub.llm.requests[0]["messages"]
    assert any(m["role"] == "system" and "Use the tools." in m["content"] for m in system)


async def test_any_master_of_a_cluster_reads_and_cancels_a_background_response(
    llm: ScriptedOpenAIServer,
) -> None:
    """Two masters on one Redis: a background response taken by one is read and cancelled through
    the other, and the cancel stops the run on the master that holds it (its cluster inbox)."""
    cluster: dict[str, Any] = {
        "openai_base_url": llm.base_url,
        "openai_api_key": "scripted",
        "openagent_api_key": KEY,
        "openagent_cluster": True,
    }
    async with (
        in_process_master(openagent_master_id="responses-a", **cluster) as a,
        in_process_master(openagent_master_id="responses-b", **cluster) as b,
    ):
        on_a = openai.AsyncOpenAI(base_url=f"{a.base_url}/v1", api_key=KEY, max_retries=0, timeout=60)
        on_b = openai.AsyncOpenAI(base_url=f"{b.base_url}/v1", api_key=KEY, max_retries=0, timeout=60)
        try:
            llm.add_text("never seen", delay=30)
            started = await on_a.responses.create(model="openagent", input="Take your time.", background=True)
            assert (await on_b.responses.retrieve(started.id)).status == "in_progress"
            running = a.services.responses._running  # type: ignore[union-attr]
            assert started.id in running
            assert (await on_b.responses.cancel(started.id)).status == "cancelled"
            async with asyncio.timeout(30):
                while started.id in running:
                    await asyncio.sleep(0.02)  # stopped on a, through its inbox
            assert (await on_a.responses.retrieve(started.id)).status == "cancelled"
        finally:
            await on_a.close()
            await on_b.close()


async def test_a_stream_ends_with_the_approval_item_or_response_failed(hub: Hub) -> None:
    hub.llm.add_tool_call("calc__transfer", {"to": "eve", "amount": 5})
    events = [
        event
        async for event in await hub.client.responses.create(
            model="openagent", input="Send 5 to eve.", stream=True
        )
    ]
    assert events[-1].type == "response.completed"
    done = [e.item for e in events if e.type == "response.output_item.done"]
    [item] = [i for i in done if i.type == "mcp_approval_request"]
    assert item.name == "transfer" and item.server_label == "calc"
    hub.llm.add_text("Not sent.")
    rejected = await hub.client.responses.create(
        model="openagent",
        input=[{"type": "mcp_approval_response", "approval_request_id": item.id, "approve": False}],
    )
    assert rejected.output_text == "Not sent." and hub.calls == []

    hub.llm.add_error(500, "the model is down", retry=False)
    failed = [
        event
        async for event in await hub.client.responses.create(model="openagent", input="Hello?", stream=True)
    ]
    assert [e.type for e in failed] == ["response.created", "response.in_progress", "response.failed"]
    final = failed[-1].response  # type: ignore[union-attr]
    assert final.status == "failed" and final.error is not None and "the model is down" in final.error.message
