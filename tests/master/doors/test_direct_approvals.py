"""A tool that requires approval never runs undecided through a door's direct call.

The bank agent of ``docs/guides/approvals.md`` (``transfer`` requires approval, registered by the
administrator and so shared) on a real master (lifespan, Redis, uvicorn on loopback), called by a
tenant's ``client`` key through MCP ``tools/call`` (the official ``mcp`` client, both eras) and
the A2A direct tool call (the official ``a2a-sdk`` client): the call waits for a decision, as the
orchestrator's calls do; approving it through any door (``POST /approvals/{id}``, the MCP answer,
an A2A message) runs it exactly once; rejecting it, or letting it expire, never runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
import redis.asyncio as aioredis
from a2a.client import Client as A2AClient
from a2a.client import ClientConfig, ClientFactory
from a2a.helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
)
from google.protobuf import json_format
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from master.auth import Role as KeyRole
from master.storage.redis_keys import APPROVALS_EXPIRING_KEY
from openagent import ClientConfig as AgentConfig
from openagent import OrchestratorActionAgent, ToolSchema
from tests.factories import EVERY_TENANT, InProcessMaster, in_process_master

ADMIN_KEY = "direct-approvals-admin"
DEADLINE = 60
ERAS = {"2026-07-28": "auto", "2025-11-25": "legacy"}
era = pytest.mark.parametrize("revision", list(ERAS))

TRANSFER = ToolSchema(
    name="transfer",
    description="Transfer money to someone",
    parameters={
        "type": "object",
        "properties": {"to": {"type": "string"}, "amount": {"type": "number", "minimum": 0}},
        "required": ["to", "amount"],
    },
    requires_approval=True,
)
BALANCE = ToolSchema(name="balance", description="Read the balance", parameters={"type": "object"})
PAYMENT = {"to": "bob", "amount": 1000}


@dataclass
class Bank:
    master: InProcessMaster
    keys: dict[str, str]
    """Tenant → the secret of its ``client`` key."""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def headers(self, tenant: str | None = "a") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[tenant] if tenant else ADMIN_KEY}"}

    def transfers(self) -> list[dict[str, Any]]:
        return [arguments for name, arguments in self.calls if name == "transfer"]

    @contextlib.asynccontextmanager
    async def http(self, tenant: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
        async with httpx.AsyncClient(
            base_url=self.master.base_url, headers=self.headers(tenant), timeout=DEADLINE
        ) as http:
            yield http

    @contextlib.asynccontextmanager
    async def mcp(self, revision: str, **kwargs: Any) -> AsyncIterator[McpClient]:
        """The official MCP client with tenant a's ``client`` key."""
        async with (
            httpx2.AsyncClient(headers=self.headers(), timeout=DEADLINE) as http,
            McpClient(
                streamable_http_client(f"{self.master.base_url}/mcp", http_client=http),
                mode=ERAS[revision],
                **kwargs,
            ) as client,
        ):
            yield client

    @contextlib.asynccontextmanager
    async def a2a(self, *, streaming: bool = False, tenant: str | None = "a") -> AsyncIterator[A2AClient]:
        """The official A2A client on the bank agent's endpoint, with ``tenant``'s ``client`` key
        (``None``: the administrator's)."""
        http = httpx.AsyncClient(headers=self.headers(tenant), timeout=DEADLINE)
        config = ClientConfig(httpx_client=http, streaming=streaming)
        client = await ClientFactory(config).create_from_url(f"{self.master.base_url}/a2a/agents/bank")
        try:
            yield client
        finally:
            await client.close()
            await http.aclose()


@contextlib.asynccontextmanager
async def bank(**settings: Any) -> AsyncIterator[Bank]:
    async with in_process_master(openagent_api_key=ADMIN_KEY, **settings) as master:
        store = master.services.keys
        assert store is not None
        keys = {}
        for tenant in ("a", "b"):
            _, keys[tenant] = await store.create(
                name=f"client of {tenant}", role=KeyRole.CLIENT, tenant=tenant
            )
        running = Bank(master, keys)

        async def handler(tool_name: str, arguments: dict[str, Any], *, progress_callback: Any) -> Any:
            running.calls.append((tool_name, arguments))
            return {"done": tool_name, "arguments": arguments}

        config = AgentConfig(master_ws=master.ws_url, api_key=ADMIN_KEY)
        async with OrchestratorActionAgent("bank", [TRANSFER, BALANCE], handler, config=config):
            async with asyncio.timeout(DEADLINE):
                while "bank" not in master.services.agents.known_ids(EVERY_TENANT):
                    await asyncio.sleep(0.01)
            yield running


@pytest.fixture
async def hub() -> AsyncIterator[Bank]:
    async with bank() as running:
        yield running


def _text(result: types.CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, types.TextContent)
    return content.text


