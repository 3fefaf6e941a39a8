"""The master's MCP server: :class:`McpDoor`, served at ``/mcp`` (Streamable HTTP).

Built on the official ``mcp`` SDK's low-level :class:`~mcp.server.lowlevel.Server` and its
:class:`~mcp.server.streamable_http_manager.StreamableHTTPSessionManager`, which answers both
eras from the one URL: a 2026-07-28 request (``MCP-Protocol-Version: 2026-07-28``) is one
self-contained POST (``server/discover``, no session), anything else takes the 2025 path
(``initialize``, then a session with ``Mcp-Session-Id`` and a GET stream).

- ``tools/list``: every tool the orchestrator could call now, cluster-wide, under the
  orchestrator's function names (:meth:`master.query.entry.QueryEntry.offered_tools`), and
  :data:`~master.doors.mcp.tools.ASK`.
- ``tools/call``: :meth:`master.query.entry.QueryEntry.call_tool` (admission, dispatch, schema
  check, metrics, traces, call records: the orchestrator's path for one call). An unknown tool
  is a JSON-RPC error ``-32602`` naming it (the spec's "protocol error"); arguments that do not
  fit the tool's schema, a refusal and a failed tool are ``isError: true`` results naming the
  field or carrying the agent's message (the spec's "tool execution error", which a model can
  read and correct), the same on both eras. ``ask`` goes through
  :meth:`~master.query.entry.QueryEntry.submit`.
- progress: an agent's ``tool_progress`` (and an ``ask`` run's steps) become
  ``notifications/progress`` when the caller sent a progress token.
- cancellation: a 2025 ``notifications/cancelled`` or a dropped 2026 request cancels the
  handler, which cancels the hub call: the dispatcher forgets it (a result that still comes is
  discarded) and tells a WebSocket agent with a ``tool_cancel`` frame.
- ``notifications/tools/list_changed``: :class:`~master.doors.mcp.changes.ToolListWatch`.

Auth and routing are the route's (:mod:`master.routes.mcp`); the lifespan builds the door and
runs it (:meth:`McpDoor.run`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from importlib import metadata
from typing import Any

import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.subscriptions import ListenHandler
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

from master.auth import BOOTSTRAP_ADMIN, Principal, principal_of
from master.doors.mcp.changes import ToolListWatch
from master.doors.mcp.progress import ProgressRelay
from master.doors.mcp.tools import (
    ASK,
    ASK_INPUT_SCHEMA,
    answer_result,
    ask_tool,
    error_result,
    input_schema,
    listed,
    refused_result,
    run_result,
)
from master.query.entry import OfferedTool, QueryEntry, ToolRefused
from master.query.events import Finished, Progress, QueryRefused
from protocol import ErrorCode, QueryRequest, ToolProgress

logger = logging.getLogger("master.doors.mcp")

SERVER_NAME = "openagent"
INSTRUCTIONS = (
    "OpenAgent is a hub of AI agents. Each tool here is one agent's tool, named "
    "<agent_id>__<tool>, and runs on that agent (WebSocket, HTTP or MCP agents connected to the "
    "hub). The tool list changes as agents connect and leave. The 'ask' tool hands a question "
    "to the hub's orchestrator, an LLM that chooses and calls the agents' tools itself and "
    "answers in plain text; pass its session_id back to continue a conversation."
)
START_TIMEOUT = 30.0
"""Seconds for the SDK's session manager to start."""
ASK_FIELDS = frozenset(("query", "session_id", "allowed_agent_ids", "auto_mode"))


def _version() -> str:
    try:
        return metadata.version("openagent")
    except metadata.PackageNotFoundError:  # pragma: no cover - a source tree without install
        return "0.0.0"


