"""Action agents against a fake master: tool calls, progress, failures, concurrency, lifecycle."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from openagent import (
    AgentReplacedError,
    ConfigurationError,
    OrchestratorActionAgent,
    OrchestratorWebSocketActionAgent,
    ProgressCallback,
    ToolError,
    ToolSchema,
)
from protocol import CollaborationEnd, CollaborationStart, PeerMessage, ToolCall, ToolProgress, ToolResult
from tests.openagent.conftest import WAIT, FakeMaster, eventually, fast_config

ROOT = Path(__file__).resolve().parents[2]
ECHO = ToolSchema(name="echo", description="Echo the arguments back")
TOOLS = [ECHO, {"name": "fail", "description": "Always fails"}]


def agent_with(master: FakeMaster, handler: Callable[..., Any], **kwargs: Any) -> OrchestratorActionAgent:
    return OrchestratorActionAgent("tools-agent", TOOLS, handler, config=fast_config(master.url), **kwargs)


async def call(master: FakeMaster, call_id: str, tool_name: str = "echo", **arguments: Any) -> None:
    await master.send("tools-agent", ToolCall(call_id=call_id, tool_name=tool_name, arguments=arguments))


async def next_result(master: FakeMaster) -> ToolResult:
    while True:
        _, frame = await master.next_frame()
        if isinstance(frame, ToolResult):
            return frame


async def echo(tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"tool": tool_name, **arguments}


async def test_tool_call_round_trip(fake_master: FakeMaster) -> None:
    async with agent_with(fake_master, echo) as agent:
        registration = await fake_master.next_registration()
        assert registration.role == "action"
        assert [tool.name for tool in registration.tools] == ["echo", "fail"]
        assert agent.registered

        await call(fake_master, "c1", city="Paris")

        assert await next_result(fake_master) == ToolResult(
            call_id="c1", success=True, result={"tool": "echo", "city": "Paris"}
        )
    assert not agent.registered


async def test_subclass_implements_handle_tool(fake_master: FakeMaster) -> None:
    class Upper(OrchestratorWebSocketActionAgent):
        async def handle_tool(
            self, tool_name: str, arguments: dict[str, Any], *, progress_callback: ProgressCallback
        ) -> Any:
            await progress_callback("upper-casing")
            return str(arguments["text"]).upper()

    async with Upper("tools-agent", [ECHO], config=fast_config(fake_master.url)):
        await fake_master.next_registration()
        await call(fake_master, "c1", text="hi")
        assert await fake_master.next_frame() == (
            "tools-agent",
            ToolProgress(call_id="c1", message="upper-casing"),
        )
        assert await next_result(fake_master) == ToolResult(call_id="c1", success=True, result="HI")


async def test_progress_frames_are_sent_while_the_tool_runs(fake_master: FakeMaster) -> None:
    async def slow(tool_name: str, arguments: dict[str, Any], *, progress_callback: ProgressCallback) -> str:
        await progress_callback("started", 0.0)
        await progress_callback("half way", 0.5)
        return "done"

    async with agent_with(fake_master, slow):
        await fake_master.next_registration()
        await call(fake_master, "c1")

        frames = [(await fake_master.next_frame())[1] for _ in range(3)]
    assert frames == [
        ToolProgress(call_id="c1", message="started", progress=0.0),
        ToolProgress(call_id="c1", message="half way", progress=0.5),
        ToolResult(call_id="c1", success=True, result="done"),
    ]


async def test_progress_outside_zero_to_one_fails_the_call(fake_master: FakeMaster) -> None:
    async def eager(tool_name: str, arguments: dict[str, Any], *, progress_callback: ProgressCallback) -> str:
        await progress_callback("too much", 1.5)
        return "unreachable"

    async with agent_with(fake_master, eager):
        await fake_master.next_registration()
        await call(fake_master, "c1")
        result = await next_result(fake_master)
    assert result.error == "ValueError: progress must be between 0 and 1, got 1.5"


async def progress_style(tool_name: str, arguments: dict[str, Any], *, progress: ProgressCallback) -> str:
    await progress("invocation style")
    return "ok"


async def both_names(
    tool_name: str, arguments: dict[str, Any], progress_callback: Any = None, progress: Any = None
) -> str:
    await progress_callback("first")
    await progress("second")
    return "ok"


async def var_keyword(tool_name: str, arguments: dict[str, Any], **kwargs: Any) -> str:
    assert kwargs["progress"] is kwargs["progress_callback"]
    await kwargs["progress"]("from kwargs")
    return "ok"


async def no_progress(tool_name: str, arguments: dict[str, Any]) -> str:
    return "ok"


@pytest.mark.parametrize(
    ("handler", "messages"),
    [
        (progress_style, ["invocation style"]),
        (both_names, ["first", "second"]),
        (var_keyword, ["from kwargs"]),
        (no_progress, []),
    ],
)
async def test_handler_signature_decides_how_progress_is_passed(
    fake_master: FakeMaster, handler: Callable[..., Any], messages: list[str]
) -> None:
    async with agent_with(fake_master, handler):
        await fake_master.next_registration()
        await call(fake_master, "c1")
        frames = [(await fake_master.next_frame())[1] for _ in range(len(messages) + 1)]
    assert frames[:-1] == [ToolProgress(call_id="c1", message=text) for text in messages]
    assert frames[-1] == ToolResult(call_id="c1", success=True, result="ok")


async def test_sync_handler_runs_in_a_thread_with_blocking_progress(fake_master: FakeMaster) -> None:
    loop_thread = threading.get_ident()

    def blocking(tool_name: str, arguments: dict[str, Any], progress_callback: Callable[..., None]) -> int:
        assert threading.get_ident() != loop_thread
        progress_callback("sleeping", 0.25)
        time.sleep(0.01)
        return 42

    async with agent_with(fake_master, blocking):
        await fake_master.next_registration()
        await call(fake_master, "c1")
        assert (await fake_master.next_frame())[1] == ToolProgress(
            call_id="c1", message="sleeping", progress=0.25
        )
        assert await next_result(fake_master) == ToolResult(call_id="c1", success=True, result=42)


async def test_failures_become_results_and_the_agent_keeps_serving(
    fake_master: FakeMaster, caplog: pytest.LogCaptureFixture
) -> None:
    async def handler(tool_name: str, arguments: dict[str, Any]) -> Any:
        if arguments.get("mode") == "tool_error":
            raise ToolError("no weather for 'Atlantis'")
        if arguments.get("mode") == "crash":
            raise KeyError("city")
        if arguments.get("mode") == "not_json":
            return object()
        return "fine"

    async with agent_with(fake_master, handler):
        await fake_master.next_registration()
        for mode in ["tool_error", "crash", "not_json", "ok"]:
            await call(fake_master, mode, mode=mode)
            results = await next_result(fake_master)
            assert results.call_id == mode
            if mode == "tool_error":
                assert (results.success, results.error) == (False, "no weather for 'Atlantis'")
            elif mode == "crash":
                assert (results.success, results.error) == (False, "KeyError: 'city'")
            elif mode == "not_json":
                assert not results.success
                assert results.error is not None and "not JSON-serialisable (object)" in results.error
            else:
                assert (results.success, results.result) == (True, "fine")
    crash_logs = [r for r in caplog.records if r.name == "openagent.action" and r.levelno == logging.ERROR]
    assert any(r.exc_info for r in crash_logs), "a crashing handler is logged with its traceback"


async def test_unknown_tool_fails_with_a_clear_message(fake_master: FakeMaster) -> None:
    async with agent_with(fake_master, echo):
        await fake_master.next_registration()
        await call(fake_master, "c1", tool_name="launch_rocket")
        result = await next_result(fake_master)
    assert result == ToolResult(
        call_id="c1", success=False, error="unknown tool 'launch_rocket' on agent 'tools-agent'"
    )


async def test_calls_run_concurrently(fake_master: FakeMaster) -> None:
    started: set[str] = set()
    release = asyncio.Event()

    async def waiter(tool_name: str, arguments: dict[str, Any]) -> str:
        started.add(arguments["n"])
        await release.wait()
        return arguments["n"]

    async with agent_with(fake_master, waiter):
        await fake_master.next_registration()
        names = [f"call-{i}" for i in range(5)]
        for name in names:
            await call(fake_master, name, n=name)
        await eventually(lambda: started == set(names))  # all five in flight at once
        release.set()
        results = [await next_result(fake_master) for _ in names]
    assert sorted((r.call_id, r.result) for r in results) == [(n, n) for n in names]


async def test_stop_cancels_calls_in_flight(fake_master: FakeMaster) -> None:
    running = asyncio.Event()
    cancelled = asyncio.Event()

    async def forever(tool_name: str, arguments: dict[str, Any]) -> None:
        running.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    agent = agent_with(fake_master, forever)
    await agent.start()
    await fake_master.next_registration()
    await call(fake_master, "c1")
    async with asyncio.timeout(WAIT):
        await running.wait()
    await agent.stop()
    assert cancelled.is_set()
    await agent.stop()  # idempotent


async def test_run_raises_when_the_agent_is_replaced(fake_master: FakeMaster) -> None:
    first = agent_with(fake_master, echo)
    run = asyncio.create_task(first.run())
    await fake_master.next_registration()
    async with agent_with(fake_master, echo) as second:
        await fake_master.next_registration()
        with pytest.raises(AgentReplacedError):
            async with asyncio.timeout(WAIT):
                await run
        assert second.registered
    assert not first.registered


async def test_collaboration_handler_is_advertised_and_runs_beside_tool_calls(
    fake_master: FakeMaster,
) -> None:
    tasks: list[str] = []

    async def collaborate(ctx: Any) -> str:
        tasks.append(ctx.task)
        return "done at once"

    async with agent_with(
        fake_master, echo, collaboration_handler=collaborate, metadata={"team": "a"}
    ) as agent:
        registration = await fake_master.next_registration()
        assert registration.metadata == {"team": "a", "supports_collaboration": True}
        assert agent.collaboration_handler is collaborate
        start = CollaborationStart(session_id="s1", task="negotiate", role="initiator")
        await fake_master.send("tools-agent", start)
        assert await fake_master.next_frame() == (
            "tools-agent",
            CollaborationEnd(session_id="s1", summary="done at once"),
        )
        await fake_master.send(
            "tools-agent", PeerMessage(session_id="s1", content={"offer": 1})
        )  # late: dropped
        await call(fake_master, "c1")
        assert (await next_result(fake_master)).success
        assert tasks == ["negotiate"]


def test_tools_are_validated() -> None:
    config = fast_config("ws://127.0.0.1:1/ws")
    agent = OrchestratorActionAgent(
        "a", [{"name": "ok", "parameters": {"type": "object"}}], echo, config=config
    )
    assert agent.tools == [ToolSchema(name="ok", parameters={"type": "object"})]

    with pytest.raises(ConfigurationError, match="invalid tool 'bad name!' of agent 'a'"):
        OrchestratorActionAgent("a", [{"name": "bad name!"}], echo, config=config)
    with pytest.raises(ConfigurationError, match="invalid tool #0 of agent 'a'"):
        OrchestratorActionAgent("a", [{"description": "no name"}], echo, config=config)
    with pytest.raises(ConfigurationError, match="duplicate tool name 'echo'"):
        OrchestratorActionAgent("a", [ECHO, {"name": "echo"}], echo, config=config)


def test_misuse_is_reported_at_construction() -> None:
    config = fast_config("ws://127.0.0.1:1/ws")
    with pytest.raises(ConfigurationError, match="invalid agent_id 'has space'"):
        OrchestratorActionAgent("has space", [ECHO], echo, config=config)
    with pytest.raises(ConfigurationError, match="implement handle_tool"):
        OrchestratorWebSocketActionAgent("a", [ECHO], config=config)
    with pytest.raises(ConfigurationError, match=r"must accept \(tool_name, arguments\)"):
        OrchestratorActionAgent("a", [ECHO], lambda: None, config=config)


async def test_run_action_agent_stops_cleanly_on_sigterm(fake_master: FakeMaster, tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(
        "from openagent import ClientConfig, OrchestratorActionAgent, run_action_agent\n"
        "async def echo(tool_name, arguments):\n"
        "    return arguments\n"
        f"config = ClientConfig(master_ws={fake_master.url!r})\n"
        "run_action_agent(OrchestratorActionAgent('script-agent', [{'name': 'echo'}], echo, config=config))\n"
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
            assert (await fake_master.next_registration()).agent_id == "script-agent"
            process.send_signal(signal.SIGTERM)
            stdout, stderr = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, stderr.decode()
    assert stdout.decode().strip() == "exited cleanly"
    assert "got SIGTERM" in stderr.decode()  # basicConfig(INFO) logs to stderr
