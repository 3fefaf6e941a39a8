"""The connector seam: an agent of another protocol, registered with ``POST /register``, stored
like an invocation agent and called through its transport's connector (a fake one here; the
real MCP and A2A connectors have their own tests against real servers)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import pytest

from master.agents import connectors
from master.agents.connectors import ConnectorContext, ConnectorError, Discovered, ProgressSink
from master.agents.invocation import InvocationAgent
from master.auth import SYSTEM
from master.errors import ToolFailed
from protocol import ToolSchema
from tests.factories import in_process_master

SECRET = "Bearer s3cr3t-value-never-shown"
ADD = ToolSchema(
    name="add",
    description="Add two numbers",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
    annotations={"readOnlyHint": True},
)


class FakeConnector:
    """Stands in for the MCP connector: one server at ``http://fake/mcp`` with ``add`` and ``fail``."""

    transport = "mcp"

    def __init__(self, context: ConnectorContext) -> None:
        self.context = context
        self.headers_seen: list[Mapping[str, str]] = []
        self.healthy = True
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.forgotten: list[str] = []

    async def discover(self, url: str, headers: Mapping[str, str], wait_seconds: float) -> Discovered:
        self.headers_seen.append(dict(headers))
        if "refuse" in url:
            raise ConnectorError(f"the MCP server at {url} refused the listing: HTTP 401")
        fail = ToolSchema(name="fail", description="Always fails")
        slow = ToolSchema(name="slow", description="Waits until released")
        return Discovered([ADD, fail, slow], {"server": "fake"})

    async def call(
        self,
        agent: InvocationAgent,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        wait_seconds: float,
        on_progress: ProgressSink,
    ) -> Any:
        self.headers_seen.append(dict(agent.headers))
        if tool_name == "fail":
            raise ToolFailed(f"tool 'fail' on agent {agent.agent_id!r} failed: division by zero")
        if tool_name == "slow":
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        on_progress("adding", 0.5)
        return arguments.get("a", 0) + arguments.get("b", 0)

    async def check(self, agent: InvocationAgent, wait_seconds: float) -> str | None:
        return None if self.healthy else "the server did not answer ping"

    async def forget(self, agent_id: str) -> None:
        self.forgotten.append(agent_id)

    async def aclose(self) -> None:
        return None


@pytest.fixture
def fake_mcp() -> Iterator[list[FakeConnector]]:
    made: list[FakeConnector] = []

    def factory(context: ConnectorContext) -> FakeConnector:
        made.append(FakeConnector(context))
        return made[-1]

    before = dict(connectors.CONNECTORS)
    connectors.CONNECTORS["mcp"] = factory
    try:
        yield made
    finally:
        connectors.CONNECTORS.clear()
        connectors.CONNECTORS.update(before)


async def test_a_registered_remote_agent_is_stored_listed_called_and_survives_a_restart(
    fake_mcp: list[FakeConnector],
) -> None:
    agent_id = f"fake-{uuid.uuid4().hex[:8]}"
    body = {"agent_id": agent_id, "mcp_url": "http://fake/mcp", "mcp_headers": {"Authorization": SECRET}}
    async with in_process_master() as master, httpx.AsyncClient(base_url=master.base_url) as client:
        answer = await client.post("/register", json=body)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"registered": True, "agent_id": agent_id, "status": "UP"}
        rows = (await client.get("/agents")).text
        assert SECRET not in rows
        [row] = [r for r in (await client.get("/agents")).json()["agents"] if r["agent_id"] == agent_id]
        assert row["connection_type"] == "mcp" and row["mcp_url"] == "http://fake/mcp"
        assert row["tools"][0]["annotations"] == {"readOnlyHint": True}
        names = {tool.name for tool in master.services.entry.offered_tools(principal=SYSTEM)}
        assert {f"{agent_id}__add", f"{agent_id}__fail"} <= names

        progress: list[Any] = []
        run = await master.services.entry.call_tool(
            agent_id, "add", {"a": 2, "b": 3}, door="mcp", on_progress=progress.append, principal=SYSTEM
        )
        assert (run.success, run.result) == (True, 5)
        assert [(p.message, p.progress) for p in progress] == [("adding", 0.5)]
        assert fake_mcp[-1].headers_seen[-1] == {"Authorization": SECRET}
        failed = await master.services.entry.call_tool(agent_id, "fail", {}, door="mcp", principal=SYSTEM)
        assert failed.success is False and "division by zero" in (failed.error or "")

        fake_mcp[-1].healthy = False
        refreshed = (await client.get("/refresh")).json()["agents"]
        assert {"agent_id": agent_id, "status": "DOWN"}.items() <= next(
            a for a in refreshed if a["agent_id"] == agent_id
        ).items()

    async with in_process_master() as master, httpx.AsyncClient(base_url=master.base_url) as client:
        [row] = [r for r in (await client.get("/agents")).json()["agents"] if r["agent_id"] == agent_id]
        assert row["connection_type"] == "mcp" and SECRET not in str(row)
        run = await master.services.entry.call_tool(
            agent_id, "add", {"a": 1, "b": 1}, door="a2a", principal=SYSTEM
        )
        assert run.result == 2 and fake_mcp[-1].headers_seen[-1] == {"Authorization": SECRET}
        assert (await client.post("/unregister", json={"agent_id": agent_id})).status_code == 200
        assert fake_mcp[-1].forgotten == [agent_id]


async def test_a_cancelled_call_cancels_the_connector_call(fake_mcp: list[FakeConnector]) -> None:
    agent_id = f"fake-{uuid.uuid4().hex[:8]}"
    body = {"agent_id": agent_id, "mcp_url": "http://fake/mcp"}
    async with in_process_master() as master, httpx.AsyncClient(base_url=master.base_url) as client:
        assert (await client.post("/register", json=body)).status_code == 200
        call = asyncio.create_task(
            master.services.entry.call_tool(agent_id, "slow", {}, door="mcp", principal=SYSTEM)
        )
        async with asyncio.timeout(30):
            while master.services.dispatcher.in_flight == 0:
                await asyncio.sleep(0.01)
        call.cancel()
        async with asyncio.timeout(30):
            await fake_mcp[-1].cancelled.wait()
        await client.post("/unregister", json={"agent_id": agent_id})


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (
            {
                "agent_id": "refused",
                "mcp_url": "http://fake/refuse",
                "mcp_headers": {"Authorization": SECRET},
            },
            400,
        ),
        ({"mcp_url": "http://fake/mcp", "mcp_headers": {"Authorization": SECRET}}, 422),
        ({"agent_id": "x", "mcp_url": "ftp://fake", "mcp_headers": {"Authorization": SECRET}}, 422),
        (
            {"agent_id": "x", "mcp_url": "http://fake/mcp", "mcp_headers": {"Authorization": SECRET + "\n"}},
            422,
        ),
        ({"a2a_url": "http://fake/", "a2a_headers": {"X-Key": SECRET}}, 400),
    ],
)
async def test_a_refused_registration_never_echoes_a_header_value(
    fake_mcp: list[FakeConnector], body: dict[str, Any], status: int
) -> None:
    async with in_process_master() as master, httpx.AsyncClient(base_url=master.base_url) as client:
        answer = await client.post("/register", json=body)
    assert answer.status_code == status, answer.text
    assert "s3cr3t" not in answer.text
