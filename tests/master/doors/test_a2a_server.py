"""The hub and its agents as A2A agents, through the official ``a2a-sdk`` client.

A real master (lifespan, Redis, uvicorn on loopback, the API key on), a WebSocket agent of the
OpenAgent SDK with two tools, and the scripted LLM: card resolution, SendMessage on both bindings,
streaming with its status updates, GetTask/ListTasks after completion, CancelTask of a slow tool
call, a follow-up in the same context, a 0.3 client, 401 without the key, two masters on one Redis.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.compat.v0_3.types import (
    Message as Message03,
)
from a2a.compat.v0_3.types import (
    MessageSendParams as MessageSendParams03,
)
from a2a.compat.v0_3.types import (
    Part as Part03,
)
from a2a.compat.v0_3.types import (
    TextPart as TextPart03,
)
from a2a.helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import InternalError, InvalidParamsError
from google.protobuf import json_format

from master.storage.redis_keys import APPROVALS_EXPIRING_KEY
from openagent import ClientConfig as AgentConfig
from openagent import OrchestratorActionAgent, ToolSchema
from openagent.testing import ScriptedOpenAIServer
from sample_agents import calculator
from tests.conftest import master_env
from tests.factories import EVERY_TENANT, InProcessMaster, MasterProcess, in_process_master

KEY = "a2a-door-key"
AGENT = "a2a-calc"

ADD = ToolSchema(
    name="add",
    description="Add two integers",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)
SLOW = ToolSchema(
    name="slow",
    description="Wait until released",
    parameters={"type": "object", "properties": {"label": {"type": "string"}}},
)


class Calculator:
    """The agent's tools; ``slow`` reports progress, then waits until released or cancelled."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.slow_started = asyncio.Event()
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def handle(self, tool_name: str, arguments: dict[str, Any], *, progress_callback: Any) -> Any:
        self.calls.append((tool_name, arguments))
        if tool_name == "add":
            await progress_callback("adding", 0.5)
            return arguments["a"] + arguments["b"]
        self.slow_started.set()
        await progress_callback("waiting", 0.1)
        async with asyncio.timeout(120):
            await self.release.wait()
        return {"label": arguments.get("label")}


@asynccontextmanager
async def hub(
    llm: ScriptedOpenAIServer, **settings: Any
) -> AsyncIterator[tuple[InProcessMaster, Calculator]]:
    calculator = Calculator()
    async with in_process_master(openai_base_url=llm.base_url, openagent_api_key=KEY, **settings) as master:
        config = AgentConfig(master_ws=master.ws_url, api_key=KEY)
        async with OrchestratorActionAgent(AGENT, [ADD, SLOW], calculator.handle, config=config):
            async with asyncio.timeout(30):
                while not master.services.agents.known_ids(EVERY_TENANT, [AGENT]):
                    await asyncio.sleep(0.02)
            yield master, calculator


@asynccontextmanager
async def a2a_client(
    url: str, binding: str = TransportProtocol.JSONRPC.value, *, streaming: bool = False
) -> AsyncIterator[Client]:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
    config = ClientConfig(httpx_client=http, streaming=streaming, supported_protocol_bindings=[binding])
    client = await ClientFactory(config).create_from_url(url)
    try:
        yield client
    finally:
        await client.close()
        await http.aclose()


def text_message(text: str, context_id: str | None = None) -> Message:
    return Message(
        role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[new_text_part(text)], context_id=context_id
    )


def call_message(tool: str, arguments: dict[str, Any]) -> Message:
    return Message(
        role=Role.ROLE_USER,
        message_id=uuid.uuid4().hex,
        parts=[new_data_part({"tool": tool, "arguments": arguments})],
    )


async def send(client: Client, message: Message, **configuration: Any) -> list[StreamResponse]:
    request = SendMessageRequest(message=message, configuration=SendMessageConfiguration(**configuration))
    async with asyncio.timeout(60):
        return [response async for response in client.send_message(request)]


