"""Invocation (HTTP) action agents against a fake master served by uvicorn on loopback."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from openagent import (
    AuthenticationError,
    ConfigurationError,
    OpenAgentError,
    ProgressCallback,
    RegistrationError,
    ToolError,
    ToolSchema,
)
from openagent.invocation import InvocationActionAgent, register_invocation_agent
from sample_agents import demo_invocation_agent as demo
from tests.factories import free_port
from tests.openagent.conftest import WAIT, eventually

ROOT = Path(__file__).resolve().parents[2]
ECHO = ToolSchema(name="echo", description="Echo the arguments back")
TOOLS: list[ToolSchema | dict[str, Any]] = [
    ECHO,
    {"name": "fail", "description": "Always fails", "endpoint": "/fail"},
]


class HttpMaster:
    """A fake master: ``/register``, ``/unregister``, ``/tool_callback``, ``/tool_progress``.

    Records every request in queues; ``register_replies`` and ``callback_replies`` queue
    non-200 answers for the next requests (then 200 again).
    """

    def __init__(self, port: int = 0) -> None:
        self.requested_port = port
        self.registrations: asyncio.Queue[tuple[dict[str, Any], str | None]] = asyncio.Queue()
        self.unregistrations: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.results: asyncio.Queue[tuple[dict[str, Any], str | None]] = asyncio.Queue()
        self.progress: asyncio.Queue[tuple[dict[str, Any], str | None]] = asyncio.Queue()
        self.register_replies: list[tuple[int, dict[str, Any]]] = []
        self.callback_replies: list[int] = []
        self.callback_attempts = 0
        app = Starlette(
            routes=[
                Route("/register", self._register, methods=["POST"]),
                Route("/unregister", self._unregister, methods=["POST"]),
                Route("/tool_callback", self._callback, methods=["POST"]),
                Route("/tool_progress", self._progress, methods=["POST"]),
            ]
        )
        config = uvicorn.Config(app, "127.0.0.1", port, log_level="warning", lifespan="off", ws="none")
        self._server = uvicorn.Server(config)
        self._task: asyncio.Task[None] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.servers[0].sockets[0].getsockname()[1]}"

    async def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve())
        await eventually(lambda: self._server.started)

    async def stop(self) -> None:
        if self._task is not None:
            self._server.should_exit = True
            async with asyncio.timeout(WAIT):
                await self._task

    async def _register(self, request: Request) -> JSONResponse:
        body = await request.json()
        await self.registrations.put((body, request.headers.get("authorization")))
        if self.register_replies:
            status, reply = self.register_replies.pop(0)
            return JSONResponse(reply, status_code=status)
        return JSONResponse({"registered": True, "agent_id": body["agent_id"]})

    async def _unregister(self, request: Request) -> JSONResponse:
        await self.unregistrations.put(await request.json())
        return JSONResponse({"unregistered": True})

    async def _callback(self, request: Request) -> JSONResponse:
        self.callback_attempts += 1
        if self.callback_replies:
            return JSONResponse({"detail": "not now"}, status_code=self.callback_replies.pop(0))
        await self.results.put((await request.json(), request.query_params.get("token")))
        return JSONResponse({"ok": True})

    async def _progress(self, request: Request) -> JSONResponse:
        await self.progress.put((await request.json(), request.query_params.get("token")))
        return JSONResponse({"ok": True})


async def next_item(queue: asyncio.Queue[Any]) -> Any:
    async with asyncio.timeout(WAIT):
        return await queue.get()


@pytest.fixture
async def http_master() -> AsyncIterator[HttpMaster]:
    fake = HttpMaster()
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture(autouse=True)
def _no_dotenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Agents read ``.env`` from the working directory: give them an empty one."""
    monkeypatch.chdir(tmp_path)


def agent_with(
    http_master: HttpMaster, handler: Callable[..., Any] | None, **kwargs: Any
) -> InvocationActionAgent:
    options: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": 0,
        "master_base_url": http_master.base_url,
        "api_key": "",
    }
    return InvocationActionAgent("tools-agent", TOOLS, tool_handler=handler, **{**options, **kwargs})


