"""The master's MCP server (``/mcp``) through the official ``mcp`` client, against a real master.

Each test runs an in-process master (real lifespan, Redis, uvicorn on loopback) and a WebSocket
action agent through the SDK (``openagent``), and talks to ``/mcp`` with ``mcp.Client`` in both
eras the SDK speaks: ``2026-07-28`` (``mode="auto"``: ``server/discover``, then one stateless
POST per request) and ``2025-11-25`` (``mode="legacy"``: ``initialize``, a session and its GET
stream), the newest revision of the handshake era.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
import redis.asyncio as aioredis
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from master.agents.toolbox import function_name
from master.storage.redis_keys import RUNS_RUNNING_KEY
from openagent import ClientConfig, OrchestratorActionAgent, ToolError
from openagent.testing import ScriptedOpenAIServer
from tests.factories import InProcessMaster, in_process_master, master_settings, serve_app
from tests.master.agents.mcp_servers import TestMcpServer, serve_mcp
from tests.master.query.test_cancel import running_run

ERAS = {"2026-07-28": "auto", "2025-11-25": "legacy"}
"""Protocol revision → the client's ``mode`` that speaks it."""
era = pytest.mark.parametrize("revision", list(ERAS))
KEY = "mcp-test-key"
DEADLINE = 60.0

ADD = {
    "name": "add",
    "description": "Add two numbers",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
    "annotations": {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
}
TOOLS = [
    ADD,
    {"name": "fail", "description": "Always fails", "parameters": {"type": "object", "properties": {}}},
    {"name": "slow", "description": "Reports progress, then waits", "parameters": {"type": "object"}},
    {"name": "hang", "description": "Never answers", "parameters": {"type": "object"}},
]


@dataclass
class Calculator:
    """The agent's side: what the tests wait for and release."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    hanging: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    calls: list[str] = field(default_factory=list)

    async def handle(self, tool_name: str, arguments: dict[str, Any], progress_callback: Any = None) -> Any:
        self.calls.append(tool_name)
        if tool_name == "add":
            return {"sum": arguments["a"] + arguments["b"]}
        if tool_name == "fail":
            raise ToolError("the calculator is broken")
        if tool_name == "slow":
            await progress_callback("half way", 0.5)
            async with asyncio.timeout(DEADLINE):
                await self.release.wait()
            return "done"
        self.hanging.set()
        try:
            await asyncio.Event().wait()  # until the master's tool_cancel cancels it
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return None


@dataclass
class Hub:
    master: InProcessMaster
    calculator: Calculator

    @property
    def url(self) -> str:
        return f"{self.master.base_url}/mcp"

    def agent(self, agent_id: str, tools: list[dict[str, Any]], handler: Any) -> OrchestratorActionAgent:
        config = ClientConfig(master_ws=self.master.ws_url, api_key=KEY)
        return OrchestratorActionAgent(agent_id, tools, handler, config=config)

    @contextlib.asynccontextmanager
    async def client(self, revision: str, **kwargs: Any) -> AsyncIterator[Client]:
        """The official client speaking ``revision``, with the master's key."""
        headers = {"Authorization": f"Bearer {KEY}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=DEADLINE) as http,
            Client(
                streamable_http_client(self.url, http_client=http), mode=ERAS[revision], **kwargs
            ) as client,
        ):
            yield client


@contextlib.asynccontextmanager
async def hub(**settings: Any) -> AsyncIterator[Hub]:
    calculator = Calculator()
    async with in_process_master(openagent_api_key=KEY, **settings) as master:
        running = Hub(master, calculator)
        async with running.agent("calc", TOOLS, calculator.handle):
            yield running


@pytest.fixture
async def calc_hub() -> AsyncIterator[Hub]:
    async with hub() as running:
        yield running


async def until(condition: Callable[[], bool], what: str) -> None:
    async with asyncio.timeout(DEADLINE):
        while not condition():
            await asyncio.sleep(0.02)
    assert condition(), what


@era
async def test_discovery_says_what_the_hub_is(calc_hub: Hub, revision: str) -> None:
    async with calc_hub.client(revision) as client:
        assert client.protocol_version == revision
        info = client.server_info
        assert info is not None and info.name == "openagent" and info.title == "OpenAgent hub"
        assert client.instructions is not None and "orchestrator" in client.instructions
        tools = client.server_capabilities.tools
        assert tools is not None and tools.list_changed is True


@era
async def test_tools_are_listed_as_the_orchestrator_names_them(calc_hub: Hub, revision: str) -> None:
    async with calc_hub.client(revision) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(listed) == {"ask", *(function_name("calc", tool["name"]) for tool in TOOLS)}
    add = listed["calc__add"]
    assert add.input_schema == ADD["parameters"]
    assert add.description is not None and "Add two numbers" in add.description
    assert add.annotations is not None
    assert (add.annotations.read_only_hint, add.annotations.idempotent_hint) == (True, True)
    assert add.annotations.open_world_hint is False and add.annotations.destructive_hint is None
    assert listed["calc__fail"].annotations is None
    ask = listed["ask"]
    assert ask.input_schema["required"] == ["query"]
    assert set(ask.input_schema["properties"]) == {"query", "session_id", "allowed_agent_ids", "auto_mode"}


@era
async def test_a_call_reaches_the_agent_and_returns_its_result(calc_hub: Hub, revision: str) -> None:
    async with calc_hub.client(revision) as client:
        result = await client.call_tool("calc__add", {"a": 2, "b": 3})
    assert result.is_error is False
    assert result.structured_content == {"sum": 5}
    assert isinstance(result.content[0], types.TextContent) and result.content[0].text == '{"sum": 5}'
    assert calc_hub.calculator.calls == ["add"]


@era
async def test_a_failing_tool_is_an_error_result_with_the_agents_message(
    calc_hub: Hub, revision: str
) -> None:
    async with calc_hub.client(revision) as client:
        result = await client.call_tool("calc__fail", {})
    assert result.is_error is True
    assert isinstance(result.content[0], types.TextContent)
    assert "the calculator is broken" in result.content[0].text


@era
async def test_arguments_off_the_schema_name_the_tool_and_the_field(calc_hub: Hub, revision: str) -> None:
    """A tool execution error (``isError``), which a model can read and correct: not sent."""
    async with calc_hub.client(revision) as client:
        result = await client.call_tool("calc__add", {"a": 1})
    assert result.is_error is True
    assert isinstance(result.content[0], types.TextContent)
    text = result.content[0].text
    assert "calc__add" in text and re.search(r"""['"]b['"] is a required property""", text), text
    assert calc_hub.calculator.calls == []


@era
async def test_an_unknown_tool_is_a_protocol_error_naming_it(calc_hub: Hub, revision: str) -> None:
    async with calc_hub.client(revision) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("calc__divide", {"a": 1})
    assert raised.value.code == types.INVALID_PARAMS
    assert "'calc__divide'" in raised.value.message


@era
async def test_the_agents_progress_reaches_the_caller(calc_hub: Hub, revision: str) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))
        calc_hub.calculator.release.set()  # the agent answers only once its progress arrived

    async with calc_hub.client(revision) as client:
        result = await client.call_tool("calc__slow", {}, progress_callback=on_progress)
    assert result.is_error is False
    assert progress == [(0.5, 1.0, "half way")]