def final_task(responses: list[StreamResponse]) -> Task:
    tasks = [r.task for r in responses if r.HasField("task")]
    assert tasks, responses
    return tasks[-1]


def artifact_text(task: Task) -> str:
    return "".join(
        part.text for artifact in task.artifacts for part in artifact.parts if part.HasField("text")
    )


def data_of(part: Any) -> Any:
    return json_format.MessageToDict(part.data)


def agent_url(master: InProcessMaster, agent_id: str = AGENT) -> str:
    return f"{master.base_url}/a2a/agents/{agent_id}"


async def test_cards_describe_the_hub_and_each_agent(llm: ScriptedOpenAIServer) -> None:
    async with (
        hub(llm) as (master, _),
        httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as http,
    ):
        card = await A2ACardResolver(http, master.base_url).get_agent_card()
        assert [skill.id for skill in card.skills] == ["ask"]
        assert {(i.protocol_binding, i.url) for i in card.supported_interfaces} == {
            ("JSONRPC", f"{master.base_url}/a2a"),
            ("HTTP+JSON", f"{master.base_url}/a2a"),
        }
        assert card.capabilities.streaming and "bearer" in card.security_schemes

        card = await A2ACardResolver(http, agent_url(master)).get_agent_card()
        assert card.name == AGENT and [skill.id for skill in card.skills] == ["add", "slow"]
        assert '"required":["a","b"]' in card.skills[0].description
        extension = json_format.MessageToDict(card.capabilities.extensions[0].params)
        assert extension["tools"]["add"] == ADD.parameters
        assert {i.url for i in card.supported_interfaces} == {agent_url(master)}

        missing = await http.get(f"{agent_url(master, 'nobody')}/.well-known/agent-card.json")
        assert missing.status_code == 404 and missing.json()["error_code"] == "unknown_agent"


@pytest.mark.parametrize("binding", [TransportProtocol.JSONRPC.value, TransportProtocol.HTTP_JSON.value])
async def test_a_text_message_is_answered_by_the_orchestrator_with_that_agent_only(
    llm: ScriptedOpenAIServer, binding: str
) -> None:
    async with hub(llm) as (master, calculator), a2a_client(agent_url(master), binding) as client:
        llm.add_tool_call(f"{AGENT}__add", {"a": 2, "b": 3})
        llm.add_text("2 + 3 = 5")
        task = final_task(await send(client, text_message("What is 2 + 3?")))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        assert artifact_text(task) == "2 + 3 = 5"
        assert calculator.calls == [("add", {"a": 2, "b": 3})]
        offered = [tool["function"]["name"] for tool in llm.requests[0]["tools"]]
        assert offered and all(name.startswith(f"{AGENT}__") for name in offered)

        # GetTask after completion, on the same endpoint; ListTasks lists it.
        again = await client.get_task(GetTaskRequest(id=task.id))
        assert again.status.state == TaskState.TASK_STATE_COMPLETED and artifact_text(again) == "2 + 3 = 5"
        listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
        assert [t.id for t in listed.tasks] == [task.id]


async def test_streaming_sends_the_task_each_step_the_answer_and_the_end(llm: ScriptedOpenAIServer) -> None:
    async with hub(llm) as (master, _), a2a_client(agent_url(master), streaming=True) as client:
        llm.add_tool_call(f"{AGENT}__add", {"a": 20, "b": 22})
        llm.add_text("42")
        responses = await send(client, text_message("20 + 22?"))
    assert responses[0].HasField("task")
    events = [
        data_of(r.status_update.status.message.parts[1])["event"]
        for r in responses
        if r.HasField("status_update") and len(r.status_update.status.message.parts) == 2
    ]
    assert events[:1] == ["step"] and {"tool_call", "tool_progress", "tool_result"} <= set(events)
    assert events.index("tool_call") < events.index("tool_progress") < events.index("tool_result")
    updates = [r.artifact_update for r in responses if r.HasField("artifact_update")]
    # the answer's tokens as chunks, then the answer itself under the same id
    assert [(u.append, u.last_chunk, u.artifact.parts[0].text) for u in updates] == [
        (False, False, "42"),
        (False, True, "42"),
    ]
    assert len({u.artifact.artifact_id for u in updates}) == 1
    last = responses[-1]
    assert (
        last.HasField("status_update") and last.status_update.status.state == TaskState.TASK_STATE_COMPLETED
    )