class _HubServer(Server[Any]):
    """The low-level server, saying to 2025 clients that its tool list changes (it does)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


class McpDoor:
    """The master as an MCP server (module docstring): :meth:`handle` serves ``/mcp``."""

    def __init__(
        self,
        entry: QueryEntry,
        *,
        max_body_bytes: int,
        max_sessions: int,
        session_idle_seconds: float,
        check_interval: float,
        allowed_hosts: list[str] | None = None,
    ) -> None:
        self.entry = entry
        self._by_name: dict[str, OfferedTool] = {}
        self.watch = ToolListWatch(self._fingerprint, interval=check_interval)
        self._listen = ListenHandler(self.watch.bus)
        self.server = _HubServer(
            SERVER_NAME,
            version=_version(),
            title="OpenAgent hub",
            description="Every tool of the agents connected to this OpenAgent hub, and its orchestrator.",
            instructions=INSTRUCTIONS,
            get_tool_input_schema=self._input_schema,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self._listen,
        )
        self._stop = asyncio.Event()
        self._serving: asyncio.Task[None] | None = None
        self.manager = StreamableHTTPSessionManager(
            app=self.server,
            max_request_body_size=max_body_bytes,
            max_sessions=max_sessions,
            session_idle_timeout=session_idle_seconds,
            security_settings=_host_check(allowed_hosts),
        )

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Serve: the SDK's session manager and the tool-list watch, until :meth:`aclose`.

        The manager's task group (its sessions' tasks) lives in a task of its own, so that an
        error elsewhere in the lifespan is not wrapped in its exception group on the way out.
        """
        ready = asyncio.Event()

        async def serve() -> None:
            try:
                async with self.manager.run():
                    ready.set()
                    await self._stop.wait()
                    self._listen.close()
            finally:
                ready.set()  # also when it could not start

        self._serving = asyncio.create_task(serve(), name="mcp-session-manager")
        async with asyncio.timeout(START_TIMEOUT):
            await ready.wait()
        if self._serving.done():
            self._serving.result()  # raises what stopped it
        self.watch.start()

    async def aclose(self) -> None:
        """Stop: the watch, the listen streams, the sessions (their requests are cancelled)."""
        await self.watch.aclose()
        self._stop.set()
        if self._serving is not None:
            await asyncio.gather(self._serving, return_exceptions=True)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one HTTP request to ``/mcp`` (authorized by the route)."""
        await self.manager.handle_request(scope, receive, send)

    def tools_changed(self, *_: object) -> None:
        """A source of tools changed (a registry listener, a cluster heartbeat): check now."""
        self.watch.poke()

    # ------------------------------------------------------------------ tools

    def _offered(self) -> list[OfferedTool]:
        offered = self.entry.offered_tools()
        self._by_name = {tool.name: tool for tool in offered}
        return offered

    def _find(self, name: str) -> OfferedTool | None:
        tool = self._by_name.get(name)
        if tool is None:
            self._offered()  # a tool that appeared since the last look
            tool = self._by_name.get(name)
        return tool

    def _fingerprint(self) -> tuple[tuple[str, str, str], ...]:
        return tuple(
            (tool.name, tool.description, json.dumps([tool.parameters, tool.annotations], sort_keys=True))
            for tool in self._offered()
        )

    def _input_schema(self, name: str) -> Mapping[str, Any] | None:
        """For the SDK's ``Mcp-Param-*`` header check (2026-07-28) without listing every tool."""
        if name == ASK:
            return ASK_INPUT_SCHEMA
        tool = self._find(name)
        return None if tool is None else input_schema(tool)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self._note_session(ctx)
        principal = _principal(ctx)
        offered = self._offered() if principal.is_admin else self.entry.offered_tools(principal=principal)
        return types.ListToolsResult(tools=[ask_tool(), *(listed(tool) for tool in offered)])

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        self._note_session(ctx)
        arguments = params.arguments or {}
        if params.name == ASK:
            return await self._ask(ctx, arguments)
        tool = self._find(params.name)
        if tool is None:
            raise _unknown_tool(params.name)
        relay = ProgressRelay(ctx.session.report_progress, params.name)

        def on_progress(progress: ToolProgress) -> None:
            relay(progress.progress, progress.message)

        try:
            run = await self.entry.call_tool(
                tool.agent_id,
                tool.tool_name,
                arguments,
                door="mcp",
                on_progress=on_progress,
                principal=_principal(ctx),
            )
        except ToolRefused as exc:
            if exc.code == ErrorCode.INVALID_ARGUMENTS:
                return error_result(f"arguments of tool {params.name!r} do not fit its schema: {exc.message}")
            raise _unknown_tool(params.name, exc.message) from None  # it left since it was listed
        except QueryRefused as exc:
            return error_result(f"{exc.code.value}: {exc.message}")
        finally:
            await relay.aclose()
        return run_result(run)

    async def _ask(self, ctx: ServerRequestContext[Any], arguments: dict[str, Any]) -> types.CallToolResult:
        invalid = ErrorCode.INVALID_ARGUMENTS.value
        unknown = sorted(set(arguments) - ASK_FIELDS)
        if unknown:
            return refused_result(
                invalid,
                f"arguments of tool 'ask' do not fit its schema: {unknown[0]}: unknown argument "
                f"(ask takes {', '.join(sorted(ASK_FIELDS))})",
            )
        try:
            request = QueryRequest.model_validate(arguments)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or "arguments"
            return refused_result(
                invalid, f"arguments of tool 'ask' do not fit its schema: {field}: {first['msg']}"
            )
        try:
            run = self.entry.submit(request, door="mcp", stream=True, principal=_principal(ctx))
        except QueryRefused as exc:
            return refused_result(exc.code.value, exc.message)
        relay = ProgressRelay(ctx.session.report_progress, ASK)
        try:
            async for event in run.events():
                if isinstance(event, Finished):
                    return answer_result(event.response)
                if isinstance(event, Progress) and event.event != "token":
                    relay(None, _step(event))
        finally:
            await relay.aclose()
        return refused_result(ErrorCode.INTERNAL_ERROR.value, "the master stopped before answering")

    # ------------------------------------------------------------------ sessions

    def _note_session(self, ctx: ServerRequestContext[Any]) -> None:
        """Remember a 2025 session that lists or calls tools, to tell it when they change."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            # The SDK hands handlers no public way to the connection (ServerRequestContext has
            # the per-request ServerSession only); its standalone stream is where 2025 clients
            # listen for list_changed.
            connection = getattr(ctx.session, "_connection", None)
            if isinstance(connection, Connection) and connection.session_id is not None:
                self.watch.session(connection)


def _principal(ctx: ServerRequestContext[Any]) -> Principal:
    """Who sent the MCP request (:func:`master.auth.principal_of` of its HTTP request)."""
    scope = getattr(ctx.request, "scope", None)
    return principal_of(scope) if isinstance(scope, dict) else BOOTSTRAP_ADMIN


def _host_check(allowed_hosts: list[str] | None) -> TransportSecuritySettings | None:
    """The SDK's DNS-rebinding check: these ``Host`` values, and ``Origin`` on them (http or https)."""
    if allowed_hosts is None:
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=allowed_hosts,
        allowed_origins=[f"{scheme}://{host}" for host in allowed_hosts for scheme in ("http", "https")],
    )


def _unknown_tool(name: str, why: str | None = None) -> MCPError:
    return MCPError(
        types.INVALID_PARAMS,
        f"unknown tool {name!r}" + (f" ({why})" if why else "") + ": tools/list shows the tools on offer now",
        data={"tool": name},
    )


def _step(event: Progress) -> str:
    """A step of an ``ask`` run, as a progress message."""
    data = event.data
    if event.event in ("tool_call", "tool_result", "tool_progress"):
        agent, tool = data.get("agent_id"), data.get("tool_name")
        label = f"{agent}.{tool}" if agent and tool else str(data.get("function_name", ""))
        detail = data.get("message") or ("failed" if data.get("success") is False else "")
        return f"{event.event} {label} {detail}".strip()
    return event.event