def _waiting_approval(result: types.CallToolResult) -> dict[str, Any]:
    """The one approval a held ``tools/call`` names (a client that cannot be asked)."""
    assert result.is_error is False, result
    assert result.structured_content is not None, result
    [approval] = result.structured_content["approvals"]
    assert approval["status"] == "pending" and approval["approval_id"] in _text(result)
    assert "POST /approvals/{approval_id}" in _text(result)
    return dict(approval)


# --------------------------------------------------------------------------- MCP tools/call


@era
async def test_mcp_call_waits_and_an_http_approval_runs_it_once(hub: Bank, revision: str) -> None:
    async with hub.mcp(revision) as client:
        result = await client.call_tool("bank__transfer", PAYMENT)
        await client.call_tool("bank__balance", {})
    approval = _waiting_approval(result)
    assert (approval["agent_id"], approval["tool_name"], approval["arguments"]) == (
        "bank",
        "transfer",
        PAYMENT,
    )
    assert hub.transfers() == [] and hub.calls == [("balance", {})]  # it waits; the harmless one ran
    approval_id = approval["approval_id"]
    async with hub.http("a") as tenant_a, hub.http("b") as tenant_b:
        assert (await tenant_a.get(f"/approvals/{approval_id}")).json()["status"] == "pending"
        assert (await tenant_b.get(f"/approvals/{approval_id}")).status_code == 404  # another tenant's
        assert (
            await tenant_b.post(f"/approvals/{approval_id}", json={"decision": "approve"})
        ).status_code == 404
        assert hub.transfers() == []
        session = (await tenant_a.get(f"/sessions/{approval['session_id']}")).status_code
        assert session == 200  # the held call's session is the asker's tenant's
        assert (await tenant_b.get(f"/sessions/{approval['session_id']}")).status_code == 404
    async with hub.http() as admin:
        decided = await admin.post(f"/approvals/{approval_id}", json={"decision": "approve"})
        assert decided.status_code == 200, decided.text
        body = decided.json()
        assert body["success"] is True and body["status"] == "completed"
        assert json.loads(body["answer"]) == {"done": "transfer", "arguments": PAYMENT}
        assert body["agents_used"] == [{"agent_id": "bank", "tool_name": "transfer"}]
        again = await admin.post(f"/approvals/{approval_id}", json={"decision": "approve"})
        assert again.status_code == 409 and again.json()["error_code"] == "approval_decided"
        assert (await admin.get(f"/approvals/{approval_id}")).json()["status"] == "approved"
    assert hub.transfers() == [PAYMENT]  # exactly once


@era
@pytest.mark.parametrize("action", ["accept", "decline"])
async def test_mcp_answer_decides_the_held_call(hub: Bank, revision: str, action: str) -> None:
    """A client that declares elicitation is asked (2026: InputRequiredResult, then the retried
    call; 2025: elicitation/create within the call) and the call's answer is the tool's."""
    asked: list[types.ElicitRequestParams] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        if action == "decline":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    async with hub.mcp(revision, elicitation_callback=answer) as client:
        result = await client.call_tool("bank__transfer", PAYMENT)
    assert len(asked) == 1 and "bank.transfer" in asked[0].message
    if action == "accept":
        assert result.is_error is False, result
        assert result.structured_content == {"done": "transfer", "arguments": PAYMENT}
        assert hub.transfers() == [PAYMENT]
    else:
        assert result.is_error is True and "refused" in _text(result), result
        assert hub.transfers() == []


@era
async def test_mcp_answer_of_a_key_that_may_not_decide_is_refused_naming_the_rule(
    hub: Bank, revision: str
) -> None:
    """Once a key of tenant a approves ``bank__*``, the asker's answer through its MCP client is
    refused (``forbidden``, naming who approves) instead of being asked again; nothing runs and
    the approval still waits for an approver."""
    store = hub.master.services.keys
    assert store is not None
    treasurer, _ = await store.create(name="treasurer", role=KeyRole.CLIENT, tenant="a", approves=["bank__*"])
    asked: list[types.ElicitRequestParams] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    try:
        async with hub.mcp(revision, elicitation_callback=answer) as client:
            result = await client.call_tool("bank__transfer", PAYMENT)
        assert result.is_error is True, result
        assert "forbidden" in _text(result), result
        assert "only keys whose 'approves' patterns match 'bank__transfer'" in _text(result), result
        assert len(asked) == 1  # refused once, not asked again
        assert hub.transfers() == []
        async with hub.http("a") as tenant_a:
            waiting = (await tenant_a.get("/approvals")).json()
        assert waiting["approvals"] and all(a["status"] == "pending" for a in waiting["approvals"]), waiting
    finally:
        await store.revoke(treasurer.key_id)


# --------------------------------------------------------------------------- A2A direct call


def _call(tool: str, arguments: dict[str, Any]) -> Message:
    return Message(
        role=Role.ROLE_USER,
        message_id=uuid.uuid4().hex,
        parts=[new_data_part({"tool": tool, "arguments": arguments})],
    )


