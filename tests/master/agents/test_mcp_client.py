"""The ``mcp`` connector against a real Streamable-HTTP MCP server built with the official SDK."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest

from master.agents import mcp_client
from master.agents.connectors import CONNECTORS, ConnectorContext, ConnectorError
from master.agents.invocation import InvocationAgents
from master.agents.mcp_client import McpConnector, scrub
from master.agents.url_policy import AgentUrlPolicy
from master.auth import BOOTSTRAP_ADMIN
from master.errors import AgentUnavailable, ToolFailed
from protocol import ToolSchema
from tests.factories import master_settings
from tests.master.agents.connections import METADATA, Connections, Rebinding
from tests.master.agents.mcp_servers import TestMcpServer, mcp_port, serve_mcp

SECRET = "s3cr3t-token-never-shown"
WAIT = 60.0


@dataclass
class Agent:
    """What the connector reads of an :class:`InvocationAgent`."""

    agent_id: str
    base_url: str
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Changes:
    seen: list[tuple[str, list[ToolSchema]]] = field(default_factory=list)
    event: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, agent_id: str, tools: list[ToolSchema]) -> None:
        self.seen.append((agent_id, tools))
        self.event.set()


@pytest.fixture
async def changes() -> Changes:
    return Changes()


@pytest.fixture
async def connector(changes: Changes) -> AsyncIterator[McpConnector]:
    async with aiohttp.ClientSession() as http:
        built = CONNECTORS["mcp"](
            ConnectorContext(settings=master_settings(), http=http, tools_changed=changes)
        )
        assert isinstance(built, McpConnector) and built.transport == "mcp"
        try:
            yield built
        finally:
            await built.aclose()


async def test_discover_lists_tools_with_annotations_and_describes_the_server(
    connector: McpConnector,
) -> None:
    async with serve_mcp(TestMcpServer()) as url:
        found = await connector.discover(url, {}, WAIT)
    tools = {tool.name: tool for tool in found.tools}
    assert set(tools) == {"add", "fail", "slow", "grow"}
    assert tools["add"].description == "Add two integers."
    assert tools["add"].parameters["required"] == ["a", "b"]
    assert tools["add"].annotations == {"readOnlyHint": True, "idempotentHint": True}
    assert tools["fail"].annotations is None
    assert found.metadata["mcp"]["server"] == "test-mcp"
    assert found.metadata["mcp"]["version"] == "1.2.3"
    assert found.metadata["mcp"]["instructions"] == "Adds numbers for the tests."
    assert found.metadata["mcp"]["protocol_version"]


async def test_call_returns_the_result_and_relays_progress(connector: McpConnector) -> None:
    async with serve_mcp(TestMcpServer()) as url:
        agent = Agent("adder", url)
        progress: list[tuple[str, float | None]] = []
        result = await connector.call(
            agent,
            "add",
            {"a": 2, "b": 3},
            wait_seconds=WAIT,
            on_progress=lambda m, p: progress.append((m, p)),
        )
        assert result == {"result": 5}
        assert progress == [("adding", 0.5)]
        # The session is kept: a second call reuses it.
        session = connector._sessions["adder"]
        assert await connector.call(agent, "add", {"a": 1, "b": 1}, wait_seconds=WAIT, on_progress=print) == {
            "result": 2
        }
        assert connector._sessions["adder"] is session


async def test_a_tool_error_fails_the_call_with_the_servers_text(connector: McpConnector) -> None:
    async with serve_mcp(TestMcpServer()) as url:
        with pytest.raises(ToolFailed) as failed:
            await connector.call(
                Agent("f", url), "fail", {"reason": "no way"}, wait_seconds=WAIT, on_progress=print
            )
    assert str(failed.value) == "tool 'fail' on agent 'f' failed: Error executing tool fail: refused: no way"


async def test_a_cancelled_call_cancels_the_request_on_the_server(connector: McpConnector) -> None:
    server = TestMcpServer()
    async with serve_mcp(server) as url:
        call = asyncio.create_task(
            connector.call(Agent("s", url), "slow", {}, wait_seconds=WAIT, on_progress=print)
        )
        async with asyncio.timeout(WAIT):
            await server.slow_started.wait()
        call.cancel()  # what the dispatcher does when TOOL_CALL_TIMEOUT runs out
        with pytest.raises(asyncio.CancelledError):
            await call
        async with asyncio.timeout(WAIT):
            await server.slow_cancelled.wait()


async def test_tool_list_changes_are_followed(connector: McpConnector, changes: Changes) -> None:
    async with serve_mcp(TestMcpServer()) as url:
        agent = Agent("grower", url)
        assert await connector.call(agent, "grow", {}, wait_seconds=WAIT, on_progress=print) == {
            "result": "grown"
        }
        async with asyncio.timeout(WAIT):
            await changes.event.wait()
    agent_id, tools = changes.seen[-1]
    assert agent_id == "grower" and "shrink" in {tool.name for tool in tools}


async def test_check_reports_a_stopped_server_and_recovers_when_it_is_back(connector: McpConnector) -> None:
    port = mcp_port()
    async with serve_mcp(TestMcpServer(), port) as url:
        agent = Agent("flaky", url)
        assert await connector.check(agent, WAIT) is None
    error = await connector.check(agent, 10)
    assert error is not None and "ConnectError" in error, error
    with pytest.raises(AgentUnavailable, match="'flaky'"):
        await connector.call(agent, "add", {"a": 1, "b": 2}, wait_seconds=10, on_progress=print)
    async with serve_mcp(TestMcpServer(), port):
        assert await connector.check(agent, WAIT) is None
        assert await connector.call(agent, "add", {"a": 1, "b": 2}, wait_seconds=WAIT, on_progress=print) == {
            "result": 3
        }


async def test_headers_are_sent_and_their_values_never_shown(
    connector: McpConnector, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with serve_mcp(TestMcpServer(token=SECRET)) as url:
        good = {"Authorization": f"Bearer {SECRET}"}
        assert {tool.name for tool in (await connector.discover(url, good, WAIT)).tools} >= {"add"}
        assert await connector.call(
            Agent("a", url, good), "add", {"a": 1, "b": 2}, wait_seconds=WAIT, on_progress=print
        )

        wrong = {"Authorization": "Bearer wrong-value-also-secret"}
        with pytest.raises(ConnectorError) as refused:
            await connector.discover(url, wrong, WAIT)
        assert "wrong-value-also-secret" not in str(refused.value)
        assert url in str(refused.value)
        error = await connector.check(Agent("b", url, wrong), WAIT)
        assert error is not None and "wrong-value-also-secret" not in error
        with pytest.raises(AgentUnavailable) as unavailable:
            await connector.call(
                Agent("b", url, wrong), "add", {"a": 1, "b": 2}, wait_seconds=WAIT, on_progress=print
            )
        assert "wrong-value-also-secret" not in str(unavailable.value)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert SECRET not in logged and "wrong-value-also-secret" not in logged


def test_scrub_removes_header_values_and_their_tokens() -> None:
    headers = {"Authorization": "Bearer abcdefgh12345", "X-Key": "k3y-v4lue"}
    text = "sent 'Bearer abcdefgh12345' then abcdefgh12345 and k3y-v4lue"
    assert scrub(text, headers) == "sent '***' then *** and ***"


async def test_an_unreachable_server_is_refused_at_discovery(connector: McpConnector) -> None:
    url = f"http://127.0.0.1:{mcp_port()}/mcp"
    with pytest.raises(ConnectorError, match=f"cannot list the tools of the MCP server at {url}"):
        await connector.discover(url, {}, WAIT)


async def test_a_2025_revision_session_works_the_same(
    connector: McpConnector, changes: Changes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``initialize`` handshake (what servers of the 2025 revisions speak): calls, progress,
    ``ping`` as the health check, and ``notifications/tools/list_changed`` followed."""
    monkeypatch.setattr(mcp_client, "CONNECT_MODE", "legacy")
    async with serve_mcp(TestMcpServer()) as url:
        found = await connector.discover(url, {}, WAIT)
        assert found.metadata["mcp"]["protocol_version"].startswith("2025")
        agent = Agent("old", url)
        progress: list[tuple[str, float | None]] = []
        result = await connector.call(
            agent,
            "add",
            {"a": 2, "b": 5},
            wait_seconds=WAIT,
            on_progress=lambda m, p: progress.append((m, p)),
        )
        assert result == {"result": 7} and progress == [("adding", 0.5)]
        assert await connector.check(agent, WAIT) is None
        assert await connector.call(agent, "grow", {}, wait_seconds=WAIT, on_progress=print) == {
            "result": "grown"
        }
        async with asyncio.timeout(WAIT):
            await changes.event.wait()
        assert "shrink" in {tool.name for tool in changes.seen[-1][1]}
        await connector.aclose()


