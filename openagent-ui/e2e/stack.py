"""What the Playwright suite runs against: a scripted LLM, Redis, a real master serving the
built UI, the real sample agent ``demo-invocation-agent`` and the real RAG stack
(``python -m system_agents.rag_stack_ws``: extractor and indexer, with the ``hashing``
embedding backend, so no model is downloaded and no embeddings API is called).

    python openagent-ui/e2e/stack.py          (from the repository root, with the project's venv)

Prints one JSON line (``{"ui": ..., "master": ..., "api_key": ..., "sandbox_master": ...}``) once everything answers,
then runs until stdin closes or it gets SIGTERM, and stops what it started. Uses
``OPENAGENT_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/3``), emptied at start.

The scripted LLM answers by rule, like a model that follows the prompts:
- offered ``submit_plan``: a one-step plan calling ``demo-invocation-agent.echo``; auto mode with
  roles (the roles planner's ``submit_plan``, ``submit_review``, the executor's sub-tasks): see
  :func:`roles_reply`;
- after a tool result: "The agent answered: <result>";
- asked to "greet <name>" with ``e2e-greeter.greet`` offered: calls it;
- asked to "echo <word>" with the echo tool offered: calls it with ``{"text": <word>}``;
- asked to "transfer <amount> to <name>" with ``e2e-bank.transfer`` offered: calls it (the tool
  requires a person's approval, so the query pauses: the approvals tests decide it);
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
until the page starts it in the master (``POST /internal/yaml-agents/start``). ``e2e-bank``, a
WebSocket agent whose ``transfer`` requires approval, runs from the start.

A second master (``sandbox_master``, serving the UI too) has the Kubernetes sandbox on
(``OPENAGENT_K8S_SANDBOX=1``), with the real ``kubernetes`` client talking to the tests' fake
API server (kmock, ``tests/master/sandbox/fake_kubernetes.py``) through a kubeconfig. A small
kubelet here plays the cluster: it runs each agent Pod's ConfigMap code as a local process with
the Pod's environment (so the agent registers with the sandbox master), marks the Pod Running
and ready, serves its output as the container log, and when the process exits marks the Pod
``CrashLoopBackOff`` (the run's output as the previous log) and restarts it after a growing backoff.
Its agents root has ``agents/e2e_greeter.py`` and ``agents/e2e_crasher.py``, an agent that
exits at start. It has a Redis database of its own (the next one after the main master's).
``OPENAGENT_E2E_SANDBOX=0`` leaves it out.
"""

from __future__ import annotations

import asyncio
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
from tests.master.sandbox.fake_kubernetes import (  # noqa: E402
    FakeKubernetes,
    crash_loop_status,
    fake_kubernetes,
    running_status,
    write_kubeconfig,
)

API_KEY = "e2e-secret-key"
AGENT = "demo-invocation-agent"
ECHO = f"{AGENT}__echo"
GREET = "e2e-greeter__greet"
BANK = "e2e-bank"
TRANSFER = f"{BANK}__transfer"
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

BANK_AGENT = '''"""A WebSocket agent the approvals e2e test uses: its transfer waits for a person."""

from __future__ import annotations

from typing import Any

from openagent import ClientConfig, OrchestratorActionAgent, ToolSchema, run_action_agent

TOOLS = [
    ToolSchema(
        name="transfer",
        description="Transfer money to someone.",
        parameters={
            "type": "object",
            "properties": {
                "to": {"type": "string", "description": "Who gets the money"},
                "amount": {"type": "number", "minimum": 0},
                "currency": {"type": "string", "enum": ["EUR", "USD"]},
            },
            "required": ["to", "amount"],
        },
        requires_approval=True,
    ),
]


async def handle_tool(tool_name: str, arguments: dict[str, Any]) -> Any:
    return {"sent": arguments["amount"], "to": arguments["to"]}


if __name__ == "__main__":
    run_action_agent(OrchestratorActionAgent("e2e-bank", TOOLS, handle_tool, config=ClientConfig.from_env()))
'''

