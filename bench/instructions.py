"""CPU instructions per one-tool query: the master against baseline (a), counted, not timed.

A shared machine makes wall-clock throughput and even CPU time move from run to run; the number
of instructions a process executes for a fixed amount of work barely moves. ``perf stat -e
instructions`` needs the CPU's performance counters, which the virtual machines this project
runs on do not expose (``<not supported>``), so this counts with **valgrind's callgrind**
(``Ir``, instructions executed in user space): the kernel's side of socket writes and the other
processes (Redis) are not in the count, which CPU time per query (the served cases) shows.

Each system runs in its own process under ``valgrind --tool=callgrind --instr-atstart=no``,
driven in process through ASGI (no HTTP client, no uvicorn): an agent connected to ``/ws``
through an in-process ASGI WebSocket answers every ``tool_call`` at once, and ``POST /query``
goes straight into the app, ``--concurrency`` at a time. After ``--warmup`` queries the child
turns callgrind's instrumentation on (``callgrind_control -i on``), runs ``--queries``, turns it
off; the parent reads the total and divides. The agent's own work (``json`` of one frame each
way) is counted on both sides alike.

- ``master``: the real app (lifespan, Redis at ``--redis-url``, the lean paths) with the instant
  model (:func:`bench.instant_llm.decide`): two LLM rounds, the tool call over ``/ws``, the
  session stored in Redis.
- ``relay``: baseline (a), :func:`bench.relays.ws_relay` (one frame each way, no Redis).
- ``master-no-hiredis``: the master with redis-py's pure-Python parser (redis-py told that
  ``hiredis`` is missing; the group commit still packs its batches with it).
- ``master-no-lean``: the master with :class:`master.asgi.LeanRoutes`'s table emptied, so that
  ``POST /query`` goes through the full FastAPI stack: what the lean path saves.
- ``scripted``: the master's real OpenAI client (:mod:`master.llm.chat_endpoint`) against
  :class:`openagent.testing.ScriptedOpenAIServer` in another process (not counted), a new
  session per query.
- ``scripted-session``: the same, every query in one session pre-filled with ``--session-turns``
  (1,000) earlier turns (:func:`bench.session_growth.synthetic_turns`), all of them sent to the
  LLM in both rounds (no compaction): the long session's steady state, to compare with
  ``scripted``.
- ``master-http``: the master with an HTTP invocation agent instead: the app is served by uvicorn
  on a free loopback port of the same process (on uvloop, as uvicorn serves the master), the
  aiohttp agent of :mod:`bench.agents` (``http-aiohttp``, always this checkout's) runs in another
  process (not counted) and registers there, ``POST /query`` still goes in through ASGI (with
  ``allowed_agent_ids``), and every call makes the real round trip: the call's record in Redis,
  the master's POST to the agent over loopback, the agent's ``202`` and its ``POST
  /tool_callback`` through uvicorn. The in-flight health check is off (it runs on a clock, and
  valgrind slows the clock's work some 50x).

``--cprofile FILE`` with ``--child SYSTEM --no-measure`` profiles the measured queries of one
child with :mod:`cProfile` instead (no valgrind)::

    .venv/bin/python -m bench.instructions --child master-http --no-measure --cprofile /tmp/p.out \
        --queries 3000 --redis-url redis://127.0.0.1:6379/14

``--tree PATH`` runs the systems from another checkout (e.g. ``git worktree add /tmp/base
<commit>``) to compare two commits::

    .venv/bin/python -m bench.instructions --redis-url redis://127.0.0.1:6379/14
    .venv/bin/python -m bench.instructions --systems master --tree /tmp/base

A run of the default 300 queries per system takes about a minute (valgrind runs the code
some 50× slower); the counts repeat within about 1%.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
AGENT = "bench-ws"
SYSTEMS = (
    "master",
    "relay",
    "master-no-hiredis",
    "master-no-lean",
    "scripted",
    "scripted-session",
    "master-http",
)
HTTP_AGENT = "bench-http"


class _Agent:
    """An agent connected to an app's ``/ws`` through ASGI, answering each ``tool_call`` at once."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.registered = asyncio.Event()

    async def run(self) -> None:
        scope = {
            "type": "websocket",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "scheme": "ws",
            "path": "/ws",
            "raw_path": b"/ws",
            "root_path": "",
            "query_string": b"",
            "headers": [(b"host", b"127.0.0.1")],
            "client": ("127.0.0.1", 2),
            "server": ("127.0.0.1", 80),
            "subprotocols": [],
            "state": {},
            "app": self.app,
        }
        register = {
            "type": "register",
            "agent_id": AGENT,
            "role": "action",
            "tools": [_echo_tool()],
        }
        self.inbox.put_nowait({"type": "websocket.connect"})
        self.inbox.put_nowait({"type": "websocket.receive", "text": json.dumps(register)})
        await self.app(scope, self.inbox.get, self._on_send)

    async def _on_send(self, message: dict[str, Any]) -> None:
        if message["type"] != "websocket.send":
            if message["type"] == "websocket.close":
                raise RuntimeError(f"/ws closed: {message}")
            return
        frame = json.loads(message["text"])
        kind = frame.get("type")
        if kind == "tool_call":
            result = {
                "type": "tool_result",
                "call_id": frame["call_id"],
                "success": True,
                "result": {"echo": frame["arguments"].get("text")},
            }
            self.inbox.put_nowait({"type": "websocket.receive", "text": json.dumps(result)})
        elif kind == "registered":
            self.registered.set()
        else:
            raise RuntimeError(f"/ws sent {frame}")


