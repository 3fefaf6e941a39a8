"""``openagent mcp-bridge`` / :class:`openagent.mcp.McpBridge`: the published ``mcp-server-time``
(a real stdio MCP server from PyPI) bridged to a real master, called by the orchestrator end to
end (the scripted LLM chooses its tool), killed and restarted."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import psutil
import pytest

from openagent import ClientConfig
from openagent.cli import main
from openagent.errors import ConfigurationError
from openagent.mcp import McpBridge
from openagent.testing import ScriptedOpenAIServer
from tests.factories import ROOT, InProcessMaster, agent_rows, in_process_master

TIME_SERVER = [sys.executable, "-m", "mcp_server_time"]
WAIT = 90.0
"""Upper bound of every wait (a busy 2-core machine starts a Python MCP server slowly)."""


async def wait_for(condition: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    """Poll an async ``condition`` until it returns something truthy; fail naming ``what``."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                value = await condition()
                if value:
                    return value
                await asyncio.sleep(0.05)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what}")


def _row(rows: list[dict[str, Any]], agent_id: str) -> dict[str, Any] | None:
    return next((row for row in rows if row["agent_id"] == agent_id), None)


def time_server_children() -> list[psutil.Process]:
    """This process's ``mcp_server_time`` children (the bridge's child)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "mcp_server_time" in " ".join(child.cmdline()):
                found.append(child)
    return found


@contextlib.asynccontextmanager
async def running(bridge: McpBridge) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(bridge.run())
    try:
        yield task
    finally:
        bridge.stop()
        async with asyncio.timeout(WAIT):
            await asyncio.gather(task, return_exceptions=True)


def config_for(master: InProcessMaster) -> ClientConfig:
    return ClientConfig(master_ws=master.ws_url, keepalive_interval=0, reconnect_max_delay=1.0)


async def ask(master: InProcessMaster, agent_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=WAIT) as http:
        response = await http.post(
            "/query", json={"query": "What time is it in Paris?", "allowed_agent_ids": [agent_id]}
        )
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body


async def test_bridged_time_server_is_called_end_to_end_and_restarted_after_it_dies(
    llm: ScriptedOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="openagent.mcp")
    async with in_process_master(openai_base_url=llm.base_url) as master:
        bridge = McpBridge(
            "time", TIME_SERVER, config=config_for(master), restart_initial_delay=0.2, restart_max_delay=0.5
        )
        async with running(bridge):
            row = await wait_for(
                lambda: _agent(master, "time"), "the bridged agent to register", timeout=WAIT
            )
            assert row["connection_type"] == "websocket"
            tools = {tool["name"]: tool for tool in row["tools"]}
            assert set(tools) == {"get_current_time", "convert_time"}
            assert tools["get_current_time"]["annotations"]["readOnlyHint"] is True
            assert "timezone" in tools["get_current_time"]["parameters"]["properties"]

            llm.add_tool_call("time__get_current_time", {"timezone": "Europe/Paris"})
            llm.add_text("It is late in Paris.")
            body = await ask(master, "time")
            assert body["success"], body
            assert body["agents_used"] == [{"agent_id": "time", "tool_name": "get_current_time"}]
            result = json.loads(llm.requests[-1]["messages"][-1]["content"])["result"]
            assert result["timezone"] == "Europe/Paris" and "datetime" in result

            # A failing call: the server's own error text reaches the model.
            llm.add_tool_call("time__get_current_time", {"timezone": "Mars/Olympus_Mons"})
            llm.add_text("No such place.")
            body = await ask(master, "time")
            error = json.loads(llm.requests[-1]["messages"][-1]["content"])["error"]
            assert "Mars/Olympus_Mons" in error, error

            # The child dies: the agent leaves the hub, the bridge says so and starts it again.
            [child] = time_server_children()
            child.send_signal(signal.SIGKILL)
            await wait_for(lambda: _gone(master, "time"), "the agent to leave the hub after its server died")
            await wait_for(lambda: _started_again(bridge), "the bridge to start the server again")
            await wait_for(lambda: _agent(master, "time"), "the restarted agent to register")
            assert any(
                "MCP server of agent time exited; agent time left the hub; restarting the server in"
                in r.getMessage()
                for r in caplog.records
            )
            [new_child] = time_server_children()
            assert new_child.pid != child.pid

            llm.add_tool_call("time__get_current_time", {"timezone": "Asia/Tokyo"})
            llm.add_text("It is tomorrow in Tokyo.")
            body = await ask(master, "time")
            assert body["agents_used"] == [{"agent_id": "time", "tool_name": "get_current_time"}]
            assert (
                json.loads(llm.requests[-1]["messages"][-1]["content"])["result"]["timezone"] == "Asia/Tokyo"
            )
        # Stopped: the agent leaves and the child is gone.
        await wait_for(lambda: _gone(master, "time"), "the agent to leave after the bridge stopped")
        assert time_server_children() == []


async def _agent(master: InProcessMaster, agent_id: str) -> dict[str, Any] | None:
    return _row(await agent_rows(master.base_url), agent_id)


async def _gone(master: InProcessMaster, agent_id: str) -> bool:
    return _row(await agent_rows(master.base_url), agent_id) is None


async def _started_again(bridge: McpBridge) -> bool:
    return bridge.starts >= 2


async def test_the_command_line_bridges_a_server_and_it_leaves_when_stopped(
    llm: ScriptedOpenAIServer,
) -> None:
    """The exact command of the guide, as a subprocess: ``openagent mcp-bridge --agent-id ... --master URL -- ...``."""
    async with in_process_master(openai_base_url=llm.base_url) as master:
        command = [
            sys.executable, "-m", "openagent", "mcp-bridge", "--agent-id", "clock",
            "--master", master.base_url, "--", sys.executable, "-m", "mcp_server_time",
        ]  # fmt: skip
        log = ROOT / ".pytest_cache" / "mcp-bridge-cli.log"
        log.parent.mkdir(exist_ok=True)
        with log.open("wb") as out:
            process = subprocess.Popen(  # noqa: ASYNC220 - returns at once; waited for in a thread
                command, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=out, stderr=subprocess.STDOUT
            )
        try:
            row = await wait_for(lambda: _agent(master, "clock"), "the CLI bridge to register")
            assert {tool["name"] for tool in row["tools"]} == {"get_current_time", "convert_time"}
            llm.add_tool_call("clock__convert_time", {
                "source_timezone": "Europe/Paris", "time": "12:00", "target_timezone": "Asia/Tokyo",
            })  # fmt: skip
            llm.add_text("20:00 in Tokyo.")
            body = await ask(master, "clock")
            assert body["agents_used"] == [{"agent_id": "clock", "tool_name": "convert_time"}], body
            result = json.loads(llm.requests[-1]["messages"][-1]["content"])["result"]
            assert result["target"]["timezone"] == "Asia/Tokyo"
        finally:
            process.terminate()
            await asyncio.to_thread(process.wait, WAIT)
        assert process.returncode == 0, log.read_text(errors="replace")[-3000:]
        await wait_for(lambda: _gone(master, "clock"), "the agent to leave after SIGTERM")


def test_the_command_needs_the_server_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["mcp-bridge", "--agent-id", "time"])
    assert exit_info.value.code == 1
    assert "needs the MCP server's command after --" in capsys.readouterr().err


def test_the_command_refuses_a_bad_master_url(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["mcp-bridge", "--agent-id", "time", "--master", "ftp://x", "--", "python"])
    assert exit_info.value.code == 1
    assert "--master must be an http(s):// or ws(s):// URL, got 'ftp://x'" in capsys.readouterr().err


def test_a_bad_agent_id_is_refused_before_anything_starts() -> None:
    with pytest.raises(ConfigurationError, match="invalid agent_id 'no spaces'"):
        McpBridge("no spaces", TIME_SERVER, config=ClientConfig())
    with pytest.raises(ConfigurationError, match="needs the MCP server's command"):
        McpBridge("time", [], config=ClientConfig())


PROGRESS_SERVER = '''
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("steps")


@server.tool()
async def walk(steps: int, ctx: Context) -> str:
    """Walk some steps, reporting each."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return f"walked {steps}"