@era
async def test_a_cancelled_call_is_abandoned_by_the_hub(calc_hub: Hub, revision: str) -> None:
    dispatcher = calc_hub.master.services.dispatcher
    async with calc_hub.client(revision) as client:
        call = asyncio.create_task(client.call_tool("calc__hang", {}))
        async with asyncio.timeout(DEADLINE):
            await calc_hub.calculator.hanging.wait()
        assert dispatcher.in_flight == 1
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
        await until(lambda: dispatcher.in_flight == 0, "the hub forgot the cancelled call")
        async with asyncio.timeout(DEADLINE):  # and told the agent (tool_cancel), which stopped
            await calc_hub.calculator.cancelled.wait()
        # The session goes on.
        assert (await client.call_tool("calc__add", {"a": 1, "b": 1})).structured_content == {"sum": 2}


@era
async def test_a_cancelled_ask_ends_its_run_cancelled(
    revision: str, llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    """The client cancels an ``ask`` in progress (2025: ``notifications/cancelled``; 2026: the
    request dropped): its run is cancelled as any door's cancel does, ``cancelled`` in its record,
    the agent's call stopped (``tool_cancel``)."""
    before = set(await redis_client.smembers(RUNS_RUNNING_KEY))
    async with hub(openai_base_url=llm.base_url, openai_api_key="sk-test") as running:
        llm.add_tool_call("calc__hang", {})
        async with running.client(revision) as client:
            call = asyncio.create_task(
                client.call_tool("ask", {"query": "hang on", "allowed_agent_ids": ["calc"]})
            )
            async with asyncio.timeout(DEADLINE):
                await running.calculator.hanging.wait()
            run_id = await running_run(redis_client, before)
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call
            async with httpx.AsyncClient(
                base_url=running.master.base_url, headers={"Authorization": f"Bearer {KEY}"}, timeout=DEADLINE
            ) as http:
                async with asyncio.timeout(DEADLINE):
                    while (record := (await http.get(f"/runs/{run_id}")).json())["state"] == "running":
                        await asyncio.sleep(0.02)
            assert record["state"] == "cancelled", record
            assert "MCP" in record["reason"] or record["reason"] == "cancelled by a client", record
            async with asyncio.timeout(DEADLINE):
                await running.calculator.cancelled.wait()
            assert llm.pending == 0 and len(llm.requests) == 1  # the model was not asked again


@era
async def test_clients_hear_that_the_tools_changed_when_an_agent_leaves(calc_hub: Hub, revision: str) -> None:
    async def echo(tool_name: str, arguments: dict[str, Any]) -> Any:
        return arguments

    leaver = calc_hub.agent("leaver", [{"name": "echo", "parameters": {"type": "object"}}], echo)
    await leaver.start()
    heard = asyncio.Event()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
            message, types.ToolListChangedNotification
        ):
            heard.set()

    async with calc_hub.client(revision, message_handler=on_message) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "leaver__echo" in names
        if revision == "2026-07-28":
            async with client.listen(tools_list_changed=True) as subscription:
                await leaver.stop()
                async with asyncio.timeout(DEADLINE):
                    async for _event in subscription:
                        names = {tool.name for tool in (await client.list_tools()).tools}
                        if "leaver__echo" not in names:
                            break
        else:
            await leaver.stop()
            async with asyncio.timeout(DEADLINE):
                while "leaver__echo" in names:
                    await heard.wait()
                    heard.clear()
                    names = {tool.name for tool in (await client.list_tools()).tools}
    assert "leaver__echo" not in names and "calc__add" in names