def _echo_tool() -> dict[str, Any]:
    from bench.echo_tool import ECHO_TOOL

    return dict(ECHO_TOOL)


async def _post(app: Any, path: str, body: bytes) -> None:
    """One request straight into the app's ASGI callable."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "state": {},
        "app": app,
    }
    sent = False
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # never disconnects
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(scope, receive, send)
    if status != [200]:
        raise RuntimeError(f"{path}: HTTP {status}")


async def _queries(app: Any, body: bytes, count: int, concurrency: int) -> None:
    left = count

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await _post(app, "/query", body)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def _count(args: argparse.Namespace, on: bool, profile: Any = None) -> Any:
    """Start (``on``) or stop counting the measured queries: callgrind's instrumentation, or with
    ``--cprofile FILE`` (and ``--no-measure``) :mod:`cProfile`, whose stats go to ``FILE``."""
    if args.measure:
        _callgrind("on" if on else "off")
    if args.cprofile and on:
        import cProfile

        profile = cProfile.Profile()
        profile.enable()
    elif profile is not None:
        profile.disable()
        profile.dump_stats(args.cprofile)
    return profile


def _callgrind(switch: str) -> None:
    subprocess.run(
        ["callgrind_control", "-i", switch, str(os.getpid())], check=True, capture_output=True, timeout=60
    )


async def _child(args: argparse.Namespace) -> None:
    if args.system == "master-http":
        await _child_http(args)
        return
    async with AsyncExitStack() as stack:
        app, body = await _system(args, stack)
        agent = _Agent(app)
        connection = asyncio.create_task(agent.run())
        async with asyncio.timeout(120):
            await agent.registered.wait()
        await _queries(app, body, args.warmup, args.concurrency)
        profile = _count(args, True)
        await _queries(app, body, args.queries, args.concurrency)
        _count(args, False, profile)
        agent.inbox.put_nowait({"type": "websocket.disconnect", "code": 1000})
        async with asyncio.timeout(30):
            await connection
    print("done", flush=True)


async def _child_http(args: argparse.Namespace) -> None:
    """``master-http``: the app served by uvicorn on a loopback port of this process (the agent's
    callbacks come over real HTTP), the aiohttp invocation agent in another process, the queries
    through ASGI."""
    import socket

    try:
        import uvicorn

        from bench.instant_llm import decide
        from master.app import create_app
        from master.llm.model import FunctionChatModel
        from master.settings import Settings
    except ImportError as exc:
        raise SystemExit(f"master-http: this tree lacks what the system needs ({exc})") from None

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    base_url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        redis_url=args.redis_url,
        openagent_api_key="",
        master_base_url=base_url,
        # No in-flight health check: it runs on a clock, which valgrind slows some 50x.
        openagent_inflight_health_interval=86_400,
    )
    app = create_app(settings, llm=FunctionChatModel(decide))
    config = uvicorn.Config(
        app, host="127.0.0.1", log_level="warning", access_log=False, lifespan="off", timeout_keep_alive=600
    )
    server = uvicorn.Server(config)
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(app.router.lifespan_context(app))
        serving = asyncio.create_task(server.serve(sockets=[listener]))

        async def stop_serving() -> None:
            server.should_exit = True
            await serving

        stack.push_async_callback(stop_serving)
        async with asyncio.timeout(120):
            while not server.started:  # noqa: ASYNC110 - uvicorn's flag, no event to wait on
                await asyncio.sleep(0.01)
        agent = await _start_http_agent(base_url)
        stack.push_async_callback(_stop_agent, agent)
        body = json.dumps({"query": "hello", "allowed_agent_ids": [HTTP_AGENT]}).encode()
        await _queries(app, body, args.warmup, args.concurrency)
        profile = _count(args, True)
        await _queries(app, body, args.queries, args.concurrency)
        _count(args, False, profile)
    print("done", flush=True)


async def _start_http_agent(master: str) -> asyncio.subprocess.Process:
    """``bench.agents http-aiohttp`` of *this* checkout (the same agent whatever ``--tree``),
    registered at ``master``; returns once it says it is ready."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    agent = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "bench.agents", "http-aiohttp", "--port", str(port)),
        *("--master", master, "--agent-id", HTTP_AGENT),
        cwd=HERE.parent.parent,
        env=dict(os.environ, PYTHONPATH=str(HERE.parent.parent)),
        stdout=asyncio.subprocess.PIPE,
    )
    assert agent.stdout is not None
    async with asyncio.timeout(120):
        line = await agent.stdout.readline()
    if b'"ready"' not in line:
        await _stop_agent(agent)
        raise RuntimeError(f"the HTTP agent did not start (exit {agent.returncode}): {line!r}")
    return agent


