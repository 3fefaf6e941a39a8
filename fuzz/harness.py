"""The system under fuzz: a master on loopback, and the scripted LLM it talks to."""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from openagent.testing import Reply, ScriptedOpenAIServer, TextReply, ToolCall, ToolCallReply

ROOT = Path(__file__).resolve().parent.parent
ECHO_AGENT = "fuzz-echo"
ECHO_TOOL = "echo"
_PLAN_LINE = re.compile(r"^- (\S+) / (\S+):", re.M)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def llm_reply(body: dict[str, Any]) -> Reply:
    """The fuzz LLM: always answers, never with an error.

    A query that offers the echo tool calls it with the user's text; after a tool result it
    answers with that result; a plan request proposes one step with a listed tool (empty
    arguments); anything else is echoed.
    """
    messages = body.get("messages") or []
    tools = [t.get("function", {}).get("name", "") for t in body.get("tools") or []]
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return TextReply(f"The tool said {last.get('content')}")
    if tools == ["submit_plan"]:
        listed = _PLAN_LINE.findall(str(messages[0].get("content", ""))) if messages else []
        steps = [{"agent_id": agent, "tool_name": tool, "arguments": {}} for agent, tool in listed[:1]]
        return ToolCallReply((ToolCall("submit_plan", {"summary": "fuzz plan", "steps": steps}),))
    echo = f"{ECHO_AGENT}__{ECHO_TOOL}".replace(".", "_")
    text = last.get("content") if isinstance(last.get("content"), str) else ""
    if echo in tools:
        return ToolCallReply((ToolCall(echo, {"text": text}),))
    return TextReply(f"You said: {str(text)[:200]}")


@dataclass
class Master:
    """Where the fuzzers send their traffic."""

    base_url: str
    api_key: str
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    _llm: ScriptedOpenAIServer | None = field(default=None, repr=False)

    @property
    def ws_url(self) -> str:
        return self.base_url.replace("http://", "ws://", 1) + "/ws"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def alive(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            return False
        try:
            return httpx.get(f"{self.base_url}/health", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def log_problems(self) -> list[str]:
        """Tracebacks and ASGI errors in the master's log (only for a master we started)."""
        if self.log_path is None:
            return []
        text = self.log_path.read_text(errors="replace")
        return [line for line in text.splitlines() if "Traceback" in line or "Exception in ASGI" in line]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        if self._llm is not None:
            self._llm.stop()


def start_master(redis_url: str, env: Mapping[str, str] | None = None, log_dir: Path | None = None) -> Master:
    """A master (``python -m master``) and the fuzz LLM, both on free loopback ports."""
    llm = ScriptedOpenAIServer().start()
    llm.set_handler(llm_reply)
    port = free_port()
    key = secrets.token_urlsafe(24)
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="openagent-fuzz-"))
    log_path = log_dir / "master.log"
    settings = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "REDIS_URL": redis_url,
        "MASTER_BASE_URL": f"http://127.0.0.1:{port}",
        "OPENAGENT_API_KEY": key,
        "OPENAI_BASE_URL": llm.base_url,
        "OPENAI_API_KEY": "fuzz",
        "OPENAGENT_LLM_LOOPBACK_ONLY": "1",
        "OPENAGENT_LLM_MAX_RETRIES": "0",
        "TOOL_CALL_TIMEOUT": "10",
        "OPENAGENT_WS_MAX_MESSAGE_BYTES": str(1 << 20),
        "OPENAGENT_HTTP_MAX_BODY_BYTES": str(2 << 20),
        **(env or {}),
    }
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "master", "--host", "127.0.0.1", "--port", str(port)],
            cwd=log_dir,  # no developer .env
            env=settings,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    master = Master(f"http://127.0.0.1:{port}", key, process, log_path, llm)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            master.stop()
            raise RuntimeError(
                f"the master exited at start-up:\n{log_path.read_text(errors='replace')[-3000:]}"
            )
        if master.alive():
            return master
        time.sleep(0.1)
    master.stop()
    raise RuntimeError("the master did not answer /health within 30 s")


def clear_agents(redis_url: str) -> None:
    """Forget the invocation agents of earlier runs in the fuzz database (their keys only)."""
    import redis

    client = redis.Redis.from_url(redis_url, socket_connect_timeout=2, decode_responses=True)
    try:
        ids = client.smembers("agents:invocation")
        if ids:
            client.delete(*(f"agent:{agent_id}" for agent_id in ids))
        client.delete("agents:invocation")
    finally:
        client.close()


def dumps(report: Mapping[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=True)
