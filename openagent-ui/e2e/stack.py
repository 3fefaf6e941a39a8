"""What the Playwright suite runs against: a scripted LLM, Redis, a real master serving the
built UI, the real sample agent ``demo-invocation-agent`` and the real RAG stack
(``python -m system_agents.rag_stack_ws``: extractor and indexer, with the ``hashing``
embedding backend, so no model is downloaded and no embeddings API is called).

    python openagent-ui/e2e/stack.py          (from the repository root, with the project's venv)

Prints one JSON line (``{"ui": ..., "master": ..., "api_key": ...}``) once everything answers,
then runs until stdin closes or it gets SIGTERM, and stops what it started. Uses
``OPENAGENT_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/3``), emptied at start.

The scripted LLM answers by rule, like a model that follows the prompts:
- offered ``submit_plan``: a one-step plan calling ``demo-invocation-agent.echo``;
- after a tool result: "The agent answered: <result>";
- asked to "greet <name>" with ``e2e-greeter.greet`` offered: calls it;
- asked to "echo <word>" with the echo tool offered: calls it with ``{"text": <word>}``;
- offered the indexer's ``search_knowledge`` (the RAG agents are linked): the RAG tests' model
  (``tests.factories.rag_model``) calls it with the question (which extracts and indexes the
  session's files first), then answers "From <file> (<position>): <passage>";
- otherwise a direct answer, "Direct answer: <question>".

Asked by the agent builder (``POST /generate-agent``), it writes the builder tests' unit
converter (``tests/master/builder/samples.py``); a description with "broken" gets code that
fails its checks on both attempts (422), one with "outage" a provider error (502).

The master accepts attachments up to ``ATTACHMENT_LIMIT`` bytes (``RAG_MAX_ATTACHMENT_BYTES``),
small enough for the tests to exceed it cheaply.

The master's agents root (``OPENAGENT_AGENTS_ROOT``) is a fresh temporary folder, so saved
agents never land in the repository; it holds ``agents/broken_agent.py``, which discovery
lists as a per-file error, and ``agents/e2e_greeter.py``, a WebSocket agent that nothing runs
until the page starts it in the master (``POST /internal/yaml-agents/start``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from openagent.testing import ErrorReply, Reply, ScriptedOpenAIServer, TextReply, ToolCall, ToolCallReply  # noqa: E402
from tests.factories import rag_model  # noqa: E402
from tests.master.builder.samples import BAD, UNIT_CONVERTER, fenced  # noqa: E402

API_KEY = "e2e-secret-key"
AGENT = "demo-invocation-agent"
ECHO = f"{AGENT}__echo"
GREET = "e2e-greeter__greet"
RAG_AGENTS = ("document-extractor-agent", "document-indexer-agent")
ATTACHMENT_LIMIT = 64 * 1024


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


GREETER_AGENT = '''"""A WebSocket agent the e2e suite starts inside the master ("Start in master")."""

from __future__ import annotations

from typing import Any

from openagent import ClientConfig, OrchestratorActionAgent, ToolSchema, run_action_agent

AGENT_ID = "e2e-greeter"

TOOLS = [
    ToolSchema(
        name="greet",
        description="Greet someone by name.",
        parameters={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    ),
]


async def handle_tool(tool_name: str, arguments: dict[str, Any]) -> Any:
    return {"greeting": f"Hello, {arguments['name']}!"}


def build_agent(config: ClientConfig | None = None) -> OrchestratorActionAgent:
    return OrchestratorActionAgent(AGENT_ID, TOOLS, handle_tool, config=config)


if __name__ == "__main__":
    run_action_agent(build_agent())
'''

BROKEN_AGENT = 'from openagent import OrchestratorActionAgent\nagent = OrchestratorActionAgent("broken",\n'


def generator_reply(messages: list[dict[str, Any]]) -> Reply:
    brief = json.loads(_text(messages[1].get("content"))) if len(messages) > 1 else {}
    description = str(brief.get("description", "")).lower()
    if "outage" in description:
        return ErrorReply(500, "scripted provider outage", retry=False)
    if "broken" in description:
        return TextReply(fenced(BAD))
    return TextReply(fenced(UNIT_CONVERTER))


def handler(body: dict[str, Any]) -> Reply:
    messages = body.get("messages") or []
    if messages and _text(messages[0].get("content")).startswith("You write agent modules"):
        return generator_reply(messages)
    tools = {t.get("function", {}).get("name") for t in body.get("tools") or []}
    if "submit_plan" in tools:
        plan = {
            "summary": "Echo the word",
            "steps": [
                {"agent_id": AGENT, "tool_name": "echo", "intent": "echo it", "arguments": {"text": "planned"}}
            ],
        }
        return ToolCallReply((ToolCall("submit_plan", plan),))
    called = {
        str(call.get("function", {}).get("name"))
        for m in messages
        if m.get("role") == "assistant"
        for call in m.get("tool_calls") or []
    }
    if any(str(name).endswith("__search_knowledge") for name in tools | called):
        answer: Any = rag_model(body)
        return TextReply(answer) if isinstance(answer, str) else answer
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return TextReply(f"The agent answered: {_text(last.get('content'))}")
    question = next((_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    match = re.search(r"greet (\w+)", question, re.IGNORECASE)
    if match and GREET in tools:
        return ToolCallReply((ToolCall(GREET, {"name": match.group(1)}),))
    match = re.search(r"echo (\w+)", question, re.IGNORECASE)
    if match and ECHO in tools:
        return ToolCallReply((ToolCall(ECHO, {"text": match.group(1)}),))
    return TextReply(f"Direct answer: {question}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{process.args!r} exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{url} did not answer within {timeout} s:\n{log.read_text()[-3000:]}")


def wait_registered(
    master: str, process: subprocess.Popen[bytes], log: Path, agents: tuple[str, ...], timeout: float = 90.0
) -> None:
    deadline = time.monotonic() + timeout
    request = urllib.request.Request(f"{master}/agents", headers={"Authorization": f"Bearer {API_KEY}"})
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{process.args!r} exited:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(request, timeout=1) as response:
                listed = {row["agent_id"] for row in json.loads(response.read())["agents"]}
                if set(agents) <= listed:
                    return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.1)
    raise SystemExit(f"{agents} did not register within {timeout} s:\n{log.read_text()[-3000:]}")


def main() -> int:
    dist = ROOT / "openagent-ui" / "dist"
    if not (dist / "index.html").is_file():
        raise SystemExit("openagent-ui/dist is missing: run 'npm run build' in openagent-ui first")
    redis_url = os.environ.get("OPENAGENT_TEST_REDIS_URL", "redis://127.0.0.1:6379/3")
    redis.Redis.from_url(redis_url).flushdb()
    logs = Path(os.environ.get("OPENAGENT_E2E_LOGS", ROOT / "openagent-ui" / "test-results" / "stack"))
    logs.mkdir(parents=True, exist_ok=True)

    agents_root = Path(tempfile.mkdtemp(prefix="openagent-e2e-root-"))
    for folder in ("agents", "system_agents", "sample_agents"):
        (agents_root / folder).mkdir()
    (agents_root / "agents" / "broken_agent.py").write_text(BROKEN_AGENT)
    (agents_root / "agents" / "e2e_greeter.py").write_text(GREETER_AGENT)

    llm = ScriptedOpenAIServer().start()
    llm.set_handler(handler)
    port, agent_port = free_port(), free_port()
    master = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "REDIS_URL": redis_url,
        "OPENAI_BASE_URL": llm.base_url,
        "OPENAI_API_KEY": "test",
        "OPENAGENT_LLM_LOOPBACK_ONLY": "1",
        "OPENAGENT_LLM_MAX_RETRIES": "0",
        "OPENAGENT_API_KEY": API_KEY,
        "OPENAGENT_UI_DIR": str(dist),
        "OPENAGENT_AGENTS_ROOT": str(agents_root),
        "OPENAGENT_HEALTH_CHECK_INTERVAL": "2",
        "RAG_MAX_ATTACHMENT_BYTES": str(ATTACHMENT_LIMIT),
        "RAG_TOOL_CALL_TIMEOUT": "60",
        "MASTER_BASE_URL": master,
        "MASTER_WS": f"ws://127.0.0.1:{port}/ws",
        "INVOCATION_PORT": str(agent_port),
    }
    children: list[subprocess.Popen[bytes]] = []

    def stop(*_: object) -> None:
        for child in reversed(children):
            if child.poll() is None:
                child.terminate()
        for child in children:
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
        llm.stop()
        shutil.rmtree(agents_root, ignore_errors=True)

    def terminated(*_: object) -> None:
        stop()
        os._exit(0)

    signal.signal(signal.SIGTERM, terminated)
    try:
        master_log = logs / "master.log"
        children.append(
            subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "master.app:app", "--host", "127.0.0.1", "--port", str(port)],
                cwd=tempfile.mkdtemp(prefix="openagent-e2e-"),
                env=env,
                stdout=master_log.open("wb"),
                stderr=subprocess.STDOUT,
            )
        )
        wait_http(f"{master}/health", children[-1], master_log)
        agent_log = logs / "demo-invocation-agent.log"
        children.append(
            subprocess.Popen(
                [sys.executable, str(ROOT / "sample_agents" / "demo_invocation_agent.py")],
                cwd=tempfile.mkdtemp(prefix="openagent-e2e-agent-"),
                env=env,
                stdout=agent_log.open("wb"),
                stderr=subprocess.STDOUT,
            )
        )
        wait_registered(master, children[-1], agent_log, (AGENT,))
        rag_log = logs / "rag-stack.log"
        children.append(
            subprocess.Popen(
                [sys.executable, "-m", "system_agents.rag_stack_ws"],
                cwd=ROOT,
                env={**env, "OPENAGENT_EMBEDDING_BACKEND": "hashing", "OPENAGENT_RAG_VISION": "0"},
                stdout=rag_log.open("wb"),
                stderr=subprocess.STDOUT,
            )
        )
        wait_registered(master, children[-1], rag_log, RAG_AGENTS)
        print(json.dumps({"ui": f"{master}/ui/", "master": master, "api_key": API_KEY}), flush=True)  # noqa: T201
        # Run until the parent closes our stdin (or kills us), or a child dies.
        closed = threading.Event()

        def read_until_closed() -> None:
            sys.stdin.read()
            closed.set()

        threading.Thread(target=read_until_closed, daemon=True).start()
        while not closed.wait(0.5):
            if any(child.poll() is not None for child in children):
                print("a stack process exited; see the logs in test-results/stack", file=sys.stderr)  # noqa: T201
                break
    finally:
        stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
