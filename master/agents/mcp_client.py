"""Remote MCP servers as hub agents: the connector of transport ``mcp`` (Streamable HTTP).

``POST /register {"agent_id", "mcp_url", "mcp_headers"}`` stores the server like an HTTP
invocation agent (:mod:`master.agents.invocation`); this module speaks MCP to it with the
official SDK (``mcp``):

- :meth:`McpConnector.discover`: connect (``server/discover`` on 2026-07-28 servers, the
  ``initialize`` handshake on older ones), ``tools/list`` page by page, each tool with its
  annotations; the server's name, version and instructions become the agent's metadata.
- :meth:`McpConnector.call`: ``tools/call``. Progress notifications are relayed as the call's
  ``tool_progress``; a result with ``isError`` raises :class:`ToolFailed` with the server's text;
  an unreachable server raises :class:`AgentUnavailable`. The dispatcher bounds the call with
  ``TOOL_CALL_TIMEOUT`` and cancels it (the SDK then cancels the request) when it runs out.
- :meth:`McpConnector.check`: a cheap request (``server/discover`` or ``ping``) on the session.

One session per agent is kept open and shared by its calls; it also listens for the server's
tool-list changes (``subscriptions/listen`` on 2026-07-28, ``notifications/tools/list_changed``
before) and hands the new list to :attr:`ConnectorContext.tools_changed`. A session that
fails is dropped and the next call or check opens a new one (a restarted server).

The registration's headers (``mcp_headers``, e.g. ``Authorization``) are secrets: they are sent
to the server and nowhere else. No log line and no error message here contains them; every
message built from an exception is scrubbed of their values first (:func:`scrub`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from master.agents.connectors import ConnectorContext, ConnectorError, Discovered, ProgressSink
from master.agents.url_policy import AgentUrlPolicy
from master.errors import AgentUnavailable, ToolFailed
from master.observability.redaction import cap
from openagent.errors import ToolError
from openagent.mcp import progress_fraction, progress_message, tool_result, tool_schemas
from protocol import ToolSchema

if TYPE_CHECKING:
    from mcp import Client

    from master.agents.invocation import InvocationAgent

logger = logging.getLogger("master.agents.mcp_client")

MAX_PAGES = 100
"""``tools/list`` pages read at most (a server that paginates forever cannot hang discovery)."""
MAX_INSTRUCTIONS_CHARS = 2000
"""The server's instructions are kept in the agent's metadata cut to this many characters."""
MAX_ERROR_CHARS = 500
"""Error messages built from exceptions are cut to this many characters."""
LISTEN_RETRY_SECONDS = 5.0
"""Delay before listening again for tool-list changes after the stream dropped."""
CONNECT_MODE = "auto"
"""The SDK's negotiation: ``server/discover`` (2026-07-28), falling back to ``initialize`` (the
2025 revisions most servers still speak). The tests set ``"legacy"`` to drive the older path."""
LISTEN_ACK_TIMEOUT = 10.0
"""Seconds a new session waits for the server to acknowledge its subscription to tool changes."""
CLOSE_TIMEOUT = 10.0
"""Seconds a session has to close (the SDK's own waits are bounded too)."""


def scrub(text: str, headers: Mapping[str, str]) -> str:
    """``text`` with every header value (of 4+ characters) replaced by ``***``, cut to size."""
    for value in sorted(headers.values(), key=len, reverse=True):
        if len(value) >= 4:
            text = text.replace(value, "***")
            for part in value.split():  # "Bearer abc123": the token alone too
                if len(part) >= 8:
                    text = text.replace(part, "***")
    return cap(text, MAX_ERROR_CHARS)


def describe_error(exc: BaseException, headers: Mapping[str, str]) -> str:
    """``Type: message`` of the innermost cause (exception groups unwrapped), header values scrubbed."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    message = str(exc).strip()
    return scrub(f"{type(exc).__name__}: {message}" if message else type(exc).__name__, headers)


def _open_client(
    url: str,
    headers: Mapping[str, str],
    message_handler: Any = None,
    refusals: list[int] | None = None,
    *,
    policy: AgentUrlPolicy,
) -> Client:
    """An SDK client of the server at ``url`` sending ``headers``; the HTTP statuses of 400 and
    above it gets are appended to ``refusals`` (the SDK's error says only that the server refused).
    Its connections go only to addresses the agent URL ``policy`` allowed (a name is resolved
    once, by the policy, and the address it judged is the one connected to)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    from master.agents.policy_transport import PolicyTransport2

    async def note(response: httpx2.Response) -> None:
        if refusals is not None and response.status_code >= 400:
            refusals.append(response.status_code)

    http = httpx2.AsyncClient(
        headers=dict(headers),
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        event_hooks={"response": [note]},
        transport=PolicyTransport2(policy),
    )
    return Client(
        _owned(streamable_http_client(url, http_client=http), http),
        cache=None,
        message_handler=message_handler,
        mode=CONNECT_MODE,
    )


@contextlib.asynccontextmanager
async def _owned(transport: Any, http: Any) -> Any:
    """The transport, closing the HTTP client it was given when it closes."""
    async with http, transport as streams:
        yield streams


async def _list_tools(client: Client) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _metadata(client: Client, skipped: list[str]) -> dict[str, Any]:
    info: dict[str, Any] = {"protocol_version": client.protocol_version}
    server = client.server_info
    if server is not None:
        info["server"] = server.name
        if server.version:
            info["version"] = server.version
        if server.title:
            info["title"] = server.title
    if client.instructions:
        info["instructions"] = cap(client.instructions, MAX_INSTRUCTIONS_CHARS)
    if skipped:
        info["skipped_tools"] = skipped
    return {"mcp": info}


@dataclass(eq=False)
class _Session:
    """One open MCP client session to an agent's server, owned by one task (the SDK's contexts
    must be entered and left in the same task); requests may come from any task."""

    agent_id: str
    url: str
    headers: dict[str, str] = field(repr=False)
    on_tools: Callable[[str, list[ToolSchema]], Any]
    policy: AgentUrlPolicy
    client: Client | None = None
    ready: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    _refreshes: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return self.url, tuple(sorted(self.headers.items()))

    @property
    def alive(self) -> bool:
        return self.task is not None and not self.task.done() and not self.closing.is_set()

    def start(self) -> None:
        # Whoever waited for the session may have given up: its outcome is then read here.
        self.ready.add_done_callback(lambda ready: ready.cancelled() or ready.exception())
        self.task = asyncio.create_task(self._own(), name=f"mcp session {self.agent_id}")

    async def _own(self) -> None:
        try:
            async with _open_client(self.url, self.headers, self._on_message, policy=self.policy) as client:
                self.client = client
                listener = None
                if client.session.discover_result is not None:  # 2026-07-28: listen for changes
                    listening = asyncio.Event()
                    listener = asyncio.create_task(
                        self._listen(client, listening), name=f"mcp listen {self.agent_id}"
                    )
                    # Calls wait for the subscription, so that no change they cause is missed.
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(LISTEN_ACK_TIMEOUT):
                            await listening.wait()
                self.ready.set_result(None)
                try:
                    await self.closing.wait()
                finally:
                    for task in [*self._refreshes, *([listener] if listener else [])]:
                        task.cancel()
                    await asyncio.gather(
                        *self._refreshes, *([listener] if listener else []), return_exceptions=True
                    )
        except asyncio.CancelledError:
            if not self.ready.done():
                self.ready.set_exception(ConnectionError("the session was cancelled while opening"))
            raise
        except Exception as exc:
            if not self.ready.done():
                self.ready.set_exception(exc)
            elif not self.closing.is_set():
                logger.warning(
                    "MCP session of agent %s ended: %s", self.agent_id, describe_error(exc, self.headers)
                )
        finally:
            self.client = None
            self.closing.set()

    async def _listen(self, client: Client, listening: asyncio.Event) -> None:
        from mcp.client.subscriptions import ListenNotSupportedError

        while not self.closing.is_set():
            try:
                async with client.listen(tools_list_changed=True) as subscription:
                    listening.set()
                    async for _event in subscription:
                        await self._refresh(client)
            except ListenNotSupportedError:
                listening.set()
                return
            except Exception as exc:
                listening.set()
                logger.info(
                    "agent %s: listening for tool changes failed (%s); again in %g s",
                    self.agent_id,
                    describe_error(exc, self.headers),
                    LISTEN_RETRY_SECONDS,
                )
            await asyncio.sleep(LISTEN_RETRY_SECONDS)

    async def _on_message(self, message: Any) -> None:
        """Handshake-era servers announce changes with ``notifications/tools/list_changed``."""
        from mcp_types import ToolListChangedNotification

        client = self.client
        if isinstance(message, ToolListChangedNotification) and client is not None:
            task = asyncio.create_task(self._refresh(client), name=f"mcp tools {self.agent_id}")
            self._refreshes.add(task)
            task.add_done_callback(self._refreshes.discard)

    async def _refresh(self, client: Client) -> None:
        try:
            tools, skipped = tool_schemas(await _list_tools(client))
        except Exception as exc:
            logger.warning(
                "agent %s: could not re-list the tools after a change: %s",
                self.agent_id,
                describe_error(exc, self.headers),
            )
            return
        logger.info(
            "agent %s: the MCP server's tools changed: %s",
            self.agent_id,
            ", ".join(t.name for t in tools) or "none",
        )
        try:
            outcome = self.on_tools(self.agent_id, tools)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            logger.exception("agent %s: storing the changed tools failed", self.agent_id)

    async def close(self) -> None:
        self.closing.set()
        if self.task is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CLOSE_TIMEOUT):
                    await asyncio.gather(self.task, return_exceptions=True)


class McpConnector:
    """Discovers, calls and health-checks remote MCP servers (transport ``mcp``)."""

    transport = "mcp"

    def __init__(self, context: ConnectorContext) -> None:
        self._context = context
        self._sessions: dict[str, _Session] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def discover(self, url: str, headers: Mapping[str, str], wait_seconds: float) -> Discovered:
        """Connect, list the tools and describe the server; raises :class:`ConnectorError`."""
        refusals: list[int] = []
        try:
            async with asyncio.timeout(wait_seconds):
                async with _open_client(
                    url, headers, refusals=refusals, policy=self._context.url_policy
                ) as client:
                    tools, skipped = tool_schemas(await _list_tools(client))
                    metadata = _metadata(client, skipped)
        except TimeoutError:
            raise ConnectorError(
                f"the MCP server at {url} did not answer within {wait_seconds:g} s"
            ) from None
        except Exception as exc:
            why = describe_error(exc, headers)
            if refusals:
                hint = " (check mcp_headers)" if refusals[-1] in (401, 403) else ""
                why = f"it answered HTTP {refusals[-1]}{hint}; {why}"
            raise ConnectorError(f"cannot list the tools of the MCP server at {url}: {why}") from None
        if skipped:
            logger.warning("the MCP server at %s has tools the hub cannot name: %s", url, ", ".join(skipped))
        return Discovered(tools=tools, metadata=metadata)  # no tools yet: they may come with a change

    async def call(
        self,
        agent: InvocationAgent,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        wait_seconds: float,
        on_progress: ProgressSink,
    ) -> Any:
        """``tools/call`` on the agent's session; raises :class:`ToolFailed` or :class:`AgentUnavailable`."""
        from mcp.shared.exceptions import MCPError

        headers = _headers(agent)
        session = await self._session(agent, wait_seconds)
        client = session.client
        if client is None:
            raise AgentUnavailable(f"the MCP server of agent {agent.agent_id!r} closed the session")

        async def relay(progress: float, total: float | None, message: str | None) -> None:
            on_progress(progress_message(progress, total, message), progress_fraction(progress, total))

        try:
            result = await client.call_tool(tool_name, arguments, progress_callback=relay)
        except MCPError as exc:
            # "Connection closed", or a server that restarted and forgot the session: the session is gone.
            if not session.alive or exc.code == -32000 or exc.message == "Session terminated":
                await self._drop(agent.agent_id, session)
                raise AgentUnavailable(
                    f"the MCP server of agent {agent.agent_id!r} closed the connection while running "
                    f"{tool_name!r}: {scrub(exc.message, headers)}"
                ) from None
            raise ToolFailed(
                f"tool {tool_name!r} on agent {agent.agent_id!r} failed: MCP error {exc.code}: "
                f"{scrub(exc.message, headers)}"
            ) from None
        except Exception as exc:
            await self._drop(agent.agent_id, session)
            raise AgentUnavailable(
                f"the MCP server of agent {agent.agent_id!r} is unreachable at {agent.base_url} "
                f"({describe_error(exc, headers)})"
            ) from None
        try:
            return tool_result(result)
        except ToolError as exc:
            raise ToolFailed(
                f"tool {tool_name!r} on agent {agent.agent_id!r} failed: {scrub(str(exc), headers)}"
            ) from None

    async def check(self, agent: InvocationAgent, wait_seconds: float) -> str | None:
        """``None`` when the server answers a cheap request within ``wait_seconds``, else why not.

        A failure on the kept session is retried once on a new one (the server may have
        restarted and forgotten the session)."""
        headers = _headers(agent)
        error = ""
        for _attempt in range(2):
            try:
                async with asyncio.timeout(wait_seconds):
                    session = await self._session(agent, wait_seconds)
                    client = session.client
                    if client is None:
                        raise ConnectionError("the session closed")
                    if client.session.discover_result is not None:  # 2026-07-28: no ping
                        await client.session.send_discover(client.protocol_version)
                    else:
                        await client.session.send_ping()  # (Client.send_ping warns: 2025 revisions only)
                return None
            except TimeoutError:
                error = f"the MCP server did not answer within {wait_seconds:g} s"
            except Exception as exc:
                error = describe_error(exc, headers)
            stale = self._sessions.get(agent.agent_id)
            if stale is not None:
                await self._drop(agent.agent_id, stale)
        return error

    async def forget(self, agent_id: str) -> None:
        """Close the session of an agent that was unregistered."""
        session = self._sessions.get(agent_id)
        if session is not None:
            await self._drop(agent_id, session)
        self._locks.pop(agent_id, None)

    async def aclose(self) -> None:
        sessions = list(self._sessions.values())
        self._sessions.clear()
        await asyncio.gather(*(session.close() for session in sessions), return_exceptions=True)

    async def _session(self, agent: InvocationAgent, wait_seconds: float) -> _Session:
        """The agent's open session, opened now when it has none (or its URL or headers changed)."""
        headers = _headers(agent)
        lock = self._locks.setdefault(agent.agent_id, asyncio.Lock())
        async with lock:
            session = self._sessions.get(agent.agent_id)
            if session is not None and (
                not session.alive or session.key != (agent.base_url, tuple(sorted(headers.items())))
            ):
                await self._drop(agent.agent_id, session)
                session = None
            if session is None:
                session = _Session(
                    agent.agent_id,
                    agent.base_url,
                    headers,
                    self._context.tools_changed,
                    self._context.url_policy,
                )
                session.start()
                self._sessions[agent.agent_id] = session
            try:
                async with asyncio.timeout(wait_seconds):
                    await asyncio.shield(session.ready)
            except TimeoutError:
                await self._drop(agent.agent_id, session)
                raise AgentUnavailable(
                    f"the MCP server of agent {agent.agent_id!r} did not answer within {wait_seconds:g} s"
                ) from None
            except Exception as exc:
                await self._drop(agent.agent_id, session)
                raise AgentUnavailable(
                    f"the MCP server of agent {agent.agent_id!r} is unreachable at {agent.base_url} "
                    f"({describe_error(exc, headers)})"
                ) from None
            return session

    async def _drop(self, agent_id: str, session: _Session) -> None:
        if self._sessions.get(agent_id) is session:
            del self._sessions[agent_id]
        await session.close()


def _headers(agent: InvocationAgent) -> dict[str, str]:
    return dict(getattr(agent, "headers", None) or {})