async def test_a_2025_revision_server_that_restarted_is_reached_again(
    connector: McpConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restarted server forgets the session: the health check opens a new one."""
    monkeypatch.setattr(mcp_client, "CONNECT_MODE", "legacy")
    port = mcp_port()
    async with serve_mcp(TestMcpServer(), port) as url:
        agent = Agent("phoenix", url)
        assert await connector.call(agent, "add", {"a": 1, "b": 1}, wait_seconds=WAIT, on_progress=print) == {
            "result": 2
        }
    async with serve_mcp(TestMcpServer(), port):
        assert await connector.check(agent, WAIT) is None
        assert await connector.call(agent, "add", {"a": 2, "b": 2}, wait_seconds=WAIT, on_progress=print) == {
            "result": 4
        }
    await connector.aclose()


async def test_a_second_master_reaches_the_server_with_the_stored_headers(redis_client: Any) -> None:
    """Two masters' views on one Redis: the record carries the headers, the other master's
    connector opens its own session with them, and a tool change made through one reaches both."""
    async with serve_mcp(TestMcpServer(token=SECRET)) as url, aiohttp.ClientSession() as http:
        settings = master_settings()
        a = InvocationAgents(redis_client, http, ttl_seconds=60, health_timeout=WAIT, settings=settings)
        b = InvocationAgents(redis_client, http, ttl_seconds=60, health_timeout=WAIT, settings=settings)
        headers = {"Authorization": f"Bearer {SECRET}"}
        try:
            await a.reload()
            await b.reload()
            found = await a.discover("mcp", url, headers, WAIT, registrant=BOOTSTRAP_ADMIN)
            registered = await a.register_remote("mcp", "shared-mcp", url, headers, found)
            assert registered.status == "UP"
            assert await b.sync() is True
            other = b.get("shared-mcp")
            assert other is not None and other.transport == "mcp" and other.headers == headers
            assert await b.check(other) == "UP"
            connector = a.connectors["mcp"]
            assert await connector.call(registered, "grow", {}, wait_seconds=WAIT, on_progress=print)
            async with asyncio.timeout(WAIT):
                while "shrink" not in registered.tools:  # a's connector saw the change and stored it
                    await asyncio.sleep(0.05)
            assert await b.sync() is True
            assert "shrink" in b.get("shared-mcp").tools  # type: ignore[union-attr]
        finally:
            await a.unregister("shared-mcp")
            await a.aclose()
            await b.aclose()


async def test_a_server_name_that_rebinds_to_a_refused_address_is_never_connected_to(
    changes: Changes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: the server's name answers 127.0.0.1, then the metadata address. The MCP
    client connects only where the policy's own lookup said (the name exists only in its fake
    resolver), so the new connections after the change are refused naming the rule. A proxy
    named by the environment is not used (it would resolve the name itself)."""
    for variable in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(variable, "http://127.0.0.1:9")  # nothing listens there
    connections = Connections().install(monkeypatch)
    resolver = Rebinding({"rebind.test": [["127.0.0.1"]]})
    policy = AgentUrlPolicy(resolver=resolver)
    async with aiohttp.ClientSession() as http:
        connector = McpConnector(
            ConnectorContext(settings=master_settings(), http=http, tools_changed=changes, url_policy=policy)
        )
        try:
            async with serve_mcp(TestMcpServer(host_names=("rebind.test",))) as url:
                port = int(url.split(":")[2].split("/")[0])
                named = url.replace("127.0.0.1", "rebind.test")
                found = await connector.discover(named, {}, WAIT)
                assert {tool.name for tool in found.tools} >= {"add"}
                result = await connector.call(
                    Agent("adder", named), "add", {"a": 2, "b": 3}, wait_seconds=WAIT, on_progress=print
                )
                assert result == {"result": 5}
                resolver.answers["rebind.test"] = [[METADATA]]
                refusal = "rebind.test resolves to 169.254.169.254, which is a link-local/cloud-metadata"
                with pytest.raises(ConnectorError, match=refusal):
                    await connector.discover(named, {}, WAIT)
                with pytest.raises(AgentUnavailable, match=refusal):  # a new session, a new connection
                    await connector.call(
                        Agent("other", named), "add", {"a": 1, "b": 1}, wait_seconds=WAIT, on_progress=print
                    )
        finally:
            await connector.aclose()
    assert connections.opened and set(connections.opened) == {("127.0.0.1", port)}
    assert ("rebind.test", [METADATA]) in resolver.lookups