async def test_a_run_waiting_for_approval_is_input_required(llm: ScriptedOpenAIServer) -> None:
    """The operator's policy holds ``add``: the task is INPUT_REQUIRED, naming the approval, which
    is decided where every approval is (``POST /approvals/{id}``); the tool has not run before."""
    async with (
        hub(llm, openagent_approval_tools=f"{AGENT}__add") as (master, calculator),
        a2a_client(agent_url(master)) as client,
        httpx.AsyncClient(base_url=master.base_url, headers={"Authorization": f"Bearer {KEY}"}) as http,
    ):
        llm.add_tool_call(f"{AGENT}__add", {"a": 2, "b": 3})
        llm.add_text("2 + 3 = 5")
        task = final_task(await send(client, text_message("What is 2 + 3?")))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, task
        [text, data] = task.status.message.parts
        [approval] = data_of(data)["approvals"]
        assert approval["tool_name"] == "add" and approval["approval_id"] in text.text
        assert calculator.calls == []
        decided = await http.post(f"/approvals/{approval['approval_id']}", json={"decision": "approve"})
        assert decided.status_code == 200, decided.text
        assert calculator.calls == [("add", {"a": 2, "b": 3})]
        # The task that waited moves on too, without a message on it.
        ended = await wait_for_state(client, task.id, TaskState.TASK_STATE_COMPLETED)
        assert artifact_text(ended) == "2 + 3 = 5"


async def wait_for_state(client: Client, task_id: str, state: int) -> Task:
    async with asyncio.timeout(30):
        while True:
            task = await client.get_task(GetTaskRequest(id=task_id))
            if task.status.state == state:
                return task
            await asyncio.sleep(0.05)


def reply(task: Task, *parts: Any) -> Message:
    """A message on ``task`` (the same task and context)."""
    return Message(
        role=Role.ROLE_USER,
        message_id=uuid.uuid4().hex,
        parts=list(parts),
        task_id=task.id,
        context_id=task.context_id,
    )


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_message_on_the_waiting_task_approves_and_the_task_goes_on(
    llm: ScriptedOpenAIServer, streaming: bool
) -> None:
    async with (
        hub(llm, openagent_approval_tools=f"{AGENT}__add") as (master, calculator),
        a2a_client(agent_url(master), streaming=streaming) as client,
    ):
        llm.add_tool_call(f"{AGENT}__add", {"a": 2, "b": 3})
        llm.add_text("2 + 3 = 5")
        started = final_task(await send(client, text_message("What is 2 + 3?")))
        task = await wait_for_state(client, started.id, TaskState.TASK_STATE_INPUT_REQUIRED)
        assert "approve" in task.status.message.parts[0].text  # it says how to decide

        with pytest.raises(InvalidParamsError, match="waits for approvals"):
            await send(client, reply(task, new_text_part("what now?")))
        assert calculator.calls == []

        responses = await send(client, reply(task, new_text_part("Approve")))
        states = [r.status_update.status.state for r in responses if r.HasField("status_update")]
        if streaming:
            assert TaskState.TASK_STATE_WORKING in states and states[-1] == TaskState.TASK_STATE_COMPLETED
        ended = await wait_for_state(client, task.id, TaskState.TASK_STATE_COMPLETED)
        assert artifact_text(ended) == "2 + 3 = 5"
        assert calculator.calls == [("add", {"a": 2, "b": 3})]