async def test_without_the_key_mcp_answers_401(calc_hub: Hub) -> None:
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            response = await http.post(
                calc_hub.url,
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                headers={"Accept": "application/json, text/event-stream", **headers},
            )
            assert response.status_code == 401, response.text
            assert response.headers["www-authenticate"] == "Bearer"
            assert response.json()["error_code"] == "unauthorized"
    # The official client without the key does not get in either (the SDK reports the HTTP
    # error as an internal error of the transport, inside its task groups).
    with pytest.raises(ExceptionGroup) as raised:
        async with Client(calc_hub.url) as client:
            await client.list_tools()
    assert raised.group_contains(MCPError), repr(raised.value)


@era
async def test_ask_runs_a_query_through_the_orchestrator(revision: str, llm: ScriptedOpenAIServer) -> None:
    async with hub(openai_base_url=llm.base_url, openai_api_key="sk-test") as running:
        llm.add_tool_call("calc__add", {"a": 20, "b": 22})
        llm.add_text("The sum is 42.")
        async with running.client(revision) as client:
            result = await client.call_tool(
                "ask", {"query": "what is 20 + 22?", "allowed_agent_ids": ["calc"]}
            )
            assert result.is_error is False
            assert isinstance(result.content[0], types.TextContent)
            assert result.content[0].text == "The sum is 42."
            structured = result.structured_content
            assert structured is not None
            assert structured["agents_used"] == [{"agent_id": "calc", "tool_name": "add"}]
            assert structured["error_code"] is None and structured["run_id"]
            session_id = structured["session_id"]
            assert session_id
            llm.add_text("Still 42.")
            again = await client.call_tool("ask", {"query": "and again?", "session_id": session_id})
            assert (
                again.structured_content is not None and again.structured_content["session_id"] == session_id
            )
            refused = await client.call_tool("ask", {"question": "no query"})
            assert refused.is_error is True
            assert isinstance(refused.content[0], types.TextContent) and "question" in refused.content[0].text
            assert refused.structured_content == {
                "session_id": None,
                "run_id": None,
                "agents_used": [],
                "error_code": "invalid_arguments",
            }
    assert running.calculator.calls == ["add"]


