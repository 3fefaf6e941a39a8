"""The ``a2a`` connector against an agent written with the ``a2a-sdk`` server, over real sockets."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from collections.abc import AsyncIterator

import pytest
from a2a.types.a2a_pb2 import AgentCard, AgentInterface

from master.agents.a2a_cards import pick_interface, suggested_agent_id, tool_names
from master.agents.a2a_client import A2AConnector
from master.agents.connectors import ConnectorError
from master.agents.invocation import InvocationAgent
from master.agents.registry import compile_tools
from master.agents.url_policy import AgentUrlPolicy
from master.errors import AgentUnavailable, ToolFailed
from protocol import ToolSchema
from tests.a2a_agent import TestA2AAgent, serve_a2a_agent
from tests.factories import free_port, serve_app
from tests.master.agents.connections import METADATA, Connections, Rebinding

TOKEN = "tok-3f9a1c-never-shown"
HEADERS = {"X-Api-Key": TOKEN}
WAIT = 60.0


@pytest.fixture
async def connector() -> AsyncIterator[A2AConnector]:
    changed: list[tuple[str, list[ToolSchema]]] = []

    async def tools_changed(agent_id: str, tools: list[ToolSchema]) -> None:
        changed.append((agent_id, tools))

    connector = A2AConnector(tools_changed=tools_changed)
    connector.changed = changed  # type: ignore[attr-defined]
    try:
        yield connector
    finally:
        await connector.aclose()


@pytest.fixture(
    params=[(True, "JSONRPC", False), (False, "HTTP+JSON", False), (True, "JSONRPC", True)],
    ids=["streaming-jsonrpc", "polling-rest", "a2a-0.3"],
)
async def remote(request: pytest.FixtureRequest) -> AsyncIterator[TestA2AAgent]:
    streaming, binding, legacy = request.param
    agent = TestA2AAgent(streaming=streaming, bindings=(binding,), token=TOKEN, legacy=legacy)
    async with serve_a2a_agent(agent) as agent:
        yield agent


async def registered(connector: A2AConnector, url: str, headers: dict[str, str] = HEADERS) -> InvocationAgent:
    found = await connector.discover(url, headers, WAIT)
    return InvocationAgent(
        agent_id=found.agent_id or "a2a-agent",
        base_url=url,
        tools=compile_tools(found.agent_id or "a2a-agent", found.tools),
        metadata=found.metadata,
        registered_at=time.time(),
        transport="a2a",
        headers=dict(headers),
    )


def test_tool_names_follow_the_skill_ids() -> None:
    assert tool_names(["convert.currency", "a b/c", "", "x" * 70, "x" * 70]) == [
        "convert_currency",
        "a_b_c",
        "skill",
        "x" * 64,
        "x" * 62 + "_2",
    ]
    assert suggested_agent_id("Currency Agent") == "currency-agent"
    assert suggested_agent_id("  ¿?  ") is None


async def test_discover_offers_each_skill_as_a_tool(remote: TestA2AAgent, connector: A2AConnector) -> None:
    found = await connector.discover(remote.base_url, HEADERS, WAIT)
    assert found.agent_id == "currency-agent"
    [tool] = found.tools
    assert tool.name == "convert_currency"
    assert "Convert an amount between currencies" in tool.description
    assert tool.parameters["required"] == ["message"]
    assert set(tool.parameters["properties"]) == {"message", "data"}
    meta = found.metadata
    version, protocol = ("0.3.1", "0.3.0") if remote.legacy else ("2.1.0", "1.0")
    assert (meta["name"], meta["version"], meta["streaming"]) == ("Currency Agent", version, remote.streaming)
    assert meta["protocol_version"] == protocol
    assert meta["url"].startswith(remote.base_url) and meta["binding"] == remote.bindings[0]
    assert meta["skills"] == {"convert_currency": "convert.currency"}


async def test_a_call_returns_the_artifacts_and_relays_progress(
    remote: TestA2AAgent, connector: A2AConnector
) -> None:
    agent = await registered(connector, remote.base_url)
    progress: list[tuple[str, float | None]] = []
    result = await connector.call(
        agent,
        "convert_currency",
        {"message": "3 EUR in USD", "data": {"amount": 3}},
        wait_seconds=WAIT,
        on_progress=lambda message, fraction: progress.append((message, fraction)),
    )
    assert result == {
        "text": "echo: 3 EUR in USD",
        "data": [{"n": 5, "skill": "convert.currency", "data": [{"amount": 3}]}],
    }
    if remote.streaming:  # a polling client may see the task only once it has ended
        assert ("looking it up", None) in progress
    [request] = remote.requests
    assert request["headers"]["x-api-key"] == TOKEN
    assert request["headers"]["a2a-version"] == ("0.3" if remote.legacy else "1.0")
    # The SDK client and its HTTP connection are kept for the next call.
    assert await connector.call(
        agent, "convert_currency", {"message": "again"}, wait_seconds=WAIT, on_progress=lambda *_: None
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("fail", "failed the task: the exchange is closed"),
        ("reject", "rejected the task: not a currency question"),
        ("ask", "input-required (which currency?): it needs more input"),
    ],
)
async def test_a_task_that_does_not_complete_is_a_tool_error(
    remote: TestA2AAgent, connector: A2AConnector, text: str, expected: str
) -> None:
    agent = await registered(connector, remote.base_url)
    with pytest.raises(ToolFailed, match=re.escape(expected)):
        await connector.call(
            agent, "convert_currency", {"message": text}, wait_seconds=WAIT, on_progress=lambda *_: None
        )


async def test_a_cancelled_call_cancels_the_remote_task(
    remote: TestA2AAgent, connector: A2AConnector
) -> None:
    agent = await registered(connector, remote.base_url)
    working = asyncio.Event()  # the remote task's first update: the call knows the task's id
    call = asyncio.create_task(
        connector.call(
            agent,
            "convert_currency",
            {"message": "hang"},
            wait_seconds=WAIT,
            on_progress=lambda *_: working.set(),
        )
    )
    async with asyncio.timeout(WAIT):
        await working.wait()
    # The dispatcher cancels the call on TOOL_CALL_TIMEOUT; the remote task is cancelled in turn.
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    async with asyncio.timeout(WAIT):
        await remote.cancelled.wait()
    assert len(remote.cancelled_ids) == 1


async def test_header_values_never_appear_in_errors(connector: A2AConnector) -> None:
    wrong = {"X-Api-Key": "wrong-secret-value-71"}
    async with serve_a2a_agent(TestA2AAgent(token=TOKEN)) as remote:
        with pytest.raises(ConnectorError) as refused:
            await connector.discover(remote.base_url, wrong, WAIT)
        assert "401" in str(refused.value)
        assert "wrong-secret-value-71" not in str(refused.value)
        agent = await registered(connector, remote.base_url)
        agent.headers = wrong
        problem = await connector.check(agent, WAIT)
        assert problem is not None and "401" in problem and "wrong-secret-value-71" not in problem
        with pytest.raises(AgentUnavailable) as failed:
            await connector.call(
                agent, "convert_currency", {"message": "x"}, wait_seconds=WAIT, on_progress=lambda *_: None
            )
        assert "wrong-secret-value-71" not in str(failed.value)


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_refused_credentials_are_a_tool_error_without_the_value(
    connector: A2AConnector, binding: str
) -> None:
    async with serve_a2a_agent(TestA2AAgent(token=TOKEN, public_card=True, bindings=(binding,))) as remote:
        agent = await registered(connector, remote.base_url, {"X-Api-Key": "wrong-secret-value-72"})
        with pytest.raises(ToolFailed) as refused:
            await connector.call(
                agent, "convert_currency", {"message": "x"}, wait_seconds=WAIT, on_progress=lambda *_: None
            )
    assert "refused the hub's credentials (HTTP 401)" in str(refused.value)
    assert "wrong-secret-value-72" not in str(refused.value)


async def test_an_unreachable_agent(connector: A2AConnector) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ConnectorError, match="could not read the agent card at http://127.0.0.1"):
        await connector.discover(url, {}, WAIT)


async def test_check_reads_the_card_and_follows_changed_skills(connector: A2AConnector) -> None:
    async with serve_a2a_agent(TestA2AAgent()) as remote:
        agent = await registered(connector, remote.base_url, {})
        assert await connector.check(agent, WAIT) is None
        assert connector.changed == []  # type: ignore[attr-defined]
        agent.tools = compile_tools(agent.agent_id, [ToolSchema(name="old_skill")])
        assert await connector.check(agent, WAIT) is None
        [(agent_id, tools)] = connector.changed  # type: ignore[attr-defined]
        assert agent_id == agent.agent_id and [tool.name for tool in tools] == ["convert_currency"]
    assert "could not read the agent card" in (await connector.check(agent, WAIT) or "")


def _card(*interfaces: tuple[str, str]) -> AgentCard:
    return AgentCard(
        name="x",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding=binding) for url, binding in interfaces
        ],
    )


def test_the_interface_is_one_the_hub_speaks_on_the_registered_origin() -> None:
    base = "http://agent.example:9000"
    with pytest.raises(ConnectorError, match="offers no binding the hub speaks \\(it offers GRPC"):
        pick_interface(_card((f"{base}/grpc", "GRPC")), base, {})
    elsewhere = _card(("http://collector.example/rpc", "JSONRPC"))
    with pytest.raises(ConnectorError, match="sends the agent's headers only there"):
        pick_interface(elsewhere, base, {"Authorization": "Bearer x"})
    assert pick_interface(elsewhere, base, {}).url == "http://collector.example/rpc"
    mixed = _card(("http://collector.example/rpc", "JSONRPC"), (f"{base}/rest", "HTTP+JSON"))
    assert pick_interface(mixed, base, {"Authorization": "Bearer x"}).url == f"{base}/rest"
    assert pick_interface(mixed, base + "/", {}).protocol_binding == "JSONRPC"


async def test_a_task_waiting_for_input_is_cancelled_since_nobody_will_answer(
    remote: TestA2AAgent, connector: A2AConnector
) -> None:
    agent = await registered(connector, remote.base_url)
    with pytest.raises(ToolFailed, match="input-required"):
        await connector.call(
            agent, "convert_currency", {"message": "ask"}, wait_seconds=WAIT, on_progress=lambda *_: None
        )
    async with asyncio.timeout(WAIT):
        await remote.cancelled.wait()


@pytest.mark.parametrize(
    ("streaming", "binding", "legacy"),
    [(True, "JSONRPC", False), (False, "HTTP+JSON", False), (True, "JSONRPC", True)],
    ids=["streaming-jsonrpc", "polling-rest", "a2a-0.3"],
)
async def test_an_agent_name_that_rebinds_to_a_refused_address_is_never_connected_to(
    monkeypatch: pytest.MonkeyPatch, streaming: bool, binding: str, legacy: bool
) -> None:
    """DNS rebinding: the agent's name answers 127.0.0.1, then the metadata address. The A2A
    client connects only where the policy's own lookup said (the name exists only in its fake
    resolver), so the new connections after the change are refused naming the rule. A proxy
    named by the environment is not used (it would resolve the name itself)."""
    for variable in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(variable, "http://127.0.0.1:9")  # nothing listens there
    connections = Connections().install(monkeypatch)
    resolver = Rebinding({"rebind.test": [["127.0.0.1"]]})
    connector = A2AConnector(url_policy=AgentUrlPolicy(resolver=resolver))
    try:
        port = free_port()
        remote = TestA2AAgent(
            streaming=streaming,
            bindings=(binding,),
            token=TOKEN,
            legacy=legacy,
            base_url=f"http://rebind.test:{port}",  # what its card lists
        )
        async with serve_app(remote.app(), port=port):
            agent = await registered(connector, remote.base_url)
            result = await connector.call(
                agent,
                "convert_currency",
                {"message": "1 EUR"},
                wait_seconds=WAIT,
                on_progress=lambda *_: None,
            )
            assert result["text"] == "echo: 1 EUR"
            resolver.answers["rebind.test"] = [[METADATA]]
            refusal = "rebind.test resolves to 169.254.169.254, which is a link-local/cloud-metadata"
            with pytest.raises(ConnectorError, match=refusal):
                await connector.discover(remote.base_url, HEADERS, WAIT)
            other = dataclasses.replace(agent, agent_id="other")  # a new link, a new connection
            with pytest.raises(AgentUnavailable, match=refusal):
                await connector.call(
                    other,
                    "convert_currency",
                    {"message": "2 EUR"},
                    wait_seconds=WAIT,
                    on_progress=lambda *_: None,
                )
    finally:
        await connector.aclose()
    assert connections.opened and set(connections.opened) == {("127.0.0.1", port)}
    assert [request["text"] for request in remote.requests] == ["1 EUR"]