async def test_a_reason_rejects_and_data_parts_decide_each_approval(llm: ScriptedOpenAIServer) -> None:
    async with (
        hub(llm, openagent_approval_tools=f"{AGENT}__add") as (master, calculator),
        a2a_client(agent_url(master)) as client,
    ):
        llm.add_tool_calls([(f"{AGENT}__add", {"a": 1, "b": 1}), (f"{AGENT}__add", {"a": 2, "b": 2})])
        llm.add_text("1 + 1 = 2; the other was refused")
        task = final_task(await send(client, text_message("Add twice")))
        first, second = (a["approval_id"] for a in data_of(task.status.message.parts[1])["approvals"])

        with pytest.raises(InvalidParamsError, match="2 approvals wait"):
            await send(client, reply(task, new_text_part("reject: no")))
        with pytest.raises(InvalidParamsError, match="does not wait on this task"):
            await send(client, reply(task, new_data_part({"approval_id": "appr-x", "decision": "approve"})))

        waiting = final_task(
            await send(client, reply(task, new_data_part({"approval_id": first, "decision": "approve"})))
        )
        assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, waiting
        assert calculator.calls == []
        decision = {"approval_id": second, "decision": "reject", "message": "too big"}
        await send(client, reply(task, new_data_part(decision)))
        ended = await wait_for_state(client, task.id, TaskState.TASK_STATE_COMPLETED)
        assert artifact_text(ended) == "1 + 1 = 2; the other was refused"
        assert calculator.calls == [("add", {"a": 1, "b": 1})]
        told = [m["content"] for m in llm.requests[-1]["messages"] if m.get("role") == "tool"]
        assert any("too big" in content for content in told)


async def test_a_failed_resume_leaves_the_task_waiting_and_a_message_tries_again(
    llm: ScriptedOpenAIServer,
) -> None:
    async with (
        hub(llm, openagent_approval_tools=f"{AGENT}__add") as (master, calculator),
        a2a_client(agent_url(master)) as client,
    ):
        llm.add_tool_call(f"{AGENT}__add", {"a": 2, "b": 3})
        task = final_task(await send(client, text_message("What is 2 + 3?")))
        llm.add_error(400, "the provider is down")
        await send(client, reply(task, new_text_part("approve")))
        waiting = await wait_for_state(client, task.id, TaskState.TASK_STATE_INPUT_REQUIRED)
        assert "could not go on" in waiting.status.message.parts[0].text
        assert calculator.calls == [("add", {"a": 2, "b": 3})]  # decided and run: kept
        llm.add_text("2 + 3 = 5")
        await send(client, reply(task, new_text_part("try again")))
        ended = await wait_for_state(client, task.id, TaskState.TASK_STATE_COMPLETED)
        assert artifact_text(ended) == "2 + 3 = 5"
        assert calculator.calls == [("add", {"a": 2, "b": 3})]  # not run again