async def _stop_agent(agent: asyncio.subprocess.Process) -> None:
    if agent.returncode is None:
        agent.terminate()
    try:
        async with asyncio.timeout(10):
            await agent.wait()
    except TimeoutError:
        agent.kill()
        await agent.wait()


async def _system(args: argparse.Namespace, stack: AsyncExitStack) -> tuple[Any, bytes]:
    """The app of ``args.system``, started, and the body of its queries."""
    if args.system == "relay":
        from bench.relays import ws_relay

        return ws_relay(), json.dumps({"query": "hello"}).encode()
    from bench.instant_llm import decide
    from master.app import create_app
    from master.llm.model import FunctionChatModel
    from master.settings import Settings

    scripted: dict[str, Any] = {}
    if args.system.startswith("scripted"):
        llm_server = _start_scripted_llm()
        stack.callback(_stop, llm_server)
        scripted = {
            "openai_api_key": "bench-not-a-key",
            "openai_base_url": f"http://127.0.0.1:{llm_server.port}/v1",
            "openagent_llm_loopback_only": True,
            "openagent_llm_max_retries": 0,
            "orchestrator_context_max_tokens": 10_000_000,  # never compacts: every turn goes to the LLM
        }
    settings = Settings(_env_file=None, redis_url=args.redis_url, openagent_api_key="", **scripted)  # type: ignore[call-arg]
    app = create_app(settings, llm=None if scripted else FunctionChatModel(decide))
    if args.system == "master-no-lean":
        from master.asgi import LeanRoutes

        for middleware in app.user_middleware:
            if middleware.cls is LeanRoutes:
                middleware.kwargs["routes"] = {}
    ask: dict[str, Any] = {"query": "hello", "allowed_agent_ids": [AGENT]}
    if args.system == "scripted-session":
        ask["session_id"] = await _prefilled_session(args.redis_url, args.session_turns)
    await stack.enter_async_context(app.router.lifespan_context(app))
    return app, json.dumps(ask).encode()


def _start_scripted_llm() -> Any:
    """The scripted OpenAI-compatible server in its own process (its work is not counted)."""
    import multiprocessing

    parent, child = multiprocessing.Pipe()
    process = multiprocessing.get_context("spawn").Process(
        target=_serve_scripted_llm, args=(child,), daemon=True
    )
    process.start()
    if not parent.poll(60):
        raise RuntimeError("the scripted LLM server did not start")
    process.port = parent.recv()  # type: ignore[attr-defined]
    return process


