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
  check, the approval policy, metrics, traces, call records: the orchestrator's path for one
  call). A call the policy holds for a person's approval is answered as a waiting ``ask`` is
  (below), and runs once decided: the retried call (2026), or the call itself after the
  elicitation (2025), then answers with the tool's result, or the refusal. An unknown tool
  is a JSON-RPC error ``-32602`` naming it (the spec's "protocol error"); arguments that do not
  fit the tool's schema, a refusal and a failed tool are ``isError: true`` results naming the
  field or carrying the agent's message (the spec's "tool execution error", which a model can
  read and correct), the same on both eras. ``ask`` goes through
  :meth:`~master.query.entry.QueryEntry.submit`.
- approvals: when an ``ask`` run (or a held ``tools/call``) waits for a person (:mod:`master.query.approvals`), a
  2026-07-28 client that declares elicitation gets an ``InputRequiredResult``, one elicitation
  per held call keyed by its ``approval_id``; it retries ``ask`` with the answers (accept with
  ``decision`` approve or reject, and ``remember`` to approve the tool for the rest of the
  session; decline rejects; cancel leaves the call waiting) and gets the run's answer. A 2025 client that declares elicitation is asked within the call
  (``elicitation/create``, one call at a time). Any other client gets the answer that names what
  waits and how to decide (``POST /approvals/{approval_id}``), with the approvals as structured
  content.
- progress: an agent's ``tool_progress`` (and an ``ask`` run's steps and the answer's tokens,
  each token's text as the message) become ``notifications/progress`` when the caller sent a
  progress token.
- cancellation: a 2025 ``notifications/cancelled`` or a dropped 2026 request cancels the
  handler, which cancels the hub call: the dispatcher forgets it (a result that still comes is
  discarded) and tells a WebSocket agent with a ``tool_cancel`` frame. An ``ask`` call's run is
  cancelled through the one cancel of every door (:meth:`master.query.entry.QueryEntry.cancel`):
  it ends ``cancelled``, as ``DELETE /runs/{run_id}`` would end it.
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
from starlette.types import Receive, Send
from starlette.types import Scope as ASGIScope

from master.auth import SYSTEM, Principal
from master.doors.mcp.approvals import ApprovalDialogue, principal_of_request
from master.doors.mcp.changes import ToolListWatch
from master.doors.mcp.progress import ProgressRelay
from master.doors.mcp.tools import (
    ASK,
    ASK_INPUT_SCHEMA,
    ask_tool,
    error_result,
    input_schema,
    listed,
    refused_result,
    run_result,
)
from master.query.approvals import ApprovalDesk
from master.query.entry import CancelRefused, OfferedTool, QueryEntry, QueryRun, ToolRefused
from master.query.events import Finished, QueryRefused
from protocol import (
    ErrorCode,
    QueryRequest,
    QueryResponse,
    RunEvent,
    TokenEvent,
    ToolCallEvent,
    ToolProgress,
    ToolProgressEvent,
    ToolResultEvent,
)

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


