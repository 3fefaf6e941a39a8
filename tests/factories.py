"""Shared builders for the tests: a real master process, raw WebSocket peers, env helpers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import uvicorn
from websockets.asyncio.client import ClientConnection, connect

from master.agents.dispatch import Dispatcher
from master.agents.invocation import InvocationAgents
from master.agents.registry import LiveAgent, compile_tools
from master.app import create_app
from master.auth import SYSTEM, Scope
from master.deps import Services
from master.llm.model import ChatModel
from master.settings import Settings
from master.storage.redis_client import create_redis
from protocol import ToolCall, ToolResult, ToolSchema

ROOT = Path(__file__).resolve().parent.parent


def worker_redis_url(url: str) -> str:
    """``url`` for this pytest-xdist worker: worker N (N > 0) uses the database 2N below the
    configured one, so that parallel workers never share data (gw0 keeps the configured one)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    number = int(worker.removeprefix("gw") or 0)
    if number == 0:
        return url
    base, _, db = url.rpartition("/")
    if not db.isdigit() or int(db) - 2 * number < 0:
        raise RuntimeError(
            f"{url} leaves no database for pytest-xdist worker {worker}: name a database of at least "
            f"{2 * number} in OPENAGENT_TEST_REDIS_URL and OPENAGENT_TEST_REDIS_URL_2, or run fewer workers"
        )
    return f"{base}/{int(db) - 2 * number}"


