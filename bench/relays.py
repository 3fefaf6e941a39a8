"""The baselines: minimal hubs built from the libraries the master uses (FastAPI on uvicorn).

::

    python -m bench.relays ws --port 8200                                  # baseline (a)
    python -m bench.relays http --port 8201 --agent-url http://127.0.0.1:9102   # baseline (b)
    python -m bench.relays idle --port 8202                                # baseline (c)

- (a) **WebSocket relay**: ``POST /query`` sends a ``tool_call`` frame to the one registered
  WebSocket agent and answers with its ``tool_result``. No orchestration, no Redis, no
  validation beyond a one-field body model. It speaks the master's wire contract, so the
  SDK agent of the master's cases serves it unchanged.
- (b) **HTTP callback relay**: ``POST /query`` POSTs the call to the agent's ``/invoke``
  (with a ``callback_url``), the agent answers 202 and POSTs the result to ``/callback``,
  which resolves a future. ``/query`` uses a pooled aiohttp client; ``/query-httpx`` uses
  httpx with the master's pool settings, to show what the client library costs.
- (c) **Idle WebSocket server**: accepts connections, answers the first frame with a fixed
  ``registered`` frame, and holds them. For memory per connection.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import httpx
import uvicorn
from fastapi import FastAPI, HTTPException, WebSocket, WebSocketDisconnect
from pydantic import BaseModel

from bench.child import raise_fd_limit
from bench.echo_tool import TOOL_NAME

CALL_TIMEOUT = 30.0


class Ask(BaseModel):
    query: str


class _Calls:
    """Futures of the calls in flight, by call id."""

    def __init__(self) -> None:
        self._pending: dict[str, asyncio.Future[Any]] = {}

    def open(self) -> tuple[str, asyncio.Future[Any]]:
        call_id = uuid.uuid4().hex
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        return call_id, future

    def close(self, call_id: str) -> None:
        self._pending.pop(call_id, None)

    def resolve(self, call_id: str, result: Any) -> bool:
        future = self._pending.pop(call_id, None)
        if future is None or future.done():
            return False
        future.set_result(result)
        return True


def ws_relay() -> FastAPI:
    """Baseline (a)."""
    app = FastAPI()
    calls = _Calls()
    agent: dict[str, WebSocket] = {}
    send_lock = asyncio.Lock()

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "agents": len(agent)}

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        try:
            while True:  # until the agent disconnects
                frame = json.loads(await websocket.receive_text())
                if frame.get("type") == "register":
                    agent["ws"] = websocket
                    await websocket.send_text(
                        json.dumps({"type": "registered", "agent_id": frame["agent_id"]})
                    )
                elif frame.get("type") == "tool_result":
                    calls.resolve(frame["call_id"], frame.get("result"))
        except WebSocketDisconnect:
            if agent.get("ws") is websocket:
                del agent["ws"]

    @app.post("/query")
    async def query(body: Ask) -> dict[str, Any]:
        websocket = agent.get("ws")
        if websocket is None:
            raise HTTPException(503, "no agent connected")
        call_id, future = calls.open()
        frame = {
            "type": "tool_call",
            "call_id": call_id,
            "tool_name": TOOL_NAME,
            "arguments": {"text": body.query},
        }
        try:
            async with send_lock:
                await websocket.send_text(json.dumps(frame))
            result = await asyncio.wait_for(future, CALL_TIMEOUT)
        finally:
            calls.close(call_id)
        return {"success": True, "answer": f"The tool said {json.dumps(result)}"}

    return app


def http_relay(agent_url: str, own_url: str) -> FastAPI:
    """Baseline (b)."""
    calls = _Calls()
    clients: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        connector = aiohttp.TCPConnector(limit=256, limit_per_host=0)
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            # The master's settings (master/app.py).
            httpx.AsyncClient(limits=httpx.Limits(max_connections=256, max_keepalive_connections=64)) as http,
        ):
            clients["aiohttp"], clients["httpx"] = session, http
            yield

    app = FastAPI(lifespan=lifespan)

    def call_body(call_id: str, text: str) -> dict[str, Any]:
        return {
            "call_id": call_id,
            "tool_name": TOOL_NAME,
            "arguments": {"text": text},
            "callback_url": f"{own_url}/callback",
        }

    async def relay(body: Ask, post: Any) -> dict[str, Any]:
        call_id, future = calls.open()
        try:
            status = await post(f"{agent_url}/invoke", call_body(call_id, body.query))
            if status >= 300:
                raise HTTPException(502, f"agent answered HTTP {status}")
            result = await asyncio.wait_for(future, CALL_TIMEOUT)
        finally:
            calls.close(call_id)
        return {"success": True, "answer": f"The tool said {json.dumps(result)}"}

    async def post_aiohttp(url: str, body: dict[str, Any]) -> int:
        async with clients["aiohttp"].post(
            url, json=body, timeout=aiohttp.ClientTimeout(total=2)
        ) as response:
            await response.read()
            return int(response.status)

    async def post_httpx(url: str, body: dict[str, Any]) -> int:
        response = await clients["httpx"].post(url, json=body, timeout=2.0)
        return int(response.status_code)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok"}

    @app.post("/query")
    async def query(body: Ask) -> dict[str, Any]:
        return await relay(body, post_aiohttp)

    @app.post("/query-httpx")
    async def query_httpx(body: Ask) -> dict[str, Any]:
        return await relay(body, post_httpx)

    @app.post("/callback")
    async def callback(body: dict[str, Any]) -> dict[str, Any]:
        if not calls.resolve(str(body.get("call_id")), body.get("result")):
            raise HTTPException(404, f"unknown call {body.get('call_id')!r}")
        return {"status": "accepted"}

    return app


def idle_server() -> FastAPI:
    """Baseline (c)."""
    app = FastAPI()
    registered = json.dumps({"type": "registered", "agent_id": "idle"})

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok"}

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        try:
            await websocket.receive_text()
            await websocket.send_text(registered)
            while (await websocket.receive())["type"] != "websocket.disconnect":  # until it goes away
                pass
        except WebSocketDisconnect:
            pass

    return app


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.relays")
    parser.add_argument("kind", choices=["ws", "http", "idle"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--agent-url", default="http://127.0.0.1:9102")
    args = parser.parse_args()
    raise_fd_limit()
    if args.kind == "ws":
        app = ws_relay()
    elif args.kind == "http":
        app = http_relay(args.agent_url.rstrip("/"), f"http://127.0.0.1:{args.port}")
    else:
        app = idle_server()
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