def call_body(
    http_master: HttpMaster, call_id: str, tool_name: str = "echo", **arguments: Any
) -> dict[str, Any]:
    return {
        "call_id": call_id,
        "tool_name": tool_name,
        "arguments": arguments,
        "callback_url": f"{http_master.base_url}/tool_callback?token=secret-{call_id}",
        "progress_url": f"{http_master.base_url}/tool_progress?token=secret-{call_id}",
    }


async def post(agent: InvocationActionAgent, path: str, **kwargs: Any) -> httpx.Response:
    async with httpx.AsyncClient(base_url=agent.invocation_base_url, timeout=WAIT) as client:
        return await client.post(path, **kwargs)


async def echo(tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"tool": tool_name, **arguments}


# --------------------------------------------------------------------------- registration


async def test_registers_tools_with_bearer_token_and_serves_health(http_master: HttpMaster) -> None:
    async with agent_with(http_master, echo, api_key="k1", metadata={"team": "qa"}) as agent:
        body, authorization = await next_item(http_master.registrations)
        assert authorization == "Bearer k1"
        assert body == {
            "agent_id": "tools-agent",
            "invocation_base_url": f"http://127.0.0.1:{agent.port}",
            "tools": [
                {"name": "echo", "description": "Echo the arguments back", "endpoint": "/tools/echo",
                 "parameters": {"type": "object", "properties": {}}, "requires_approval": False},
                {"name": "fail", "description": "Always fails", "endpoint": "/fail",
                 "parameters": {"type": "object", "properties": {}}, "requires_approval": False},
            ],
            "metadata": {"team": "qa"},
        }  # fmt: skip
        assert agent.port != 0
        async with httpx.AsyncClient(timeout=WAIT) as client:
            health = await client.get(f"{agent.invocation_base_url}/health")
        assert (health.status_code, health.json()) == (200, {"status": "ok", "agent_id": "tools-agent"})


async def test_replica_urls_are_registered_with_the_agent(http_master: HttpMaster) -> None:
    copies = ["http://copy-1.example:9000", "https://copy-2.example"]
    async with agent_with(http_master, echo, replica_urls=copies) as agent:
        body, _ = await next_item(http_master.registrations)
        assert body["invocation_base_url"] == agent.invocation_base_url
        assert body["replica_urls"] == copies
        assert agent.replica_urls == tuple(copies)


async def test_no_replica_urls_sends_none(http_master: HttpMaster) -> None:
    async with agent_with(http_master, echo):
        body, _ = await next_item(http_master.registrations)
        assert "replica_urls" not in body


@pytest.mark.parametrize(
    ("urls", "problem"),
    [
        (["ftp://copy-1.example"], "http:// or https:// URLs, got 'ftp://copy-1.example'"),
        ("http://copy-1.example", "a list of URLs, not a string"),
    ],
)
def test_replica_urls_must_be_http_urls(urls: Any, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(problem)):
        InvocationActionAgent("tools-agent", TOOLS, tool_handler=echo, replica_urls=urls)