CRASHER_AGENT = GREETER_AGENT.replace('AGENT_ID = "e2e-greeter"', 'AGENT_ID = "e2e-crasher"').replace(
    "    run_action_agent(build_agent())",
    '    print("e2e-crasher: reading its settings", flush=True)\n'
    '    raise SystemExit("e2e-crasher: WEATHER_API_KEY is not set")',
)
"""Discovered as a WebSocket agent like the greeter, but its process exits at start."""

SANDBOX_NS = "agents"
CRASH_BACKOFF_SECONDS = 2.0

BROKEN_AGENT = 'from openagent import OrchestratorActionAgent\nagent = OrchestratorActionAgent("broken",\n'


def generator_reply(messages: list[dict[str, Any]]) -> Reply:
    brief = json.loads(_text(messages[1].get("content"))) if len(messages) > 1 else {}
    description = str(brief.get("description", "")).lower()
    if "outage" in description:
        return ErrorReply(500, "scripted provider outage", retry=False)
    if "broken" in description:
        return TextReply(fenced(BAD))
    return TextReply(fenced(UNIT_CONVERTER))


ROLES_PLAN = {
    "subtasks": [
        {"task": "echo hello", "criteria": ["the agent echoed hello"]},
        {"task": "echo world", "criteria": ["the agent echoed world, checked twice"]},
    ]
}
"""The roles planner's plan: the second sub-task's reviewer sends the first attempt back."""