def _serve_scripted_llm(pipe: Any) -> None:
    import signal

    from bench.instant_llm import scripted_reply
    from openagent.testing import ScriptedOpenAIServer

    with ScriptedOpenAIServer() as server:
        server.set_handler(scripted_reply)
        pipe.send(server.port)
        signal.sigwait({signal.SIGTERM})


def _stop(process: Any) -> None:
    process.terminate()
    process.join(10)


async def _prefilled_session(redis_url: str, turns: int) -> str:
    """A session id whose stored turns are ``turns`` synthetic one-tool queries."""
    import uuid

    import redis.asyncio as aioredis

    from bench.session_growth import synthetic_turns
    from master.storage.redis_keys import session_key

    session_id = str(uuid.uuid4())
    client = aioredis.Redis.from_url(redis_url)
    try:
        await client.set(session_key(session_id), json.dumps(synthetic_turns(turns)), ex=3600)
    finally:
        await client.aclose()
    return session_id


def _measure(system: str, args: argparse.Namespace) -> int:
    """Instructions (callgrind ``Ir``) of ``args.queries`` queries of ``system``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        env = dict(os.environ)
        tree = Path(args.tree).resolve() if args.tree else HERE.parent.parent
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
        child = [
            sys.executable,
            "-c",  # this file, from any tree: sys.path[0] is the tree (the cwd), not bench/
            f"import runpy, sys; sys.argv[0] = {str(HERE)!r}; runpy.run_path(sys.argv[0], run_name='__main__')",
            "--child",
            system,
            "--redis-url",
            args.redis_url,
            "--queries",
            str(args.queries),
            "--warmup",
            str(args.warmup),
            "--concurrency",
            str(1 if system == "scripted-session" else args.concurrency),
            "--session-turns",
            str(args.session_turns),
        ]
        command = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
            *child,
        ]
        done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0 or "done" not in done.stdout:
            raise RuntimeError(f"{system} failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}")
        found = re.search(r"^totals:\s+(\d+)", out.read_text(), re.MULTILINE)
        if found is None:
            raise RuntimeError(f"{system}: no totals in callgrind's output")
        return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default="master,relay", help=f"comma-separated, of {', '.join(SYSTEMS)}")
    parser.add_argument("--queries", type=int, default=300, help="measured queries per system (300)")
    parser.add_argument("--warmup", type=int, default=100, help="queries before the count starts (100)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/14")
    parser.add_argument(
        "--session-turns", type=int, default=1000, help="scripted-session's earlier turns (1000)"
    )
    parser.add_argument("--tree", help="run the systems from this checkout instead")
    parser.add_argument("--child", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--no-measure", dest="measure", action="store_false", help=argparse.SUPPRESS)
    parser.add_argument("--cprofile", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.system = args.child
        if args.child == "master-no-hiredis":  # hidden while redis-py looks for it, then back
            hiredis = sys.modules.get("hiredis") or __import__("hiredis")
            sys.modules["hiredis"] = None  # type: ignore[assignment]
            import redis.asyncio.connection  # noqa: F401  # picks its parser now, without hiredis

            sys.modules["hiredis"] = hiredis
        if args.child == "master-http":  # served, as uvicorn serves the master: on uvloop
            import uvloop

            uvloop.run(_child(args))
            return
        asyncio.run(_child(args))
        return
    results: dict[str, float] = {}
    for system in args.systems.split(","):
        if system not in SYSTEMS:
            parser.error(f"unknown system {system!r}; known: {', '.join(SYSTEMS)}")
        total = _measure(system, args)
        results[system] = total / args.queries
        print(
            f"{system:18} {results[system]:12,.0f} instructions/query ({total:,} for {args.queries})",
            flush=True,
        )
    if "master" in results and "relay" in results:
        print(f"master / relay: {results['master'] / results['relay']:.2f}")
    print(
        json.dumps({"tool": "valgrind --tool=callgrind (Ir)", "queries": args.queries, "per_query": results})
    )


if __name__ == "__main__":
    main()