async def test_start_retries_until_the_master_comes_up() -> None:
    port = free_port()
    agent = InvocationActionAgent(
        "tools-agent",
        TOOLS,
        tool_handler=echo,
        port=0,
        master_base_url=f"http://127.0.0.1:{port}",
        api_key="",
    )
    # Until the master comes up, the port answers by closing every connection: the agent must
    # keep trying (two attempts seen) without giving up.
    attempts = asyncio.Queue[None]()

    async def refuse(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        attempts.put_nowait(None)
        writer.close()

    down = await asyncio.start_server(refuse, "127.0.0.1", port)
    starting = asyncio.create_task(agent.start())
    fake = HttpMaster(port)
    try:
        for _ in range(2):
            await next_item(attempts)
        assert not starting.done()  # the master is down: still retrying
        down.close()
        await down.wait_closed()
        await fake.start()
        async with asyncio.timeout(WAIT):
            await starting
        body, _ = await next_item(fake.registrations)
        assert body["agent_id"] == "tools-agent"
    finally:
        starting.cancel()
        await agent.stop()
        await fake.stop()


async def test_register_retries_5xx_and_returns_the_reply(http_master: HttpMaster) -> None:
    http_master.register_replies = [(503, {"detail": "redis is down"})]
    reply = await register_invocation_agent(
        "own-server",
        "http://127.0.0.1:1",
        [ECHO],
        master_base_url=http_master.base_url,
        api_key="",
        timeout=2,
    )
    assert reply == {"registered": True, "agent_id": "own-server"}
    assert http_master.registrations.qsize() == 2


@pytest.mark.parametrize(
    ("status", "error"), [(422, RegistrationError), (409, RegistrationError), (401, AuthenticationError)]
)
async def test_4xx_refusal_is_final_and_carries_the_detail(
    http_master: HttpMaster, status: int, error: type[OpenAgentError]
) -> None:
    http_master.register_replies = [(status, {"detail": f"no thanks ({status})"})]
    agent = agent_with(http_master, echo)
    with pytest.raises(error, match=rf"HTTP {status}: no thanks \({status}\)"):
        await agent.start()
    assert http_master.registrations.qsize() == 1


async def test_unregister_on_stop_is_opt_in(http_master: HttpMaster) -> None:
    async with agent_with(http_master, echo):
        await next_item(http_master.registrations)
    async with agent_with(http_master, echo, unregister_on_stop=True):
        await next_item(http_master.registrations)
    assert await next_item(http_master.unregistrations) == {"agent_id": "tools-agent"}
    assert http_master.unregistrations.empty()


# --------------------------------------------------------------------------- tool calls


async def test_tool_call_is_accepted_then_its_result_posted_to_the_callback(http_master: HttpMaster) -> None:
    async with agent_with(http_master, echo) as agent:
        response = await post(agent, "/tools/echo", json=call_body(http_master, "c1", city="Paris"))
        assert (response.status_code, response.json()) == (202, {"accepted": True, "call_id": "c1"})
        result, token = await next_item(http_master.results)
    assert result == {"call_id": "c1", "success": True, "result": {"tool": "echo", "city": "Paris"}}
    assert token == "secret-c1"  # the callback URL is used exactly as given


async def test_invoke_dispatches_on_tool_name(http_master: HttpMaster) -> None:
    async with agent_with(http_master, echo) as agent:
        response = await post(agent, "/invoke", json=call_body(http_master, "c1", "fail", x=1))
        assert response.status_code == 202
        result, _ = await next_item(http_master.results)
    assert result == {"call_id": "c1", "success": True, "result": {"tool": "fail", "x": 1}}


async def test_progress_is_posted_to_the_progress_url(http_master: HttpMaster) -> None:
    async def handler(tool_name: str, arguments: dict[str, Any], *, progress: ProgressCallback) -> str:
        await progress("half way", 0.5)
        await progress("almost")
        return "done"

    async with agent_with(http_master, handler) as agent:
        await post(agent, "/tools/echo", json=call_body(http_master, "c1"))
        assert await next_item(http_master.progress) == (
            {"call_id": "c1", "message": "half way", "progress": 0.5},
            "secret-c1",
        )
        assert await next_item(http_master.progress) == (
            {"call_id": "c1", "message": "almost", "progress": None},
            "secret-c1",
        )
        assert (await next_item(http_master.results))[0]["result"] == "done"


async def test_progress_url_is_derived_from_the_callback_url(http_master: HttpMaster) -> None:
    def handler(tool_name: str, arguments: dict[str, Any], progress_callback: Callable[..., None]) -> str:
        progress_callback("from a worker thread", 0.25)  # a plain function gets a blocking callback
        return "done"

    async with agent_with(http_master, handler) as agent:
        body = call_body(http_master, "c2")
        del body["progress_url"]
        await post(agent, "/tools/echo", json=body)
        assert await next_item(http_master.progress) == (
            {"call_id": "c2", "message": "from a worker thread", "progress": 0.25},
            "secret-c2",
        )
        assert (await next_item(http_master.results))[0] == {
            "call_id": "c2",
            "success": True,
            "result": "done",
        }


async def test_unreachable_progress_url_never_fails_the_tool(http_master: HttpMaster) -> None:
    async def handler(tool_name: str, arguments: dict[str, Any], progress: ProgressCallback) -> str:
        await progress("nobody listens")
        return "done"

    async with agent_with(http_master, handler) as agent:
        body = {
            **call_body(http_master, "c1"),
            "progress_url": f"http://127.0.0.1:{free_port()}/tool_progress",
        }
        await post(agent, "/tools/echo", json=body)
        assert (await next_item(http_master.results))[0] == {
            "call_id": "c1",
            "success": True,
            "result": "done",
        }


@pytest.mark.parametrize(
    ("raised", "error"),
    [
        (ToolError("unknown city 'Atlantis'"), "unknown city 'Atlantis'"),
        (RuntimeError("boom"), "RuntimeError: boom"),
        (None, "tool 'echo' returned a value that is not JSON-serialisable"),
    ],
)
async def test_failures_are_posted_to_the_callback(
    http_master: HttpMaster, raised: Exception | None, error: str
) -> None:
    async def handler(tool_name: str, arguments: dict[str, Any]) -> object:
        if raised is not None:
            raise raised
        return object()

    async with agent_with(http_master, handler) as agent:
        await post(agent, "/tools/echo", json=call_body(http_master, "c1"))
        result, _ = await next_item(http_master.results)
    assert result["call_id"] == "c1" and result["success"] is False
    assert result["error"].startswith(error)
    assert "result" not in result


async def test_unknown_tool_is_404(http_master: HttpMaster) -> None:
    async with agent_with(http_master, echo) as agent:
        response = await post(agent, "/invoke", json=call_body(http_master, "c1", "nope"))
    assert (response.status_code, response.json()) == (
        404,
        {"detail": "unknown tool 'nope' on agent 'tools-agent'"},
    )


@pytest.mark.parametrize(
    ("content", "detail"),
    [
        (b"{not json", "invalid tool call: "),
        (b"[1, 2]", "invalid tool call: body: Input should be"),
        (b'{"call_id": "c1", "tool_name": "echo"}', "invalid tool call: callback_url: Field required"),
        (
            b'{"call_id": "c1", "tool_name": "echo", "callback_url": "ftp://x/y"}',
            "callback_url must be an http(s) URL",
        ),
        (
            b'{"call_id": "c1", "tool_name": "echo", "arguments": [], "callback_url": "http://x/"}',
            "arguments: ",
        ),
    ],
)
async def test_malformed_call_is_400_naming_the_problem(
    http_master: HttpMaster, content: bytes, detail: str
) -> None:
    async with agent_with(http_master, echo) as agent:
        response = await post(agent, "/tools/echo", content=content)
    assert response.status_code == 400
    assert detail in response.json()["detail"]


async def test_callback_is_retried_after_a_503(http_master: HttpMaster) -> None:
    http_master.callback_replies = [503]
    async with agent_with(http_master, echo) as agent:
        await post(agent, "/tools/echo", json=call_body(http_master, "c1"))
        result, _ = await next_item(http_master.results)
    assert result["success"] is True
    assert http_master.callback_attempts == 2


async def test_callback_4xx_is_dropped_with_a_warning(
    http_master: HttpMaster, caplog: pytest.LogCaptureFixture
) -> None:
    http_master.callback_replies = [410]
    async with agent_with(http_master, echo) as agent:
        await post(agent, "/tools/echo", json=call_body(http_master, "c1"))
        await eventually(lambda: any("dropping it" in r.getMessage() for r in caplog.records))
        await eventually(lambda: not agent._calls)  # the call's task has ended: no retry can follow
    assert http_master.callback_attempts == 1
    record = next(r for r in caplog.records if "dropping it" in r.getMessage())
    assert record.levelno == logging.WARNING and "HTTP 410: not now" in record.getMessage()


async def test_stop_cancels_running_calls(http_master: HttpMaster) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def handler(tool_name: str, arguments: dict[str, Any]) -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    agent = agent_with(http_master, handler)
    await agent.start()
    await post(agent, "/tools/echo", json=call_body(http_master, "c1"))
    async with asyncio.timeout(WAIT):
        await started.wait()
        await agent.stop()
    assert cancelled.is_set()
    assert http_master.results.empty()


async def test_subclass_implements_handle_tool(http_master: HttpMaster) -> None:
    class Upper(InvocationActionAgent):
        async def handle_tool(
            self, tool_name: str, arguments: dict[str, Any], *, progress_callback: ProgressCallback
        ) -> Any:
            await progress_callback("upper-casing")
            return str(arguments["text"]).upper()

    agent = Upper(
        "upper-agent", [ECHO], host="127.0.0.1", port=0, master_base_url=http_master.base_url, api_key=""
    )
    async with agent:
        await post(agent, "/tools/echo", json=call_body(http_master, "c1", text="hi"))
        assert (await next_item(http_master.progress))[0]["message"] == "upper-casing"
        assert (await next_item(http_master.results))[0] == {"call_id": "c1", "success": True, "result": "HI"}


async def test_app_can_be_served_elsewhere(http_master: HttpMaster) -> None:
    agent = agent_with(http_master, echo)
    transport = httpx.ASGITransport(app=agent.app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://agent.test") as client:
            assert (await client.get("/health")).json() == {"status": "ok", "agent_id": "tools-agent"}
            response = await client.post("/fail", json=call_body(http_master, "c1", "fail"))
            assert response.status_code == 202
            result, _ = await next_item(http_master.results)
        assert result == {"call_id": "c1", "success": True, "result": {"tool": "fail"}}
    finally:
        await agent.stop()


async def test_run_invocation_agent_stops_cleanly_on_sigterm(http_master: HttpMaster, tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(
        "from openagent.invocation import InvocationActionAgent, run_invocation_agent\n"
        "async def echo(tool_name, arguments):\n"
        "    return arguments\n"
        "agent = InvocationActionAgent('script-agent', [{'name': 'echo'}], tool_handler=echo, port=0,\n"
        f"                             master_base_url={http_master.base_url!r}, api_key='')\n"
        "run_invocation_agent(agent)\n"
        "print('exited cleanly')\n"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(60):
            body, _ = await http_master.registrations.get()
            assert body["agent_id"] == "script-agent"
            process.send_signal(signal.SIGTERM)
            stdout, stderr = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, stderr.decode()
    assert stdout.decode().strip() == "exited cleanly"
    assert "invocation agent script-agent got SIGTERM" in stderr.decode()


# --------------------------------------------------------------------------- configuration


def test_configuration_errors_name_the_problem() -> None:
    with pytest.raises(ConfigurationError, match="pass tool_handler"):
        InvocationActionAgent("tools-agent", TOOLS)
    with pytest.raises(ConfigurationError, match="invalid agent_id 'bad id'"):
        InvocationActionAgent("bad id", TOOLS, tool_handler=echo)
    with pytest.raises(ConfigurationError, match="endpoint of tool 'echo'.*got 'run'"):
        InvocationActionAgent("tools-agent", [{"name": "echo", "endpoint": "run"}], tool_handler=echo)
    with pytest.raises(ConfigurationError, match="master_base_url"):
        InvocationActionAgent("tools-agent", TOOLS, tool_handler=echo, master_base_url="ws://127.0.0.1:8000")


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INVOCATION_HOST", "0.0.0.0")
    monkeypatch.setenv("INVOCATION_PORT", "9123")
    monkeypatch.setenv("INVOCATION_BASE_URL", "http://agents.internal:9123")
    monkeypatch.setenv("MASTER_BASE_URL", "http://http_master.internal:8000/")
    monkeypatch.setenv("HTTP_REGISTER_TIMEOUT", "3.5")
    agent = InvocationActionAgent("tools-agent", TOOLS, tool_handler=echo)
    assert (agent.host, agent.port, agent.invocation_base_url) == (
        "0.0.0.0",
        9123,
        "http://agents.internal:9123",
    )
    assert (agent.master_base_url, agent.register_timeout) == ("http://http_master.internal:8000", 3.5)

    monkeypatch.delenv("INVOCATION_HOST")
    monkeypatch.delenv("INVOCATION_BASE_URL")
    assert InvocationActionAgent("tools-agent", TOOLS, tool_handler=echo).invocation_base_url == (
        "http://127.0.0.1:9123"
    )
    monkeypatch.setenv("INVOCATION_PORT", "ninety")
    with pytest.raises(ConfigurationError, match="INVOCATION_PORT"):
        InvocationActionAgent("tools-agent", TOOLS, tool_handler=echo)


# --------------------------------------------------------------------------- the demo agent


async def test_demo_echo_and_get_time() -> None:
    assert await demo.handle_tool("echo", {"text": "hi"}) == {"echo": "hi"}
    utc = await demo.handle_tool("get_time", {})
    assert utc["timezone"] == "UTC" and utc["utc_offset"] == "+0000"
    paris = await demo.handle_tool("get_time", {"timezone": "Europe/Paris"})
    assert paris["utc_offset"] in ("+0100", "+0200")
    with pytest.raises(ToolError, match="unknown timezone 'Mars/Olympus'"):
        await demo.handle_tool("get_time", {"timezone": "Mars/Olympus"})
    with pytest.raises(ToolError, match="'text' must be a string"):
        await demo.handle_tool("echo", {})


async def test_demo_long_task_reports_progress() -> None:
    updates: list[tuple[str, float | None]] = []

    async def progress(message: str, progress: float | None = None) -> None:
        updates.append((message, progress))

    result = await demo.handle_tool("long_task", {"steps": 2, "step_seconds": 0}, progress=progress)
    assert result == {"steps": 2, "status": "done"}
    assert updates == [("step 1/2 done", 0.5), ("step 2/2 done", 1.0)]
    with pytest.raises(ToolError, match="'steps' must be an integer from 1 to 20"):
        await demo.handle_tool("long_task", {"steps": 21})
    with pytest.raises(ToolError, match="'step_seconds' must be from 0 to 5"):
        await demo.handle_tool("long_task", {"step_seconds": 6})


async def test_demo_agent_end_to_end(http_master: HttpMaster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASTER_BASE_URL", http_master.base_url)
    monkeypatch.setenv("INVOCATION_PORT", "0")
    async with demo.build_agent() as agent:
        body, _ = await next_item(http_master.registrations)
        assert body["agent_id"] == "demo-invocation-agent"
        assert [(t["name"], t["endpoint"]) for t in body["tools"]] == [
            ("echo", "/run"),
            ("get_time", "/get_time"),
            ("long_task", "/long_task"),
        ]
        response = await post(
            agent, "/long_task", json=call_body(http_master, "c1", "long_task", steps=3, step_seconds=0.01)
        )
        assert response.status_code == 202  # accepted: the task runs on and reports progress
        assert [(await next_item(http_master.progress))[0]["progress"] for _ in range(3)] == [
            1 / 3,
            2 / 3,
            1.0,
        ]
        assert (await next_item(http_master.results))[0]["result"] == {"steps": 3, "status": "done"}
        await post(agent, "/run", json=call_body(http_master, "c2", "echo", text="hi"))
        assert (await next_item(http_master.results))[0]["result"] == {"echo": "hi"}
