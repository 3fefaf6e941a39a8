"""The benchmark's agents, each run as its own process; all offer the ``echo`` tool.

::

    python -m bench.agents ws --master-ws ws://127.0.0.1:8123/ws --agent-id bench-ws [--instance m0]
    python -m bench.agents http-sdk --master http://127.0.0.1:8123 --port 9101 --agent-id bench-http-sdk
    python -m bench.agents http-aiohttp --port 9102 [--master http://127.0.0.1:8123 --agent-id ...]

- ``ws``: the SDK's :class:`~openagent.OrchestratorActionAgent` (keepalive pings off).
- ``http-sdk``: the SDK's :class:`~openagent.invocation.InvocationActionAgent` (Starlette on
  uvicorn, callbacks with httpx).
- ``http-aiohttp``: the same wire contract on aiohttp, server and client: answers ``202`` and
  POSTs the result to ``callback_url`` from a pooled ``aiohttp.ClientSession``. With
  ``--master`` it registers there (``POST /register``); without, it only serves (baseline (b)).
- ``a2a``: ``echo`` served directly by an ``a2a-sdk`` server (JSON-RPC at ``/``, the SDK's
  default request handler and in-memory task store, uvicorn), the baseline of the A2A cases: a
  message with the data part ``{"tool": "echo", "arguments": {...}}`` gets a task with the
  result as an artifact, as the hub's A2A door answers it.

Each prints ``{"event": "ready"}`` once it can take calls, and stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import aiohttp
from aiohttp import web

from bench.child import emit, run, until_terminated
from bench.echo_tool import ECHO_TOOL, TOOL_NAME, echo


async def _ws_agent(args: argparse.Namespace) -> None:
    from openagent import ClientConfig, OrchestratorActionAgent

    config = ClientConfig(master_ws=args.master_ws, keepalive_interval=0)
    agent = OrchestratorActionAgent(args.agent_id, [ECHO_TOOL], echo, config=config, instance=args.instance)
    await agent.start()
    emit("ready")
    try:
        await until_terminated()
    finally:
        await agent.stop()


async def _http_sdk_agent(args: argparse.Namespace) -> None:
    from openagent.invocation import InvocationActionAgent

    agent = InvocationActionAgent(
        args.agent_id,
        [ECHO_TOOL],
        tool_handler=echo,
        host="127.0.0.1",
        port=args.port,
        master_base_url=args.master,
        api_key="",
    )
    await agent.start()
    emit("ready")
    try:
        await until_terminated()
    finally:
        await agent.stop()


class AiohttpAgent:
    """An invocation agent on aiohttp: the same contract as the SDK's, another HTTP stack."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self._session = session
        self._calls: set[asyncio.Task[None]] = set()

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def invoke(self, request: web.Request) -> web.Response:
        call = await request.json()
        if call.get("tool_name") != TOOL_NAME:
            return web.json_response({"detail": f"unknown tool {call.get('tool_name')!r}"}, status=404)
        task = asyncio.create_task(self._serve(call))
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)
        return web.json_response({"accepted": True, "call_id": call["call_id"]}, status=202)

    async def _serve(self, call: dict[str, Any]) -> None:
        result = await echo(call["tool_name"], call.get("arguments") or {})
        body = {"call_id": call["call_id"], "success": True, "result": result}
        async with self._session.post(call["callback_url"], json=body) as response:
            await response.read()

    async def aclose(self) -> None:
        for task in list(self._calls):
            task.cancel()
        await asyncio.gather(*self._calls, return_exceptions=True)


async def _http_aiohttp_agent(args: argparse.Namespace) -> None:
    connector = aiohttp.TCPConnector(limit=256, limit_per_host=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=10)) as session:
        agent = AiohttpAgent(session)
        app = web.Application()
        app.router.add_get("/health", agent.health)
        app.router.add_post("/invoke", agent.invoke)
        app.router.add_post(f"/tools/{TOOL_NAME}", agent.invoke)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", args.port, backlog=2048).start()
        try:
            if args.master:
                registration = {
                    "agent_id": args.agent_id,
                    "invocation_base_url": f"http://127.0.0.1:{args.port}",
                    "tools": [{**ECHO_TOOL, "endpoint": f"/tools/{TOOL_NAME}"}],
                }
                async with session.post(f"{args.master}/register", json=registration) as response:
                    if response.status != 200:
                        raise RuntimeError(f"register: HTTP {response.status} {await response.text()}")
            emit("ready")
            await until_terminated()
        finally:
            await agent.aclose()
            await runner.cleanup()


async def _a2a_agent(args: argparse.Namespace) -> None:
    import uvicorn
    from a2a.helpers import get_data_parts, new_data_part, new_task
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
    from starlette.applications import Starlette

    class EchoExecutor(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            task_id, context_id = context.task_id or "", context.context_id or ""
            call = get_data_parts(context.message.parts)[0] if context.message else {}
            await event_queue.enqueue_event(
                new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, history=[context.message])
            )
            updater = TaskUpdater(event_queue, task_id, context_id)
            await updater.start_work()
            result = await echo(call["tool"], call.get("arguments") or {})
            await updater.add_artifact([new_data_part(result)], name="result")
            await updater.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            raise NotImplementedError

    url = f"http://127.0.0.1:{args.port}"
    card = AgentCard(
        name="bench-a2a",
        description="echo, served by the a2a-sdk",
        version="1",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["application/json"],
        default_output_modes=["application/json"],
        skills=[AgentSkill(id=TOOL_NAME, name=TOOL_NAME, description="Echo the text back", tags=["tool"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    app = Starlette(
        routes=[
            *create_agent_card_routes(card),
            *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True),
        ]
    )
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False, lifespan="off"
        )
    )
    serving = asyncio.create_task(server.serve())
    async with asyncio.timeout(60):
        while not server.started:  # noqa: ASYNC110 - uvicorn's flag, no event to wait on
            await asyncio.sleep(0.01)
    emit("ready")
    try:
        await until_terminated()
    finally:
        server.should_exit = True
        await serving


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.agents")
    sub = parser.add_subparsers(dest="kind", required=True)
    ws = sub.add_parser("ws")
    ws.add_argument("--master-ws", required=True)
    ws.add_argument("--agent-id", default="bench-ws")
    ws.add_argument("--instance", help="this copy's replica name (several copies serve one agent id)")
    sdk = sub.add_parser("http-sdk")
    sdk.add_argument("--master", required=True)
    sdk.add_argument("--port", type=int, required=True)
    sdk.add_argument("--agent-id", default="bench-http-sdk")
    aio = sub.add_parser("http-aiohttp")
    aio.add_argument("--master")
    aio.add_argument("--port", type=int, required=True)
    aio.add_argument("--agent-id", default="bench-http-aiohttp")
    a2a = sub.add_parser("a2a")
    a2a.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    entry = {
        "ws": _ws_agent,
        "http-sdk": _http_sdk_agent,
        "http-aiohttp": _http_aiohttp_agent,
        "a2a": _a2a_agent,
    }[args.kind]
    run(entry(args))


if __name__ == "__main__":
    main()