TEST_REDIS_URL = worker_redis_url(os.environ.get("OPENAGENT_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))
SECOND_REDIS_URL = worker_redis_url(os.environ.get("OPENAGENT_TEST_REDIS_URL_2", "redis://127.0.0.1:6379/12"))
"""A second master's database (workspace export/restore between masters); emptied by the tests that use it."""

EVERY_TENANT = Scope.of(SYSTEM)
"""What the master's own paths see (a test's reads of the stores that are not about tenants)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ChildProcess:
    """A test subprocess with its log file: stopped politely, then killed; its log's tail for errors."""

    process: subprocess.Popen[bytes] | None
    log_path: Path
    stop_timeout = 10.0
    """Seconds to wait after SIGTERM before SIGKILL."""

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def wait_until(self, ready: Callable[[], bool], what: str, waiting_for: str, timeout: float) -> None:
        """Poll ``ready`` (a readiness probe of the started process; HTTP errors count as not
        ready) until it holds; stop the process and raise, with its log, if it exits or
        ``timeout`` seconds pass."""
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{what} exited with {self.process.returncode}:\n{self.log()}")
            try:
                if ready():
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{what} did not {waiting_for} within {timeout} s:\n{self.log()}")

    def wait_healthy(self, url: str, what: str, timeout: float) -> None:
        """Wait for ``url`` to answer 200 (see :meth:`wait_until`)."""
        self.wait_until(
            lambda: httpx.get(url, timeout=5.0).status_code == 200, what, f"answer {url}", timeout
        )


class MasterProcess(ChildProcess):
    """``python -m master`` (uvicorn with the settings' limits) in a subprocess on a free loopback port."""

    def __init__(self, env: Mapping[str, str] | None = None, *, port: int | None = None) -> None:
        self.port = port or free_port()
        self.env = {
            **os.environ,
            "REDIS_URL": TEST_REDIS_URL,
            "MASTER_BASE_URL": f"http://127.0.0.1:{self.port}",
            "PYTHONPATH": str(ROOT),
            **(env or {}),
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = ROOT / ".pytest_cache" / f"master-{self.port}.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def start(self, timeout: float = 90.0) -> MasterProcess:
        self.log_path.parent.mkdir(exist_ok=True)
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "master", "--host", "127.0.0.1", "--port", str(self.port)],
            # An empty working directory: a developer's .env must not leak into tests.
            cwd=tempfile.mkdtemp(prefix="openagent-master-"),
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.wait_healthy(f"{self.base_url}/health", "master", timeout)
        return self

    def __enter__(self) -> MasterProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> MasterProcess:
        """Start without blocking the event loop (agents served by this loop answer health checks)."""
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)


class RawPeer:
    """A WebSocket peer that knows only the wire contract (JSON frames)."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    @classmethod
    async def connect(cls, url: str, **kwargs: Any) -> RawPeer:
        async with asyncio.timeout(30):
            return cls(await connect(url, **kwargs))

    async def send(self, frame: dict[str, Any] | str) -> None:
        await self.ws.send(frame if isinstance(frame, str) else json.dumps(frame))

    async def recv(self, timeout: float = 30.0) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            data: dict[str, Any] = json.loads(await self.ws.recv())
            return data

    async def register(
        self,
        agent_id: str,
        role: str = "action",
        tools: list[dict[str, Any]] | None = None,
        instance: str | None = None,
    ) -> None:
        frame = {"type": "register", "agent_id": agent_id, "role": role, "tools": tools or []}
        await self.send(frame if instance is None else {**frame, "instance": instance})
        reply = await self.recv()
        assert reply == {"type": "registered", "agent_id": agent_id}, reply

    async def close(self) -> None:
        await self.ws.close()


async def agent_rows(base_url: str, headers: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """``GET /agents`` rows."""
    async with httpx.AsyncClient(base_url=base_url, timeout=30, headers=headers) as http:
        response = await http.get("/agents")
        response.raise_for_status()
        rows: list[dict[str, Any]] = response.json()["agents"]
        return rows


WEATHER_TOOL: dict[str, Any] = {
    "name": "get_weather",
    "description": "Current weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


@contextlib.asynccontextmanager
async def serve_app(app: Any, port: int = 0) -> AsyncIterator[str]:
    """Serve an ASGI app with uvicorn on loopback in this event loop; yields its base URL."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(60):
            while not server.started:
                await asyncio.sleep(0.01)
        bound = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{bound}"
    finally:
        server.should_exit = True
        async with asyncio.timeout(60):
            await task


def agents_root(path: Path) -> Path:
    """An empty repository layout for the agent builder: ``agents/``, ``system_agents/``, ``sample_agents/``."""
    for folder in ("agents", "system_agents", "sample_agents"):
        (path / folder).mkdir(parents=True, exist_ok=True)
    return path


# --------------------------------------------------------------------------- RAG test files


def make_pdf(pages: list[str]) -> bytes:
    """A PDF with one page per string (fpdf2, core Helvetica font)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 5, text, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def make_encrypted_pdf(text: str, password: str = "secret") -> bytes:
    """A PDF that needs a user password to open (RC4, no extra crypto library needed)."""
    from io import BytesIO

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(BytesIO(make_pdf([text]))))
    writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="RC4-128")
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def make_docx(sections: list[tuple[str, str]]) -> bytes:
    """A Word document with a level-1 heading and a paragraph per (heading, text)."""
    from io import BytesIO

    import docx

    document = docx.Document()
    for heading, text in sections:
        document.add_heading(heading, level=1)
        document.add_paragraph(text)
    out = BytesIO()
    document.save(out)
    return out.getvalue()


def make_zip_bomb_docx(unpacked_bytes: int = 80 * 1024 * 1024) -> bytes:
    """A zip holding ``word/document.xml`` that inflates to ``unpacked_bytes`` of zeros (~80 KB packed)."""
    import zipfile
    from io import BytesIO

    out = BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w", force_zip64=True) as member:
            block = b"\0" * (1024 * 1024)
            for _ in range(unpacked_bytes // len(block)):
                member.write(block)
    return out.getvalue()


class RagStackProcess(ChildProcess):
    """``python -m system_agents.rag_stack_ws`` (or one agent's module) connected to a master."""

    def __init__(
        self, master: MasterProcess, env: Mapping[str, str], module: str = "system_agents.rag_stack_ws"
    ) -> None:
        self.master = master
        self.module = module
        self.env = {
            **os.environ,
            "MASTER_WS": master.ws_url,
            "REDIS_URL": TEST_REDIS_URL,
            "PYTHONPATH": str(ROOT),
            "WS_KEEPALIVE_INTERVAL": "0",
            **env,
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = ROOT / ".pytest_cache" / f"rag-stack-{master.port}-{module.rsplit('.', 1)[-1]}.log"

    def start(self, agent_ids: tuple[str, ...], timeout: float = 60.0) -> RagStackProcess:
        """Start the process and wait until the master lists ``agent_ids`` (blocking)."""
        self.log_path.parent.mkdir(exist_ok=True)
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", self.module],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

        def registered() -> bool:
            rows = httpx.get(f"{self.master.base_url}/agents", timeout=5).json()["agents"]
            return set(agent_ids) <= {row["agent_id"] for row in rows}

        self.wait_until(registered, self.module, f"register {agent_ids}", timeout)
        return self


def rag_model(body: dict[str, Any]) -> str | Any:
    """A scripted "model" for RAG queries (``ScriptedOpenAIServer.set_handler``).

    Asked a question, it calls ``search_knowledge`` with it (top 10, so every chunk of a small
    test corpus comes back, whatever the embeddings). Given the results, it answers with the
    passage sharing most words with the question, naming its file and position, and names the
    files a tool could not read.
    """
    from openagent.testing import ToolCall, ToolCallReply

    messages = body["messages"]
    question = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    if messages[-1]["role"] != "tool":
        search = [
            t["function"]["name"]
            for t in body.get("tools") or []
            if t["function"]["name"].endswith("__search_knowledge")
        ]
        if not search:
            return "I have no tool to read files."
        return ToolCallReply((ToolCall(search[0], {"query": question, "top_k": 10}),))
    words = {w.strip("?.,!").lower() for w in question.split() if len(w) > 3}
    best: tuple[int, dict[str, Any]] | None = None
    unreadable: list[str] = []
    for message in messages:
        if message["role"] != "tool":
            continue
        content = json.loads(message["content"])
        result = content.get("result") or {}
        if "error" in content:
            unreadable.append(content["error"])
        for item in result.get("unreadable") or []:
            unreadable.append(item["error"])
        for hit in result.get("results") or []:
            score = sum(1 for w in words if w in hit["text"].lower())
            if score and (best is None or score > best[0]):
                best = (score, hit)
    parts = []
    if best is not None:
        hit = best[1]
        parts.append(f"From {hit['filename']} ({hit['position']}): {' '.join(hit['text'].split())}")
    else:
        parts.append("The files do not say.")
    parts += [f"Could not read {error}" for error in unreadable]
    return " ".join(parts)


class PoolRunnerProcess(ChildProcess):
    """``python -m openagent.pool_runner`` in a subprocess on a free loopback port.

    Agents keep the runner's identity (``POOL_RUNNER_AGENT_UID=-1``): the test machine's Python
    may not be readable by an unprivileged user; the drop itself is tested on its own.
    """

    stop_timeout = 20.0  # its lifespan stops every agent first

    def __init__(
        self,
        workdir: Path,
        env: Mapping[str, str] | None = None,
        *,
        token: str = "runner-token",
        host: str = "127.0.0.1",
        port: int | None = None,
    ):
        self.host = host
        self.port = port or free_port()
        self.token = token
        self.env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "POOL_RUNNER_HOST": host,
            "POOL_RUNNER_PORT": str(self.port),
            "POOL_RUNNER_TOKEN": token,
            "POOL_RUNNER_WORKDIR": str(workdir),
            "POOL_RUNNER_AGENT_UID": "-1",
            "POOL_RUNNER_BACKOFF_INITIAL": "0.1",
            "POOL_RUNNER_BACKOFF_MAX": "0.4",
            **(env or {}),
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = ROOT / ".pytest_cache" / f"pool-runner-{self.port}.log"

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def start(self, timeout: float = 20.0) -> PoolRunnerProcess:
        self.log_path.parent.mkdir(exist_ok=True)
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "openagent.pool_runner"],
                cwd=tempfile.mkdtemp(prefix="openagent-pool-runner-"),
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.wait_healthy(f"{self.base_url}/health", "pool runner", timeout)
        return self

    async def __aenter__(self) -> PoolRunnerProcess:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)


ECHO_AGENT_SOURCE = '''
"""A WebSocket action agent with one tool, ``echo``; its id comes from OPENAGENT_AGENT_ID."""
import os

from openagent import OrchestratorActionAgent, ToolSchema, run_action_agent

ECHO = ToolSchema(
    name="echo",
    description="Echo the text back",
    parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)


async def handle(tool_name, arguments):
    return {"echo": arguments["text"], "pid": os.getpid()}


if __name__ == "__main__":
    run_action_agent(OrchestratorActionAgent(os.environ["OPENAGENT_AGENT_ID"], [ECHO], handle))
'''
"""Agent code sent as source text to the pool runner and the sandbox in tests."""

CRASHING_AGENT_SOURCE = 'import sys\nprint("boom: DATABASE_URL is not set", flush=True)\nsys.exit(3)\n'


class InProcessMaster:
    """The master app served by uvicorn in the test's own event loop (see :func:`in_process_master`)."""

    def __init__(self, app: Any, port: int) -> None:
        self.app = app
        self.port = port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    @property
    def services(self) -> Services:
        services: Services = self.app.state.services
        return services


def master_settings(**overrides: Any) -> Settings:
    """Settings for a test master: the tests' Redis, no ``.env``, the given overrides."""
    values: dict[str, Any] = {
        "redis_url": TEST_REDIS_URL,
        "openai_api_key": "",
        "openai_base_url": None,
        "openagent_api_key": "",
        "openagent_llm_max_retries": 0,
        "openagent_health_check_interval": 0,
        # Generous: a busy machine must not turn a slow answer into a timeout or a DOWN agent.
        "tool_call_timeout": 120,
        "tool_invoke_http_timeout": 30,
        "health_check_timeout": 30,
        **overrides,
    }
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@contextlib.asynccontextmanager
async def in_process_master(
    llm: ChatModel | None = None, *, port: int | None = None, **settings: Any
) -> AsyncIterator[InProcessMaster]:
    """A real master (lifespan, Redis, HTTP and WebSocket on loopback) in this event loop.

    Starts in milliseconds, unlike :class:`MasterProcess`; ``llm`` replaces the provider
    (e.g. a :class:`master.llm.model.FunctionChatModel`), ``settings`` are
    :class:`master.settings.Settings` fields; ``port`` (a free one by default) lets a second
    master take over from a first, like a restart.
    """
    port = port or free_port()
    app = create_app(master_settings(master_base_url=f"http://127.0.0.1:{port}", **settings), llm=llm)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(30):
            while not server.started:
                if task.done():
                    task.result()
                    raise RuntimeError("the in-process master stopped during start-up")
                await asyncio.sleep(0.01)
        yield InProcessMaster(app, port)
    finally:
        server.should_exit = True
        async with asyncio.timeout(30):
            await task


@contextlib.asynccontextmanager
async def dispatcher_for_tests(call_timeout: float = 60.0) -> AsyncIterator[Dispatcher]:
    """A real :class:`Dispatcher` (its HTTP client and invocation registry on the tests' Redis)."""
    redis = create_redis(TEST_REDIS_URL)
    async with aiohttp.ClientSession() as http:
        invocation = InvocationAgents(redis, http, ttl_seconds=600, health_timeout=5)
        try:
            yield Dispatcher(
                http=http,
                invocation=invocation,
                master_base_url="http://127.0.0.1:9",
                call_timeout=call_timeout,
                invoke_timeout=5,
            )
        finally:
            await redis.aclose()


ToolFunction = Callable[[str, dict[str, Any]], Any]


def answering_agent(
    dispatcher: Dispatcher,
    agent_id: str,
    tools: list[dict[str, Any]],
    answer: ToolFunction | None = None,
    *,
    calls: list[ToolCall] | None = None,
) -> LiveAgent:
    """A :class:`LiveAgent` whose connection is a function: each ``tool_call`` frame sent to it
    is answered through ``dispatcher.resolve`` with ``answer(tool_name, arguments)`` (or left
    unanswered when ``answer`` is None). ``calls`` collects the frames."""
    agent: LiveAgent

    async def send(frame: str) -> None:
        call = ToolCall.model_validate_json(frame)
        if calls is not None:
            calls.append(call)
        if answer is not None:
            result = ToolResult(
                call_id=call.call_id, success=True, result=answer(call.tool_name, call.arguments)
            )
            asyncio.get_running_loop().call_soon(dispatcher.resolve, agent, result)

    async def close(code: int, reason: str) -> None:
        return None

    schemas = [ToolSchema.model_validate(tool) for tool in tools]
    agent = LiveAgent(agent_id, "action", {}, compile_tools(agent_id, schemas), send, close)
    return agent


def only_agents(workspace: Any, agent_ids: Iterable[str]) -> Any:
    """``workspace`` (an :class:`openagent.workspace.Workspace`) with only the agents of
    ``agent_ids``, their links and their layout: an export of the tests' shared Redis may hold
    other tests' agents."""
    from openagent.workspace import ORCHESTRATOR_NODE, QUERY_CLIENT_ID

    keep = set(agent_ids)
    nodes = keep | {ORCHESTRATOR_NODE, QUERY_CLIENT_ID}
    layout = workspace.layout.model_copy(
        update={"nodes": {k: v for k, v in workspace.layout.nodes.items() if k in nodes}}
    )
    return workspace.model_copy(
        update={
            "agents": [agent for agent in workspace.agents if agent.agent_id in keep],
            "links": [link for link in workspace.links if link.source in nodes and link.target in nodes],
            "layout": layout,
        }
    )