@era
@pytest.mark.parametrize("action", ["accept", "decline"])
async def test_ask_asks_the_clients_user_to_approve_a_held_call(
    revision: str, action: str, llm: ScriptedOpenAIServer
) -> None:
    """A client that declares elicitation is asked (2026: an InputRequiredResult the client's
    driver answers and retries; 2025: elicitation/create within the call), and the run goes on."""
    asked: list[types.ElicitRequestParams] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        if action == "decline":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"decision": "approve", "remember": True})

    async with hub(
        openai_base_url=llm.base_url, openai_api_key="sk-test", openagent_approval_tools="calc__add"
    ) as running:
        llm.add_tool_call("calc__add", {"a": 2, "b": 3})
        llm.add_text("The sum is 5." if action == "accept" else "I was not allowed to add.")
        async with running.client(revision, elicitation_callback=answer) as client:
            result = await client.call_tool("ask", {"query": "what is 2 + 3?"})
        assert result.is_error is False, result
        assert isinstance(result.content[0], types.TextContent)
        assert len(asked) == 1 and "calc.add" in asked[0].message
        if action == "accept":
            assert result.content[0].text == "The sum is 5."
            assert running.calculator.calls == ["add"]
            assert result.structured_content is not None
            session_id = result.structured_content["session_id"]
            llm.add_tool_call("calc__add", {"a": 1, "b": 1})
            llm.add_text("The sum is 2.")
            async with running.client(revision, elicitation_callback=answer) as client:
                again = await client.call_tool("ask", {"query": "and 1 + 1?", "session_id": session_id})
            assert (
                isinstance(again.content[0], types.TextContent) and again.content[0].text == "The sum is 2."
            )
            assert len(asked) == 1  # approved for the rest of the session: not asked again
        else:
            assert result.content[0].text == "I was not allowed to add."
            assert running.calculator.calls == []
            told = [m["content"] for m in llm.requests[-1]["messages"] if m.get("role") == "tool"]
            assert any("refused" in content for content in told)
        outcome = "approved" if action == "accept" else "rejected"
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}) as http:
            metrics = (await http.get(f"{running.master.base_url}/metrics")).text
        assert f'openagent_approvals_total{{outcome="{outcome}"}} 1.0' in metrics


@era
async def test_ask_without_elicitation_says_how_to_decide(revision: str, llm: ScriptedOpenAIServer) -> None:
    async with hub(
        openai_base_url=llm.base_url, openai_api_key="sk-test", openagent_approval_tools="calc__add"
    ) as running:
        llm.add_tool_call("calc__add", {"a": 2, "b": 3})
        async with running.client(revision) as client:
            result = await client.call_tool("ask", {"query": "what is 2 + 3?"})
        assert result.is_error is False and isinstance(result.content[0], types.TextContent)
        assert result.structured_content is not None
        [approval] = result.structured_content["approvals"]
        assert approval["tool_name"] == "add" and approval["status"] == "pending"
        assert approval["approval_id"] in result.content[0].text
        assert "POST /approvals/{approval_id}" in result.content[0].text
        assert running.calculator.calls == []