def roles_reply(body: dict[str, Any], tools: set[Any], messages: list[dict[str, Any]]) -> Reply | None:
    """Auto mode with roles: the planner plans :data:`ROLES_PLAN`; the executor echoes its
    sub-task's word (``<word>-again`` on a retry); the reviewer passes, except a first attempt at
    a sub-task whose criteria say "checked twice" (``needs_retry``)."""
    offered = {t.get("function", {}).get("name"): t["function"] for t in body.get("tools") or []}
    plan_tool = offered.get("submit_plan")
    if plan_tool is not None and "subtasks" in plan_tool.get("parameters", {}).get("properties", {}):
        return ToolCallReply((ToolCall("submit_plan", ROLES_PLAN),))
    asked = next((_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    if "submit_review" in tools:
        if "checked twice" in asked and "-again" not in asked:
            return ToolCallReply(
                (
                    ToolCall(
                        "submit_review", {"verdict": "needs_retry", "reason": "echo it once more to be sure"}
                    ),
                )
            )
        return ToolCallReply(
            (ToolCall("submit_review", {"verdict": "pass", "reason": "the agent echoed it"}),)
        )
    match = re.search(r"Your sub-task \(\d+ of \d+\): echo (\w+)", asked)
    if match and ECHO in tools and (messages[-1] if messages else {}).get("role") != "tool":
        word = match.group(1) + ("-again" if "sent your previous attempt back" in asked else "")
        return ToolCallReply((ToolCall(ECHO, {"text": word}),))
    return None


def handler(body: dict[str, Any]) -> Reply:
    messages = body.get("messages") or []
    if messages and _text(messages[0].get("content")).startswith("You write agent modules"):
        return generator_reply(messages)
    tools = {t.get("function", {}).get("name") for t in body.get("tools") or []}
    roles = roles_reply(body, tools, messages)
    if roles is not None:
        return roles
    if "submit_plan" in tools:
        plan = {
            "summary": "Echo the word",
            "steps": [
                {
                    "agent_id": AGENT,
                    "tool_name": "echo",
                    "intent": "echo it",
                    "arguments": {"text": "planned"},
                }
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
    match = re.search(r"transfer (\d+) to (\w+)", question, re.IGNORECASE)
    if match and TRANSFER in tools:
        return ToolCallReply((ToolCall(TRANSFER, {"to": match.group(2), "amount": int(match.group(1))}),))
    match = re.search(r"echo (\w+)", question, re.IGNORECASE)
    if match and ECHO in tools:
        return ToolCallReply((ToolCall(ECHO, {"text": match.group(1)}),))
    return TextReply(f"Direct answer: {question}")


class StackKubelet:
    """Plays the kubelet for the sandbox master's agent Pods in the fake API server.

    Runs each Pod's code (from its ConfigMap) as a local process with the Pod's environment,
    serves the process's output as the container log, and on exit marks the Pod
    CrashLoopBackOff and restarts the process after a backoff (:data:`CRASH_BACKOFF_SECONDS` per
    restart so far, at most 10 s), as ``restartPolicy: Always`` does. Processes
    of deleted Pods are killed. Runs on the fake's event loop (one thread: no locking).
    """

    def __init__(self, fake: FakeKubernetes, workdir: Path, api_key: str) -> None:
        self._fake = fake
        self._workdir = workdir
        self._api_key = api_key
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._restarts: dict[str, int] = {}
        self._restart_at: dict[str, float] = {}

    def _log(self, name: str) -> Path:
        return self._workdir / f"{name}.log"

    def _start(self, pod: dict[str, Any], code: str) -> None:
        name = pod["metadata"]["name"]
        container = pod["spec"]["containers"][0]
        script = self._workdir / f"{name}.py"
        script.write_text(code)
        env = {var["name"]: var["value"] for var in container.get("env") or [] if "value" in var}
        self._processes[name] = subprocess.Popen(
            [sys.executable, str(script)],
            env={
                **os.environ,
                **env,
                "HOME": str(self._workdir),
                "OPENAGENT_API_KEY": self._api_key,
                "PYTHONPATH": str(ROOT),
            },
            stdout=self._log(name).open("wb"),
            stderr=subprocess.STDOUT,
        )
        self._fake.set_pod_status(SANDBOX_NS, name, running_status(restarts=self._restarts.get(name, 0)))

    def _tick(self) -> None:
        live = {pod["metadata"]["name"]: pod for pod in self._fake.live("pods", SANDBOX_NS)}
        codes = {
            c["metadata"]["name"]: c["data"]["agent.py"] for c in self._fake.live("configmaps", SANDBOX_NS)
        }
        for name in [n for n in self._processes if n not in live]:  # deleted: stop its process
            process = self._processes.pop(name)
            if process.poll() is None:
                process.kill()
                process.wait(10)
            self._restart_at.pop(name, None)
        now = time.monotonic()
        for name, pod in live.items():
            process = self._processes.get(name)
            if process is None:
                if name in codes and now >= self._restart_at.get(name, 0.0):
                    self._start(pod, codes[name])
                continue
            output = self._log(name).read_text(errors="replace") if self._log(name).exists() else ""
            if process.poll() is None:
                self._fake.logs[SANDBOX_NS, name, False] = output
                continue
            # The container exited: a crash loop, with this run's output as the previous log.
            del self._processes[name]
            restarts = self._restarts[name] = self._restarts.get(name, 0) + 1
            self._fake.logs[SANDBOX_NS, name, True] = output
            self._fake.logs[SANDBOX_NS, name, False] = ""
            self._fake.set_pod_status(SANDBOX_NS, name, crash_loop_status(restarts))
            self._restart_at[name] = now + min(CRASH_BACKOFF_SECONDS * restarts, 10.0)

    async def run(self) -> None:
        while True:
            self._tick()
            await asyncio.sleep(0.1)

    def stop(self) -> None:
        for process in self._processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(10)


class FakeCluster:
    """The fake API server and its kubelet on an event loop in a thread of their own."""

    def __init__(self, workdir: Path, api_key: str) -> None:
        self._workdir = workdir
        self._api_key = api_key
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._done: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.url = ""
        self._thread = threading.Thread(
            target=self._loop.run_until_complete, args=(self._main(),), daemon=True
        )

    async def _main(self) -> None:
        self._done = asyncio.Event()
        try:
            async with fake_kubernetes() as (fake, url):
                kubelet = StackKubelet(fake, self._workdir, self._api_key)
                task = asyncio.create_task(kubelet.run())
                self.url = url
                self._ready.set()
                try:
                    await self._done.wait()
                finally:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
                    kubelet.stop()
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            raise

    def start(self) -> FakeCluster:
        self._thread.start()
        if not self._ready.wait(30) or self._error is not None:
            raise SystemExit(f"the fake Kubernetes API server did not start: {self._error!r}")
        return self

    def stop(self) -> None:
        if self._done is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._done.set)
            self._thread.join(15)


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


def neighbour_db(redis_url: str) -> str:
    """The same Redis server, the database before ``redis_url``'s (15 → 14, 0 → 15)."""
    base, _, db = redis_url.rstrip("/").rpartition("/")
    if not db.isdigit() or not base.startswith(("redis://", "rediss://")) or base.endswith("/"):
        return f"{redis_url.rstrip('/')}/14"
    return f"{base}/{(int(db) - 1) % 16}"


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

    sandbox = os.environ.get("OPENAGENT_E2E_SANDBOX", "1") != "0"
    sandbox_root = Path(tempfile.mkdtemp(prefix="openagent-e2e-sandbox-root-"))
    for folder in ("agents", "system_agents", "sample_agents"):
        (sandbox_root / folder).mkdir()
    (sandbox_root / "agents" / "e2e_greeter.py").write_text(GREETER_AGENT)
    (sandbox_root / "agents" / "e2e_crasher.py").write_text(CRASHER_AGENT)
    kubelet_dir = Path(tempfile.mkdtemp(prefix="openagent-e2e-kubelet-"))
    bank_dir = Path(tempfile.mkdtemp(prefix="openagent-e2e-bank-"))
    cluster: FakeCluster | None = None

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
        if cluster is not None:
            cluster.stop()
        llm.stop()
        for folder in (agents_root, sandbox_root, kubelet_dir, bank_dir):
            shutil.rmtree(folder, ignore_errors=True)

    def terminated(*_: object) -> None:
        stop()
        os._exit(0)

    signal.signal(signal.SIGTERM, terminated)
    try:
        master_log = logs / "master.log"
        children.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "master.app:app",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                ],
                cwd=tempfile.mkdtemp(prefix="openagent-e2e-"),
                env=env,
                stdout=master_log.open("wb"),
                stderr=subprocess.STDOUT,
            )
        )
        sandbox_master: str | None = None
        if sandbox:
            cluster = FakeCluster(kubelet_dir, API_KEY).start()
            sandbox_port = free_port()
            sandbox_master = f"http://127.0.0.1:{sandbox_port}"
            sandbox_redis = neighbour_db(redis_url)
            redis.Redis.from_url(sandbox_redis).flushdb()
            sandbox_log = logs / "sandbox-master.log"
            children.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "uvicorn",
                        "master.app:app",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(sandbox_port),
                    ],
                    cwd=tempfile.mkdtemp(prefix="openagent-e2e-sandbox-"),
                    env={
                        **env,
                        "REDIS_URL": sandbox_redis,
                        "OPENAGENT_AGENTS_ROOT": str(sandbox_root),
                        "MASTER_BASE_URL": sandbox_master,
                        "MASTER_WS": f"ws://127.0.0.1:{sandbox_port}/ws",
                        "OPENAGENT_K8S_SANDBOX": "1",
                        "KUBECONFIG": str(
                            write_kubeconfig(kubelet_dir / "kubeconfig", cluster.url, SANDBOX_NS)
                        ),
                        "OPENAGENT_K8S_NAMESPACE": SANDBOX_NS,
                        "OPENAGENT_K8S_MASTER_WS": f"ws://127.0.0.1:{sandbox_port}/ws",
                        "OPENAGENT_K8S_API_TIMEOUT": "10",
                    },
                    stdout=sandbox_log.open("wb"),
                    stderr=subprocess.STDOUT,
                )
            )
            wait_http(f"{sandbox_master}/health", children[-1], sandbox_log, timeout=90)
        wait_http(f"{master}/health", children[0], master_log)
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
        bank_log = logs / "e2e-bank.log"
        (bank_dir / "e2e_bank.py").write_text(BANK_AGENT)
        children.append(
            subprocess.Popen(
                [sys.executable, str(bank_dir / "e2e_bank.py")],
                cwd=bank_dir,
                env=env,
                stdout=bank_log.open("wb"),
                stderr=subprocess.STDOUT,
            )
        )
        wait_registered(master, children[-1], bank_log, (BANK,))
        stack = {
            "ui": f"{master}/ui/",
            "master": master,
            "api_key": API_KEY,
            "sandbox_master": sandbox_master,
        }
        print(json.dumps(stack), flush=True)  # noqa: T201
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