def _reply(task: Task, *parts: Any) -> Message:
    return Message(
        role=Role.ROLE_USER,
        message_id=uuid.uuid4().hex,
        parts=list(parts),
        task_id=task.id,
        context_id=task.context_id,
    )


async def _send(client: A2AClient, message: Message) -> Task | None:
    request = SendMessageRequest(message=message, configuration=SendMessageConfiguration())
    async with asyncio.timeout(DEADLINE):
        tasks = [r.task async for r in client.send_message(request) if r.HasField("task")]
    return tasks[-1] if tasks else None


async def _state(client: A2AClient, task_id: str, state: int) -> Task:
    async with asyncio.timeout(DEADLINE):
        while True:
            task = await client.get_task(GetTaskRequest(id=task_id))
            if task.status.state == state:
                return task
            await asyncio.sleep(0.05)


async def _held_task(client: A2AClient, bank_: Bank) -> tuple[Task, dict[str, Any]]:
    task = await _send(client, _call("transfer", PAYMENT))
    assert task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, task
    data = json_format.MessageToDict(task.status.message.parts[1].data)
    [approval] = data["approvals"]
    assert approval["approval_id"] in task.status.message.parts[0].text
    assert bank_.transfers() == []
    return task, approval


def _result(task: Task) -> Any:
    [artifact] = task.artifacts
    return json_format.MessageToDict(artifact.parts[0].data)


async def test_a2a_call_waits_and_a_message_on_the_task_approves_it_once(hub: Bank) -> None:
    async with hub.a2a() as client:
        task, approval = await _held_task(client, hub)
        await _send(client, _reply(task, new_text_part("approve")))
        ended = await _state(client, task.id, TaskState.TASK_STATE_COMPLETED)
        assert _result(ended) == {"done": "transfer", "arguments": PAYMENT}
    async with hub.http() as admin:
        again = await admin.post(f"/approvals/{approval['approval_id']}", json={"decision": "approve"})
        assert again.status_code == 409
    assert hub.transfers() == [PAYMENT]


async def test_an_administrators_message_decides_another_tenants_waiting_task(hub: Bank) -> None:
    """An administrator sees every tenant's approvals: its "approve" on tenant a's waiting task
    decides it (not silently dropped as another tenant's) and the task completes."""
    async with hub.a2a() as client, hub.a2a(tenant=None) as admin:
        task, approval = await _held_task(client, hub)
        await _send(admin, _reply(task, new_text_part("approve")))
        ended = await _state(client, task.id, TaskState.TASK_STATE_COMPLETED)
        assert _result(ended) == {"done": "transfer", "arguments": PAYMENT}
    async with hub.http("a") as http:
        decided = (await http.get(f"/approvals/{approval['approval_id']}")).json()
        assert decided["status"] == "approved", decided
    assert hub.transfers() == [PAYMENT]


async def test_a2a_call_approved_over_http_completes_its_task(hub: Bank) -> None:
    async with hub.a2a() as client:
        task, approval = await _held_task(client, hub)
        async with hub.http("a") as http:
            decided = await http.post(f"/approvals/{approval['approval_id']}", json={"decision": "approve"})
            assert decided.status_code == 200, decided.text
        ended = await _state(client, task.id, TaskState.TASK_STATE_COMPLETED)  # moved on, no message
        assert _result(ended) == {"done": "transfer", "arguments": PAYMENT}
    assert hub.transfers() == [PAYMENT]


async def test_a2a_call_rejected_is_never_run(hub: Bank) -> None:
    async with hub.a2a() as client:
        task, _ = await _held_task(client, hub)
        await _send(client, _reply(task, new_text_part("reject: not to Bob")))
        ended = await _state(client, task.id, TaskState.TASK_STATE_REJECTED)
        assert "not to Bob" in ended.status.message.parts[0].text
    assert hub.transfers() == []


async def test_an_expired_direct_call_never_runs(redis_client: aioredis.Redis) -> None:
    async with bank(openagent_approval_sweep_seconds=0.05) as hub, hub.a2a() as client:
        task, through_a2a = await _held_task(client, hub)
        async with hub.mcp("2026-07-28") as mcp:
            through_mcp = _waiting_approval(await mcp.call_tool("bank__transfer", PAYMENT))
        for approval in (through_a2a, through_mcp):  # due at the sweep's next pass
            await redis_client.zadd(APPROVALS_EXPIRING_KEY, {approval["approval_id"]: 0})
        ended = await _state(client, task.id, TaskState.TASK_STATE_REJECTED)
        assert "expired" in ended.status.message.parts[0].text
        async with hub.http() as admin:
            async with asyncio.timeout(DEADLINE):
                while (await admin.get(f"/approvals/{through_mcp['approval_id']}")).json()[
                    "status"
                ] != "expired":
                    await asyncio.sleep(0.05)
            late = await admin.post(f"/approvals/{through_mcp['approval_id']}", json={"decision": "approve"})
            assert late.status_code == 409
    assert hub.transfers() == []