async def test_a_foreign_host_or_origin_is_refused(calc_hub: Hub) -> None:
    """DNS rebinding: a page on another name that resolves to this machine gets nothing."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "browser-page", "version": "0"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        for foreign in ({"Host": "evil.example:80"}, {"Origin": "http://evil.example"}):
            response = await http.post(calc_hub.url, json=body, headers={**headers, **foreign})
            assert 400 <= response.status_code < 500, (foreign, response.status_code)
        origin = calc_hub.master.base_url  # the master's own page (the web UI) may call it
        response = await http.post(calc_hub.url, json=body, headers={**headers, "Origin": origin})
        assert response.status_code == 200, response.text


def test_the_hosts_mcp_accepts() -> None:
    assert master_settings(master_host="127.0.0.1").mcp_allowed_hosts == [
        "127.0.0.1:*",
        "localhost:*",
        "[::1]:*",
    ]
    assert master_settings(master_host="0.0.0.0").mcp_allowed_hosts is None
    listed = master_settings(master_host="127.0.0.1", openagent_mcp_allowed_hosts="hub.example:443, hub:*")
    assert listed.mcp_allowed_hosts == ["hub.example:443", "hub:*"]


async def test_a_client_of_one_master_hears_of_an_agent_on_another() -> None:
    """Several masters on one Redis: the agent joins and leaves master B; master A's MCP client,
    listening (2026-07-28), is told both times and can call the agent through A."""

    async def echo(tool_name: str, arguments: dict[str, Any]) -> Any:
        return {"echo": arguments.get("text")}

    cluster = {"openagent_cluster": True, "openagent_master_lease_seconds": 1.0, "openagent_api_key": KEY}
    async with in_process_master(**cluster) as a, in_process_master(**cluster) as b:
        front, back = Hub(a, Calculator()), Hub(b, Calculator())
        elsewhere = back.agent("elsewhere", [{"name": "echo", "parameters": {"type": "object"}}], echo)

        async def names(client: Client) -> set[str]:
            return {tool.name for tool in (await client.list_tools()).tools}

        async with front.client("2026-07-28") as client:
            assert "elsewhere__echo" not in await names(client)
            async with client.listen(tools_list_changed=True) as subscription:
                await elsewhere.start()
                async with asyncio.timeout(DEADLINE):
                    async for _event in subscription:
                        if "elsewhere__echo" in await names(client):
                            break
                result = await client.call_tool("elsewhere__echo", {"text": "across"})
                assert result.structured_content == {"echo": "across"}
                await elsewhere.stop()
                async with asyncio.timeout(DEADLINE):
                    async for _event in subscription:
                        if "elsewhere__echo" not in await names(client):
                            break


async def test_a_body_over_the_masters_limit_gets_413() -> None:
    async with in_process_master(openagent_http_max_body_bytes=2048) as master:
        big = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {"pad": "x" * 4096}}}
        async with httpx.AsyncClient(timeout=DEADLINE) as http:
            response = await http.post(
                f"{master.base_url}/mcp", json=big, headers={"Accept": "application/json, text/event-stream"}
            )
    assert response.status_code == 413, response.text


@pytest.mark.parametrize("older", ["2024-11-05", "2025-03-26", "2025-06-18"])
async def test_older_2025_clients_get_their_revision(calc_hub: Hub, older: str) -> None:
    """The handshake keeps a client's older revision (the official clients above speak the newest)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": older,
            "capabilities": {},
            "clientInfo": {"name": "old", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        response = await http.post(calc_hub.url, json=body, headers=headers)
    assert response.status_code == 200, response.text
    data = next(line for line in response.text.splitlines() if line.startswith("data: "))
    result = json.loads(data.removeprefix("data: "))["result"]
    assert result["protocolVersion"] == older
    assert result["serverInfo"]["name"] == "openagent"
    assert result["capabilities"]["tools"] == {"listChanged": True}


async def test_clients_hear_of_an_http_agent_registered_and_removed(calc_hub: Hub) -> None:
    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    agent_app = Starlette(routes=[Route("/health", health)])
    tool = {"name": "lookup", "parameters": {"type": "object"}, "endpoint": "/run"}
    headers = {"Authorization": f"Bearer {KEY}"}
    async with (
        serve_app(agent_app) as agent_url,
        httpx.AsyncClient(base_url=calc_hub.master.base_url, headers=headers, timeout=DEADLINE) as http,
        calc_hub.client("2026-07-28") as client,
        client.listen(tools_list_changed=True) as subscription,
    ):

        async def heard(present: bool) -> None:
            async with asyncio.timeout(DEADLINE):
                async for _event in subscription:
                    names = {tool.name for tool in (await client.list_tools()).tools}
                    if ("http-lookup__lookup" in names) is present:
                        return

        body = {"agent_id": "http-lookup", "invocation_base_url": agent_url, "tools": [tool]}
        assert (await http.post("/register", json=body)).status_code == 200
        await heard(True)
        assert (await http.post("/unregister", json={"agent_id": "http-lookup"})).status_code == 200
        await heard(False)


async def test_an_attached_mcp_server_is_served_again_at_mcp(calc_hub: Hub) -> None:
    """MCP in, MCP out: a server attached with ``POST /register`` is listed at ``/mcp`` under the
    hub's name for it, called with its progress relayed, and a cancelled call reaches it."""
    server = TestMcpServer()
    headers = {"Authorization": f"Bearer {KEY}"}
    async with (
        serve_mcp(server) as url,
        httpx.AsyncClient(base_url=calc_hub.master.base_url, headers=headers, timeout=DEADLINE) as http,
    ):
        registered = await http.post("/register", json={"agent_id": "remote-adder", "mcp_url": url})
        assert registered.status_code == 200, registered.text
        async with calc_hub.client("2026-07-28") as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            add = listed["remote-adder__add"]
            assert add.annotations is not None and add.annotations.read_only_hint is True
            progress: list[str | None] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append(message)

            result = await client.call_tool(
                "remote-adder__add", {"a": 2, "b": 40}, progress_callback=on_progress
            )
            assert result.is_error is False and result.structured_content == {"result": 42}
            assert progress == ["adding"]

            call = asyncio.create_task(client.call_tool("remote-adder__slow", {}))
            async with asyncio.timeout(DEADLINE):
                await server.slow_started.wait()
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call
            async with asyncio.timeout(DEADLINE):
                await server.slow_cancelled.wait()
        await http.post("/unregister", json={"agent_id": "remote-adder"})