async def test_an_expired_approval_ends_the_waiting_task(
    llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    async with (
        hub(
            llm,
            openagent_approval_tools=f"{AGENT}__add",
            openagent_approval_sweep_seconds=0.05,
        ) as (master, calculator),
        a2a_client(agent_url(master)) as client,
    ):
        llm.add_tool_call(f"{AGENT}__add", {"a": 2, "b": 3})
        llm.add_text("No one approved the addition in time.")
        task = final_task(await send(client, text_message("What is 2 + 3?")))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, task
        [approval] = data_of(task.status.message.parts[1])["approvals"]
        # due at the sweep's next pass (only this approval: other tests' pending ones stay as they are)
        await redis_client.zadd(APPROVALS_EXPIRING_KEY, {approval["approval_id"]: 0})
        ended = await wait_for_state(client, task.id, TaskState.TASK_STATE_COMPLETED)
        assert artifact_text(ended) == "No one approved the addition in time."
        assert calculator.calls == []


async def test_a_data_part_calls_the_tool_directly(llm: ScriptedOpenAIServer) -> None:
    async with hub(llm) as (master, calculator), a2a_client(agent_url(master)) as client:
        task = final_task(await send(client, call_message("add", {"a": 2, "b": 3})))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        assert data_of(task.artifacts[0].parts[0]) == 5
        assert calculator.calls == [("add", {"a": 2, "b": 3})]  # whole numbers, not 2.0
        assert llm.requests == []  # no LLM

        with pytest.raises(InvalidParamsError, match='"a" is a required property'):
            await send(client, call_message("add", {"b": 3}))
        with pytest.raises(InvalidParamsError, match="nope"):
            await send(client, call_message("nope", {}))


async def test_a_follow_up_in_the_same_context_sees_the_earlier_turn(llm: ScriptedOpenAIServer) -> None:
    async with hub(llm) as (master, _), a2a_client(agent_url(master)) as client:
        llm.add_text("Noted: your number is 7.")
        first = final_task(await send(client, text_message("My number is 7.")))
        llm.add_text("It is 7.")
        second = final_task(await send(client, text_message("What is my number?", first.context_id)))
    assert second.context_id == first.context_id and second.id != first.id
    assert artifact_text(second) == "It is 7."
    contents = [m.get("content") for m in llm.requests[1]["messages"]]
    assert "My number is 7." in contents and "Noted: your number is 7." in contents


async def test_cancel_task_stops_a_slow_tool_call(llm: ScriptedOpenAIServer) -> None:
    async with hub(llm) as (master, calculator), a2a_client(agent_url(master), streaming=True) as client:
        llm.add_tool_call(f"{AGENT}__slow", {"label": "x"})
        llm.add_text("never")
        request = SendMessageRequest(message=text_message("wait"))
        stream = client.send_message(request)
        first = await anext(stream)
        task_id = first.task.id
        async with asyncio.timeout(60):
            await calculator.slow_started.wait()
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        rest = [r async for r in stream]
        await stream.aclose()
        assert rest and rest[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
        stored = await client.get_task(GetTaskRequest(id=task_id))
        assert stored.status.state == TaskState.TASK_STATE_CANCELED
        # The run is gone: its query's slot is free, the LLM was not asked for an answer.
        async with asyncio.timeout(30):
            while master.services.entry.admission.in_flight:
                await asyncio.sleep(0.02)
        assert len(llm.requests) == 1
        # Cancelled as every door cancels: its record says so.
        run_id = stored.metadata["openagent_run_id"]
        async with httpx.AsyncClient(
            base_url=master.base_url, headers={"Authorization": f"Bearer {KEY}"}
        ) as http:
            record = (await http.get(f"/runs/{run_id}")).json()
        assert record["state"] == "cancelled" and [c["name"] for c in record["unknown"]] == [f"{AGENT}__slow"]
        calculator.release.set()


async def test_a_run_cancelled_through_another_door_ends_its_task_canceled(llm: ScriptedOpenAIServer) -> None:
    """``DELETE /runs/{run_id}`` of a task's run (the one cancel of every door): a working task
    ends ``CANCELED``, as one waiting for approvals reads; ``CancelTask`` of a task waiting for
    approvals cancels its paused run (the approval withdrawn, never run)."""
    async with (
        hub(llm, openagent_approval_tools=f"{AGENT}__add") as (master, calculator),
        a2a_client(agent_url(master), streaming=True) as client,
        a2a_client(agent_url(master)) as blocking,
        httpx.AsyncClient(base_url=master.base_url, headers={"Authorization": f"Bearer {KEY}"}) as http,
    ):
        llm.add_tool_call(f"{AGENT}__slow", {"label": "x"})
        stream = client.send_message(SendMessageRequest(message=text_message("wait")))
        task_id = (await anext(stream)).task.id
        async with asyncio.timeout(60):
            await calculator.slow_started.wait()
        working = await client.get_task(GetTaskRequest(id=task_id))
        run_id = working.metadata["openagent_run_id"]
        cancelled = await http.delete(f"/runs/{run_id}")
        assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled", cancelled.text
        async with asyncio.timeout(60):
            rest = [r async for r in stream]
        await stream.aclose()
        assert state_of(rest[-1]) == TaskState.TASK_STATE_CANCELED
        assert (
            await client.get_task(GetTaskRequest(id=task_id))
        ).status.state == TaskState.TASK_STATE_CANCELED

        for how in ("DELETE", "CancelTask"):
            llm.add_tool_call(f"{AGENT}__add", {"a": 2, "b": 3})
            waiting = final_task(await send(blocking, text_message("What is 2 + 3?")))
            assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, waiting
            [approval] = data_of(waiting.status.message.parts[1])["approvals"]
            run_id = waiting.metadata["openagent_run_id"]
            if how == "DELETE":
                assert (await http.delete(f"/runs/{run_id}")).json()["state"] == "cancelled"
            else:
                canceled = await client.cancel_task(CancelTaskRequest(id=waiting.id))
                assert canceled.status.state == TaskState.TASK_STATE_CANCELED
                assert (await http.get(f"/runs/{run_id}")).json()["state"] == "cancelled"
            read = await client.get_task(GetTaskRequest(id=waiting.id))
            assert read.status.state == TaskState.TASK_STATE_CANCELED, (how, read)
            record = (await http.get(f"/approvals/{approval['approval_id']}")).json()
            assert record["status"] == "rejected" and "cancelled" in record["message"], (how, record)
        assert [name for name, _ in calculator.calls] == ["slow"]  # add never ran
        calculator.release.set()


async def test_the_hub_endpoint_offers_every_agent(llm: ScriptedOpenAIServer) -> None:
    async with hub(llm) as (master, _), a2a_client(master.base_url) as client:
        llm.add_text("Hello from the hub.")
        task = final_task(await send(client, text_message("hi")))
        # A direct call through the hub's endpoint names its agent.
        call = Message(
            role=Role.ROLE_USER,
            message_id=uuid.uuid4().hex,
            parts=[new_data_part({"agent_id": AGENT, "tool": "add", "arguments": {"a": 3, "b": 4}})],
        )
        direct = final_task(await send(client, call))
        with pytest.raises(InvalidParamsError, match="names its agent"):
            await send(client, call_message("add", {"a": 3, "b": 4}))
    assert data_of(direct.artifacts[0].parts[0]) == 7
    assert artifact_text(task) == "Hello from the hub."
    assert f"{AGENT}__add" in [tool["function"]["name"] for tool in llm.requests[0]["tools"]]


async def test_unknown_agent_is_an_a2a_error(llm: ScriptedOpenAIServer) -> None:
    async with (
        hub(llm) as (master, _),
        httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as http,
    ):
        # A card resolved while the agent was there; then the agent is gone: its endpoint refuses.
        card = await A2ACardResolver(http, agent_url(master)).get_agent_card()
        for interface in card.supported_interfaces:
            interface.url = agent_url(master, "gone")
        gone = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        with pytest.raises(InvalidParamsError, match="unknown agent 'gone'"):
            await send(gone, text_message("hi"))
        await gone.close()


async def test_a_03_client_without_the_version_header(llm: ScriptedOpenAIServer) -> None:
    async with (
        hub(llm) as (master, _),
        httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as http,
    ):
        card = await A2ACardResolver(http, agent_url(master)).get_agent_card()
        transport = CompatJsonRpcTransport(http, card, agent_url(master))
        assert "a2a-version" not in http.headers
        llm.add_text("Hi from 0.3.")
        message = Message03(
            role="user", message_id=uuid.uuid4().hex, parts=[Part03(root=TextPart03(text="hello"))]
        )
        raw = await http.post(
            agent_url(master),
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "message/send",
                "params": MessageSendParams03(message=message).model_dump(mode="json", exclude_none=True),
            },
        )
        result = raw.json()["result"]
        assert result["kind"] == "task" and result["status"]["state"] == "completed", raw.text
        assert result["artifacts"][0]["parts"][0]["text"] == "Hi from 0.3."
        # The SDK's own 0.3 transport (it sends "A2A-Version: 0.3") reads it back, and calls a tool.
        task = await transport.get_task(GetTaskRequest(id=result["id"]))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        sent = await transport.send_message(SendMessageRequest(message=call_message("add", {"a": 1, "b": 1})))
        assert sent.task.status.state == TaskState.TASK_STATE_COMPLETED, sent
        assert data_of(sent.task.artifacts[0].parts[0]) == 2


async def test_the_key_is_needed_for_cards_and_endpoints(llm: ScriptedOpenAIServer) -> None:
    async with hub(llm) as (master, _), httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
        for method, path in [
            ("GET", "/.well-known/agent-card.json"),
            ("GET", f"/a2a/agents/{AGENT}/.well-known/agent-card.json"),
            ("POST", "/a2a"),
            ("POST", f"/a2a/agents/{AGENT}"),
            ("POST", f"/a2a/agents/{AGENT}/message:send"),
            ("GET", "/a2a/tasks/some-task"),
        ]:
            response = await http.request(method, path, json={})
            assert response.status_code == 401, (method, path, response.text)
        with pytest.raises(Exception, match="401"):
            await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(agent_url(master))


async def test_public_cards_open_the_cards_only(llm: ScriptedOpenAIServer) -> None:
    async with (
        hub(llm, openagent_a2a_public_cards=True) as (master, _),
        httpx.AsyncClient(base_url=master.base_url, timeout=30) as http,
    ):
        hub_card = await http.get("/.well-known/agent-card.json")
        assert hub_card.status_code == 200 and hub_card.headers["cache-control"] == "public, max-age=60"
        card = (await http.get(f"/a2a/agents/{AGENT}/.well-known/agent-card.json")).json()
        assert card["name"] == AGENT
        assert (await http.post(f"/a2a/agents/{AGENT}", json={})).status_code == 401


async def test_two_masters_share_the_tasks(llm: ScriptedOpenAIServer) -> None:
    """A task started on master A: read with GetTask on B, followed on B, canceled from B."""
    env = master_env(llm, OPENAGENT_CLUSTER="1", OPENAGENT_MASTER_LEASE_SECONDS="1", OPENAGENT_API_KEY=KEY)
    calculator = Calculator()
    async with MasterProcess(env) as a, MasterProcess(env) as b:
        config = AgentConfig(master_ws=a.ws_url, api_key=KEY)
        async with (
            OrchestratorActionAgent("a2a-twin", [ADD, SLOW], calculator.handle, config=config),
            httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as http,
        ):
            card_on_b = f"{b.base_url}/a2a/agents/a2a-twin/.well-known/agent-card.json"
            async with asyncio.timeout(30):
                while (await http.get(card_on_b)).status_code != 200:
                    await asyncio.sleep(0.1)
            on_a = f"{a.base_url}/a2a/agents/a2a-twin"
            on_b = f"{b.base_url}/a2a/agents/a2a-twin"
            async with (
                a2a_client(on_a, streaming=True) as client_a,
                a2a_client(on_b, streaming=True) as client_b,
            ):
                done = final_task(await send(client_a, call_message("add", {"a": 1, "b": 2})))
                read = await client_b.get_task(GetTaskRequest(id=done.id))
                assert (
                    read.status.state == TaskState.TASK_STATE_COMPLETED
                    and data_of(read.artifacts[0].parts[0]) == 3
                )

                # A slow call on A, followed and canceled from B.
                stream = client_a.send_message(
                    SendMessageRequest(message=call_message("slow", {"label": "y"}))
                )
                first = await anext(stream)
                async with asyncio.timeout(60):
                    await calculator.slow_started.wait()
                followed = client_b.subscribe(SubscribeToTaskRequest(id=first.task.id))
                snapshot = await anext(followed)
                assert snapshot.task.status.state == TaskState.TASK_STATE_WORKING
                canceled = await client_b.cancel_task(CancelTaskRequest(id=first.task.id))
                assert canceled.status.state == TaskState.TASK_STATE_CANCELED
                async with asyncio.timeout(60):
                    on_a_rest = [r async for r in stream]
                    on_b_rest = [r async for r in followed]
                await stream.aclose()
                await followed.aclose()
                assert state_of(on_a_rest[-1]) == TaskState.TASK_STATE_CANCELED
                assert state_of(on_b_rest[-1]) == TaskState.TASK_STATE_CANCELED
                stored = await client_a.get_task(GetTaskRequest(id=first.task.id))
                assert stored.status.state == TaskState.TASK_STATE_CANCELED
            calculator.release.set()


def state_of(response: StreamResponse) -> int:
    if response.HasField("task"):
        return int(response.task.status.state)
    return int(response.status_update.status.state)


async def test_the_guides_call_adds_with_the_calculator_and_no_llm() -> None:
    """The guide's snippet: {"tool": "add", "arguments": {"a": 2, "b": 3}} to the calculator agent, no LLM configured."""
    async with in_process_master(openagent_api_key=KEY) as master:
        async with calculator.build_agent(AgentConfig(master_ws=master.ws_url, api_key=KEY)):
            async with asyncio.timeout(30):
                while not master.services.agents.known_ids(EVERY_TENANT, [calculator.AGENT_ID]):
                    await asyncio.sleep(0.02)
            async with a2a_client(agent_url(master, calculator.AGENT_ID)) as client:
                task = final_task(await send(client, call_message("add", {"a": 2, "b": 3})))
                failed = final_task(await send(client, call_message("divide", {"a": 1, "b": 0})))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
    assert data_of(task.artifacts[0].parts[0]) == {"expression": "2 + 3", "result": 5}
    # A tool that fails: FAILED, with the agent's message.
    assert failed.status.state == TaskState.TASK_STATE_FAILED, failed
    assert "cannot divide by zero" in failed.status.message.parts[0].text


async def test_a_master_at_its_limit_answers_the_unavailable_error(llm: ScriptedOpenAIServer) -> None:
    async with (
        hub(llm, openagent_max_queries_in_flight=1) as (master, calculator_),
        a2a_client(agent_url(master), streaming=True) as client,
    ):
        stream = client.send_message(SendMessageRequest(message=call_message("slow", {})))
        await anext(stream)
        async with asyncio.timeout(60):
            await calculator_.slow_started.wait()
        with pytest.raises(InternalError, match="too_many_queries") as refused:
            await send(client, call_message("add", {"a": 1, "b": 1}))
        assert refused.value.data is not None
        calculator_.release.set()
        async with asyncio.timeout(60):
            rest = [r async for r in stream]
        assert state_of(rest[-1]) == TaskState.TASK_STATE_COMPLETED


async def test_a_task_outlives_a_restart(llm: ScriptedOpenAIServer) -> None:
    """GetTask and ListTasks on a master started after the one that ran the task (same Redis)."""
    async with hub(llm) as (master, _), a2a_client(agent_url(master)) as client:
        done = final_task(await send(client, call_message("add", {"a": 4, "b": 5})))
    async with hub(llm) as (again, _), a2a_client(agent_url(again)) as client:
        read = await client.get_task(GetTaskRequest(id=done.id))
        listed = await client.list_tasks(ListTasksRequest(context_id=done.context_id))
    assert read.status.state == TaskState.TASK_STATE_COMPLETED and data_of(read.artifacts[0].parts[0]) == 9
    assert [task.id for task in listed.tasks] == [done.id]


async def test_a_streamed_direct_call_reports_the_call_and_its_progress(llm: ScriptedOpenAIServer) -> None:
    async with (
        hub(llm) as (master, _),
        a2a_client(agent_url(master), TransportProtocol.HTTP_JSON.value, streaming=True) as client,
    ):
        responses = await send(client, call_message("add", {"a": 5, "b": 6}))
    assert responses[0].HasField("task")
    assert data_of(responses[0].task.status.message.parts[1])["event"] == "tool_call"
    progress = [
        data_of(r.status_update.status.message.parts[1])
        for r in responses
        if r.HasField("status_update") and r.status_update.status.message.parts
    ]
    assert [p["event"] for p in progress][:1] == ["tool_progress"] and progress[0]["message"] == "adding"
    artifacts = [r.artifact_update.artifact for r in responses if r.HasField("artifact_update")]
    assert [data_of(a.parts[0]) for a in artifacts] == [11]
    assert state_of(responses[-1]) == TaskState.TASK_STATE_COMPLETED
    assert llm.requests == []
