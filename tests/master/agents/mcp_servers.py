"""A Streamable-HTTP MCP server built in the tests with the official ``mcp`` SDK.

Tools: ``add`` (reports progress, read-only annotation), ``fail`` (an ``isError`` result with
the server's text), ``slow`` (waits until released), ``grow`` (adds a tool and announces the
change to listening clients). When ``token`` is set, every request must carry
``Authorization: Bearer <token>``; a refusal echoes the header it got (a hostile server: the
hub must still never show the value).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import ToolAnnotations
from starlette.types import ASGIApp, Receive, Scope, Send


class TestMcpServer:
    """The server and its switches (see the module docstring)."""

    __test__ = False

    def __init__(self, token: str | None = None, host_names: tuple[str, ...] = ()) -> None:
        self.token = token
        self.host_names = host_names
        """Names besides the loopback ones its ``Host`` check (the SDK's) accepts."""
        self.release = asyncio.Event()
        self.slow_started = asyncio.Event()
        self.slow_cancelled = asyncio.Event()
        self.server = MCPServer("test-mcp", version="1.2.3", instructions="Adds numbers for the tests.")
        server = self.server

        @server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
        async def add(a: int, b: int, ctx: Context) -> int:
            """Add two integers."""
            await ctx.report_progress(1, 2, "adding")
            return a + b

        @server.tool()
        def fail(reason: str) -> str:
            """Always fails, saying why."""
            raise ToolError(f"refused: {reason}")

        @server.tool()
        async def slow() -> str:
            """Waits until the test releases it."""
            self.slow_started.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.slow_cancelled.set()
                raise
            return "done"

        @server.tool()
        async def grow(ctx: Context) -> str:
            """Adds the tool ``shrink`` and tells listening clients."""

            def shrink() -> str:
                """A tool added at run time."""
                return "shrunk"

            server.add_tool(shrink, name="shrink")
            await ctx.notify_tools_changed()  # 2026-07-28: to subscriptions/listen streams
            if ctx.protocol_version and ctx.protocol_version < "2026":  # a 2025-revision session
                await ctx.session.send_tool_list_changed()
            return "grown"

    def app(self) -> ASGIApp:
        security = None
        if self.host_names:
            loopback = ["127.0.0.1", "localhost", "[::1]"]
            security = TransportSecuritySettings(
                allowed_hosts=[f"{name}:*" for name in [*loopback, *self.host_names]],
                allowed_origins=[f"http://{name}:*" for name in [*loopback, *self.host_names]],
            )
        inner = self.server.streamable_http_app(transport_security=security)
        token = self.token
        if token is None:
            return inner

        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                got = dict(scope["headers"]).get(b"authorization", b"").decode()
                if got != f"Bearer {token}":
                    body = f"unauthorized: you sent {got!r}".encode()
                    await send({"type": "http.response.start", "status": 401, "headers": []})
                    await send({"type": "http.response.body", "body": body})
                    return
            await inner(scope, receive, send)

        return guarded


_next_port = itertools.count()


def mcp_port() -> int:
    """A free loopback port of this suite's range for MCP servers (19400-19499)."""
    for _ in range(100):
        port = 19400 + next(_next_port) % 100
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 19400-19499")


@contextlib.asynccontextmanager
async def serve_mcp(server: TestMcpServer, port: int | None = None) -> AsyncIterator[str]:
    """Serve ``server`` with uvicorn on loopback (its lifespan on); yields its ``/mcp`` URL."""
    port = port or mcp_port()
    # Open streams (a listening client) would hold a graceful shutdown forever: a stopped server
    # drops them, as a crashed one would.
    config = uvicorn.Config(
        server.app(),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=1,
    )
    runner = uvicorn.Server(config)
    task = asyncio.create_task(runner.serve())
    try:
        async with asyncio.timeout(60):
            while not runner.started:
                if task.done():
                    task.result()
                    raise RuntimeError("the MCP server stopped during start-up")
                await asyncio.sleep(0.01)
        bound = runner.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{bound}/mcp"
    finally:
        runner.should_exit = True
        async with asyncio.timeout(60):
            await task


def tool_names(tools: list[Any]) -> set[str]:
    return {tool.name for tool in tools}