@server.tool()
def trip(reason: str) -> str:
    """Always fails."""
    raise ToolError(f"tripped over {reason}")


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool leap and announces the change."""

    def leap() -> str:
        """Added at run time."""
        return "leapt"

    server.add_tool(leap, name="leap")
    await ctx.notify_tools_changed()
    return "grown"


server.run()
'''


async def test_progress_and_tool_errors_cross_the_bridge(llm: ScriptedOpenAIServer, tmp_path: Any) -> None:
    """A stdio server written here: its progress reaches the query's stream as ``tool_progress``."""
    script = tmp_path / "steps_server.py"
    script.write_text(PROGRESS_SERVER)
    async with in_process_master(openai_base_url=llm.base_url) as master:
        bridge = McpBridge("steps", [sys.executable, str(script)], config=config_for(master))
        async with running(bridge):
            await wait_for(lambda: _agent(master, "steps"), "the bridged agent to register")
            llm.add_tool_call("steps__walk", {"steps": 2})
            llm.add_text("Walked.")
            events: list[tuple[str, Any]] = []
            body = {"query": "walk", "allowed_agent_ids": ["steps"], "stream": True}
            async with httpx.AsyncClient(base_url=master.base_url, timeout=WAIT) as http:
                async with http.stream("POST", "/query", json=body) as response:
                    event = None
                    async for line in response.aiter_lines():
                        if line.startswith("event: "):
                            event = line[7:]
                        elif line.startswith("data: ") and event:
                            events.append((event, json.loads(line[6:])))
            progress = [
                (data["message"], data["progress"]) for name, data in events if name == "tool_progress"
            ]
            assert progress == [("step 1", 0.5), ("step 2", 1.0)]
            assert json.loads(llm.requests[-1]["messages"][-1]["content"]) == {
                "result": {"result": "walked 2"}
            }

            llm.add_tool_call("steps__trip", {"reason": "a cable"})
            llm.add_text("Tripped.")
            await ask(master, "steps")
            error = json.loads(llm.requests[-1]["messages"][-1]["content"])["error"]
            assert error.endswith("tripped over a cable"), error

            # The server adds a tool: the bridge registers the agent again with it.
            llm.add_tool_call("steps__grow", {})
            llm.add_text("Grown.")
            await ask(master, "steps")
            # The call that changed the tools ended before the agent registered again.
            assert json.loads(llm.requests[-1]["messages"][-1]["content"]) == {"result": {"result": "grown"}}
            await wait_for(lambda: _has_tool(master, "steps", "leap"), "the new tool to be registered")
            llm.add_tool_call("steps__leap", {})
            llm.add_text("Leapt.")
            body = await ask(master, "steps")
            assert body["agents_used"] == [{"agent_id": "steps", "tool_name": "leap"}], body
            assert bridge.starts == 1  # the same child: only the registration was renewed