class McpDoor(ApprovalDialogue):
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
        approvals: ApprovalDesk | None = None,
    ) -> None:
        self.entry = entry
        self._approvals = approvals
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
        self._cancels: set[asyncio.Task[None]] = set()
        """Cancels of ``ask`` runs whose call the client cancelled, under way."""
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
        for task in list(self._cancels):
            task.cancel()
        if self._serving is not None:
            await asyncio.gather(self._serving, return_exceptions=True)

    async def handle(self, scope: ASGIScope, receive: Receive, send: Send) -> None:
        """Answer one HTTP request to ``/mcp`` (authorized by the route)."""
        await self.manager.handle_request(scope, receive, send)

    def tools_changed(self, *_: object) -> None:
        """A source of tools changed (a registry listener, a cluster heartbeat): check now."""
        self.watch.poke()

    # ------------------------------------------------------------------ tools

    def _offered(self) -> list[OfferedTool]:
        """Every tool, for the door's own bookkeeping (names, change notices): the master's view."""
        offered = self.entry.offered_tools(principal=SYSTEM)
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
        principal = principal_of_request(ctx)
        offered = self._offered() if principal.is_admin else self.entry.offered_tools(principal=principal)
        return types.ListToolsResult(tools=[ask_tool(), *(listed(tool) for tool in offered)])

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        self._note_session(ctx)
        arguments = params.arguments or {}
        if params.name == ASK:
            return await self._ask(ctx, arguments, params.input_responses)
        if params.input_responses and self._approvals is not None:  # a held call, decided: it goes on
            return await self._answered(ctx, params.input_responses)
        principal = principal_of_request(ctx)
        if principal.is_admin:
            tool = self._find(params.name)
        else:  # the tools on offer to the caller's tenant only
            tool = next(
                (t for t in self.entry.offered_tools(principal=principal) if t.name == params.name), None
            )
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
                principal=principal_of_request(ctx),
            )
        except ToolRefused as exc:
            if exc.code == ErrorCode.INVALID_ARGUMENTS:
                return error_result(f"arguments of tool {params.name!r} do not fit its schema: {exc.message}")
            raise _unknown_tool(params.name, exc.message) from None  # it left since it was listed
        except QueryRefused as exc:
            return error_result(f"{exc.code.value}: {exc.message}")
        finally:
            await relay.aclose()
        if isinstance(run, QueryResponse):  # held for a person's approval: asked as ask's are
            return await self._answer(ctx, run)
        return run_result(run)

    async def _ask(
        self,
        ctx: ServerRequestContext[Any],
        arguments: dict[str, Any],
        answers: types.InputResponses | None = None,
    ) -> types.CallToolResult | types.InputRequiredResult:
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
        if answers and self._approvals is not None:  # a 2026 client's decisions: the run goes on
            return await self._answered(ctx, answers)
        try:
            run = self.entry.submit(request, door="mcp", stream=True, principal=principal_of_request(ctx))
        except QueryRefused as exc:
            return refused_result(exc.code.value, exc.message)
        response = await self._follow(ctx, run)
        if response is None:
            return refused_result(ErrorCode.INTERNAL_ERROR.value, "the master stopped before answering")
        return await self._answer(ctx, response)

    async def _follow(self, ctx: ServerRequestContext[Any], run: QueryRun) -> QueryResponse | None:
        """The run's outcome, its steps relayed as progress (``None``: the master stopped under it)."""
        relay = ProgressRelay(ctx.session.report_progress, ASK)
        try:
            async for event in run.events():
                if isinstance(event, Finished):
                    return event.response
                relay(None, _step(event.event))
        except asyncio.CancelledError:  # the client cancelled the call (not the master stopping)
            if not self._stop.is_set():
                task = asyncio.create_task(
                    self._cancel(run, principal_of_request(ctx)), name=f"mcp: cancel {run.run_id}"
                )
                self._cancels.add(task)
                task.add_done_callback(self._cancels.discard)
            raise
        finally:
            await relay.aclose()
        return None

    async def _cancel(self, run: QueryRun, principal: Principal) -> None:
        """Cancel the run of an ``ask`` call its client cancelled; one not recorded yet (its
        request was being accepted) is cancelled here, where it runs."""
        try:
            await self.entry.cancel(run.run_id, principal=principal, door="mcp")
        except CancelRefused as exc:
            if exc.code == ErrorCode.UNKNOWN_RUN:
                run.cancel("cancelled by a client (MCP notifications/cancelled)")
            else:
                logger.info("MCP: the cancelled call's run %s was not cancelled: %s", run.run_id, exc.message)

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


def _step(event: RunEvent) -> str:
    """A step of an ``ask`` run, as a progress message."""
    if isinstance(event, TokenEvent):  # the answer's text as the model writes it
        return event.text
    if isinstance(event, ToolCallEvent | ToolProgressEvent | ToolResultEvent):
        agent, tool = event.agent_id, event.tool_name
        label = f"{agent}.{tool}" if agent and tool else str(event.function_name or "")
        detail = ""
        if isinstance(event, ToolProgressEvent):
            detail = event.message
        elif isinstance(event, ToolResultEvent) and not event.success:
            detail = "failed"
        return f"{event.type} {label} {detail}".strip()
    return event.type