async def _has_tool(master: InProcessMaster, agent_id: str, tool: str) -> bool:
    row = _row(await agent_rows(master.base_url), agent_id)
    return row is not None and tool in {t["name"] for t in row["tools"]}


def test_a_destructive_mcp_tool_requires_approval_and_others_do_not() -> None:
    from mcp import types

    from openagent.mcp import tool_schema

    def tool(name: str, annotations: types.ToolAnnotations | None) -> types.Tool:
        return types.Tool(name=name, input_schema={"type": "object"}, annotations=annotations)

    destructive = tool_schema(tool("drop", types.ToolAnnotations(destructive_hint=True)))
    harmless = tool_schema(tool("peek", types.ToolAnnotations(read_only_hint=True, destructive_hint=False)))
    silent = tool_schema(tool("poke", None))
    assert destructive is not None and destructive.requires_approval is True
    assert destructive.annotations == {"destructiveHint": True}
    assert harmless is not None and harmless.requires_approval is False
    assert silent is not None and silent.requires_approval is False


class _NoListenClient:
    """A client whose server refuses every ``subscriptions/listen`` with ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.attempts = 0

    def listen(self, **_: Any) -> Any:
        self.attempts += 1
        raise self.error


class _Stop(Exception):
    """Ends the listening loop after a number of waits."""


async def test_the_bridge_backs_off_and_warns_once_when_the_server_cannot_listen(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from mcp.shared.exceptions import MCPError

    from openagent.mcp import _listen

    caplog.set_level(logging.DEBUG, logger="openagent.mcp")
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 8:
            raise _Stop

    client = _NoListenClient(MCPError(-32603, "subscriptions are not available"))
    with pytest.raises(_Stop):
        await _listen(client, asyncio.Event(), agent_id="no-listen", sleep=sleep)  # type: ignore[arg-type]
    assert client.attempts == 8
    # Backed off: each upper bound doubles (the jitter draws from its upper half), up to 5 min.
    assert all(later >= earlier / 2 for earlier, later in zip(waits, waits[1:], strict=False)), waits
    assert waits[-1] > 100, waits
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "no-listen" in warnings[0].getMessage() and "without repeating" in warnings[0].getMessage()


async def test_a_server_without_the_listen_method_is_said_once_and_not_asked_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from mcp.shared.exceptions import MCPError

    from openagent.mcp import _listen

    caplog.set_level(logging.DEBUG, logger="openagent.mcp")

    async def sleep(seconds: float) -> None:
        raise AssertionError("a server without the method is not asked again")

    client = _NoListenClient(MCPError(-32601, "Method not found"))
    async with asyncio.timeout(WAIT):
        await _listen(client, asyncio.Event(), agent_id="old-server", sleep=sleep)  # type: ignore[arg-type]
    assert client.attempts == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "has no list-change subscriptions" in warnings[0], warnings
