"""MCP servers as hub agents: bridge a local (stdio) MCP server to the master.

``openagent mcp-bridge --agent-id time -- python -m mcp_server_time`` (or :class:`McpBridge`
from Python) starts the MCP server as a child process, lists its tools, and connects them to
the master as one WebSocket action agent (:class:`~openagent.action.OrchestratorActionAgent`),
so reconnecting, backoff, keepalive and progress work as for any agent::

    import asyncio
    from openagent.mcp import McpBridge

    asyncio.run(McpBridge("time", ["python", "-m", "mcp_server_time"]).run())

Each ``tool_call`` becomes an MCP ``tools/call``; the server's progress notifications become
``tool_progress`` frames, a result with ``isError`` a failed call carrying the server's text.
When the child exits, the agent leaves the hub (its WebSocket closes, so its tools stop
being offered) and the bridge starts the child again after a backoff delay, saying so in its
log; a child that ran for a while restarts after the shortest delay again. When the server says
its tools changed, the calls in flight finish and the agent registers again with the new list.

The helpers :func:`tool_schema` and :func:`tool_result` translate MCP tools and results to the
hub's shapes; the master uses the same ones for remote (Streamable HTTP) MCP servers.

Needs the ``mcp`` extra: ``pip install 'openagent[mcp]'``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from openagent._backoff import backoff_delays
from openagent.action import OrchestratorActionAgent
from openagent.config import ClientConfig
from openagent.errors import (
    AgentReplacedError,
    AuthenticationError,
    ConfigurationError,
    ConnectionFailedError,
    OpenAgentError,
    RegistrationError,
    ToolError,
)
from protocol import AGENT_ID_PATTERN, ToolSchema

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client._transport import Transport, TransportStreams

__all__ = ["McpBridge", "McpServerExited", "progress_fraction", "tool_result", "tool_schema"]

logger = logging.getLogger("openagent.mcp")

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""Tool names the hub accepts (OpenAI function names); MCP allows more (``.``, ``/``)."""
STABLE_RUN_SECONDS = 30.0
"""A child that ran at least this long restarts after the shortest delay again."""
MAX_ERROR_CHARS = 2000
"""An MCP error text is cut to this many characters."""


class McpServerExited(OpenAgentError):
    """The MCP server's process exited (or closed its output) while the bridge was serving it."""


def require_mcp() -> None:
    """Import the ``mcp`` SDK, or raise :class:`ConfigurationError` saying how to install it."""
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(
            f"MCP support needs the 'mcp' extra: pip install 'openagent[mcp]' (missing: {exc.name or exc})"
        ) from None


# ---------------------------------------------------------------------------------- translation


def tool_schema(tool: Any) -> ToolSchema | None:
    """An MCP ``Tool`` as the hub's :class:`~protocol.ToolSchema` (with its annotations), or
    ``None`` when its name is not a valid hub tool name (letters, digits, ``_``, ``-``; 1-64).

    A tool whose annotations say ``destructiveHint: true`` requires a person's approval of each
    call (``OPENAGENT_APPROVAL_EXEMPT`` on the master lifts it)."""
    if not isinstance(tool.name, str) or not TOOL_NAME.fullmatch(tool.name):
        return None
    annotations = None
    if tool.annotations is not None:
        annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True, mode="json") or None
    schema = dict(tool.input_schema or {})
    schema.setdefault("type", "object")
    return ToolSchema(
        name=tool.name,
        description=tool.description or tool.title or "",
        parameters=schema,
        annotations=annotations,
        requires_approval=bool(annotations and annotations.get("destructiveHint") is True),
    )


def tool_schemas(tools: Sequence[Any]) -> tuple[list[ToolSchema], list[str]]:
    """(the usable tools, the names of those skipped because the hub cannot name them)."""
    usable, skipped = [], []
    for tool in tools:
        schema = tool_schema(tool)
        if schema is None:
            skipped.append(str(tool.name))
        else:
            usable.append(schema)
    return usable, skipped


def _text(content: Sequence[Any]) -> str:
    parts = []
    for block in content:
        text = getattr(block, "text", None)
        if isinstance(text, str):
            parts.append(text)
        else:
            parts.append(f"[{getattr(block, 'type', 'content')}]")
    return "\n".join(parts)


def tool_result(result: Any) -> Any:
    """The JSON value of an MCP ``CallToolResult``: its structured content when there is some,
    else the text of a lone text block (parsed when it is JSON), else the content blocks as dicts.

    Raises:
        ToolError: The result has ``isError``; the message is the server's text.
    """
    if result.is_error:
        message = _text(result.content).strip() or "the MCP server reported an error without a message"
        raise ToolError(message[:MAX_ERROR_CHARS])
    if result.structured_content is not None:
        return result.structured_content
    blocks = list(result.content)
    if len(blocks) == 1 and getattr(blocks[0], "type", None) == "text":
        text: str = blocks[0].text
        with contextlib.suppress(ValueError):
            return json.loads(text)
        return text
    return [block.model_dump(by_alias=True, exclude_none=True, mode="json") for block in blocks]


def progress_fraction(progress: float, total: float | None) -> float | None:
    """MCP's ``progress`` of ``total`` as a fraction 0..1 (``None`` when the total is unknown)."""
    if not total or total <= 0:
        return None
    return min(max(progress / total, 0.0), 1.0)


def progress_message(progress: float, total: float | None, message: str | None) -> str:
    """The message of an MCP progress notification, or ``progress/total`` when it has none."""
    if message:
        return message
    return f"{progress:g}/{total:g}" if total else f"{progress:g}"


# ---------------------------------------------------------------------------------- the bridge


@contextlib.asynccontextmanager
async def watched(transport: Transport, ended: asyncio.Event) -> AsyncIterator[TransportStreams]:
    """``transport``'s streams, with ``ended`` set once the server's side closes (the child exited).

    The SDK notices a dead stdio server only when the next request fails; the bridge must
    notice at once, to take the agent off the hub.
    """
    import anyio
    from mcp.shared.message import SessionMessage

    async with transport as (read, write):
        sender, receiver = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def pump() -> None:
            try:
                async with sender:
                    async for item in read:
                        await sender.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                pass
            finally:
                ended.set()

        async with anyio.create_task_group() as group:
            group.start_soon(pump)
            try:
                yield receiver, write
            finally:
                group.cancel_scope.cancel()


class McpBridge:
    """A stdio MCP server, run as a child process, connected to the master as one action agent.

    Args:
        agent_id: The agent's id on the master.
        command: The server's command line, e.g. ``["python", "-m", "mcp_server_time"]``.
        config: Connection settings; :meth:`ClientConfig.from_env` when omitted.
        env: Extra environment variables for the child (merged over the SDK's safe defaults:
            ``HOME``, ``PATH``...; the bridge's own environment is not passed on).
        cwd: The child's working directory.
        restart_initial_delay: First delay before restarting a child that exited; doubles
            after each quick exit.
        restart_max_delay: Upper bound of that delay.
        start_timeout: Seconds the child has to answer the MCP handshake and ``tools/list``.

    Raises:
        ConfigurationError: An empty command, an invalid ``agent_id``, or no ``mcp`` package.
    """

    def __init__(
        self,
        agent_id: str,
        command: Sequence[str],
        *,
        config: ClientConfig | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        restart_initial_delay: float = 1.0,
        restart_max_delay: float = 30.0,
        start_timeout: float = 60.0,
    ) -> None:
        require_mcp()
        if not command or not command[0]:
            raise ConfigurationError(
                "mcp-bridge needs the MCP server's command, e.g. -- python -m mcp_server_time"
            )
        if not 0 < restart_initial_delay <= restart_max_delay:
            raise ConfigurationError(
                f"restart delays must satisfy 0 < initial ({restart_initial_delay!r}) <= max ({restart_max_delay!r})"
            )
        if not re.fullmatch(AGENT_ID_PATTERN, agent_id):
            raise ConfigurationError(f"invalid agent_id {agent_id!r}: must match {AGENT_ID_PATTERN}")
        self.agent_id = agent_id
        self.command = list(command)
        self.config = config if config is not None else ClientConfig.from_env()
        self.env = dict(env or {})
        self.cwd = cwd
        self.restart_initial_delay = restart_initial_delay
        self.restart_max_delay = restart_max_delay
        self.start_timeout = start_timeout
        self.starts = 0
        """How many times the child was started."""
        self.agent: OrchestratorActionAgent | None = None
        """The agent serving the current child (``None`` between children)."""
        self.serving = asyncio.Event()
        """Set while the current child's agent is registered with the master."""
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        """Ask :meth:`run` to take the agent off the hub, stop the child and return."""
        self._stopping.set()

    async def run(self) -> None:
        """Serve the MCP server until :meth:`stop`; restart it with backoff when it exits.

        Raises:
            AuthenticationError: The master refused the API key.
            AgentReplacedError: Another process registered the same ``agent_id``.
            RegistrationError: The master refused the registration (e.g. a tool schema).
        """
        delays = backoff_delays(self.restart_initial_delay, self.restart_max_delay)
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                await self._serve_child()
                reason = "exited"
            except (AuthenticationError, AgentReplacedError, RegistrationError):
                raise
            except McpServerExited:
                reason = "exited"
            except ConnectionFailedError as exc:
                reason = f"was stopped: the master is unreachable ({exc})"
            except (OSError, TimeoutError) as exc:
                reason = f"failed: {exc or type(exc).__name__}"
            except Exception as exc:  # an MCPError from the handshake, a broken server...
                reason = f"failed: {type(exc).__name__}: {exc}"
            if self._stopping.is_set():
                break
            if time.monotonic() - started >= STABLE_RUN_SECONDS:
                delays = backoff_delays(self.restart_initial_delay, self.restart_max_delay)
            delay = next(delays)
            logger.warning(
                "MCP server of agent %s %s; agent %s left the hub; restarting the server in %.1f s",
                self.agent_id,
                reason,
                self.agent_id,
                delay,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)
        logger.info("MCP bridge of agent %s stopped", self.agent_id)

    async def _serve_child(self) -> None:
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client
        from mcp_types import ToolListChangedNotification

        params = StdioServerParameters(
            command=self.command[0], args=self.command[1:], env=self.env or None, cwd=self.cwd
        )
        ended, changed = asyncio.Event(), asyncio.Event()

        async def on_message(message: Any) -> None:  # servers of the 2025 revisions announce changes
            if isinstance(message, ToolListChangedNotification):
                changed.set()

        self.starts += 1
        logger.info("starting MCP server for agent %s: %s", self.agent_id, " ".join(self.command))
        client = Client(watched(stdio_client(params), ended), cache=None, message_handler=on_message)
        try:
            await self._serve(client, ended, changed)
        except Exception as exc:
            # The SDK reports a vanished child as whatever its streams raised (an exception group).
            if ended.is_set() and not self._stopping.is_set() and not isinstance(exc, McpServerExited):
                raise McpServerExited(f"the MCP server ({self.command[0]}) exited") from exc
            raise

    async def _serve(self, mcp_client: Client, ended: asyncio.Event, changed: asyncio.Event) -> None:
        async with mcp_client as client:
            listener = None
            if client.session.discover_result is not None:  # 2026-07-28: subscribe to changes
                listener = asyncio.create_task(
                    _listen(client, changed, agent_id=self.agent_id), name=f"mcp-listen-{self.agent_id}"
                )
            try:
                while not await self._serve_tools(client, ended, changed):
                    changed.clear()
                    logger.info(
                        "agent %s: the MCP server's tools changed; registering them again", self.agent_id
                    )
            finally:
                if listener is not None:
                    listener.cancel()
                    await asyncio.gather(listener, return_exceptions=True)

    async def _serve_tools(self, client: Client, ended: asyncio.Event, changed: asyncio.Event) -> bool:
        """Serve the server's current tools as the agent until the child exits or the bridge stops
        (True), or until the server says its tools changed (False: serve them again)."""
        async with asyncio.timeout(self.start_timeout):
            tools = await _list_tools(client)
        schemas, skipped = tool_schemas(tools)
        if skipped:
            logger.warning(
                "agent %s: skipped MCP tools whose names the hub cannot use: %s",
                self.agent_id,
                ", ".join(skipped),
            )
        info = client.server_info
        metadata: dict[str, Any] = {
            "mcp": {"transport": "stdio", "protocol_version": client.protocol_version}
        }
        if info is not None:
            metadata["mcp"].update(server=info.name, version=info.version)
        agent = OrchestratorActionAgent(
            self.agent_id, schemas, _handler(client), metadata=metadata, config=self.config
        )
        await agent.start()
        self.agent = agent
        self.serving.set()
        serving = asyncio.create_task(agent.run(), name=f"mcp-bridge-{self.agent_id}")
        died = asyncio.create_task(ended.wait(), name=f"mcp-child-{self.agent_id}")
        stopping = asyncio.create_task(self._stopping.wait(), name=f"mcp-stop-{self.agent_id}")
        change = asyncio.create_task(changed.wait(), name=f"mcp-change-{self.agent_id}")
        try:
            await asyncio.wait({serving, died, stopping, change}, return_when=asyncio.FIRST_COMPLETED)
            if change.done() and not (serving.done() or died.done() or stopping.done()):
                await _calls_done(agent, self.start_timeout)  # e.g. the call that changed the tools
        finally:
            self.serving.clear()
            self.agent = None
            for task in (died, stopping, change):
                task.cancel()
            await agent.stop()  # the agent leaves the hub before the child is stopped or re-listed
            await asyncio.gather(serving, died, stopping, change, return_exceptions=True)
        if serving.done() and not serving.cancelled() and serving.exception() is not None:
            raise serving.exception()  # type: ignore[misc]
        if died.done() and not died.cancelled() and not self._stopping.is_set():
            raise McpServerExited(f"the MCP server ({self.command[0]}) exited")
        return not (change.done() and not change.cancelled()) or self._stopping.is_set()


async def _calls_done(agent: OrchestratorActionAgent, wait_seconds: float) -> None:
    """Wait (at most ``wait_seconds``) for the agent's calls in flight to end."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(wait_seconds):
            await agent.calls_done()


_LISTEN_RETRY_FIRST = 5.0
"""Seconds before listening for tool changes again after a first failure; doubled at each
failure (with jitter, :func:`openagent._backoff.backoff_delays`)."""
_LISTEN_RETRY_MAX = 300.0
"""The longest wait between two attempts to listen for tool changes."""
_METHOD_NOT_FOUND = -32601


async def _listen(
    client: Client,
    changed: asyncio.Event,
    *,
    agent_id: str = "",
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Set ``changed`` at each tool-list change a 2026-07-28 server announces.

    A server without list-change subscriptions (an older protocol, or one that answers
    "method not found") is said once and not asked again; any other failure is retried with
    a doubling wait (5 s up to 5 min), warned about once until a subscription works again.
    """
    from mcp.client.subscriptions import ListenNotSupportedError
    from mcp.shared.exceptions import MCPError

    delays = backoff_delays(_LISTEN_RETRY_FIRST, _LISTEN_RETRY_MAX)
    warned = False
    while True:
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                delays, warned = backoff_delays(_LISTEN_RETRY_FIRST, _LISTEN_RETRY_MAX), False
                async for _event in subscription:
                    changed.set()
        except ListenNotSupportedError:
            return
        except MCPError as exc:
            if exc.code == _METHOD_NOT_FOUND:
                logger.warning(
                    "agent %s: the MCP server has no list-change subscriptions (%s); its tools are "
                    "read again only when it restarts",
                    agent_id,
                    exc,
                )
                return
            warned = _listen_failed(agent_id, exc, warned)
        except Exception as exc:
            warned = _listen_failed(agent_id, exc, warned)
        await sleep(next(delays))


def _listen_failed(agent_id: str, exc: Exception, warned: bool) -> bool:
    """Log a failure to listen for tool changes: a warning the first time, then debug lines."""
    if warned:
        logger.debug("agent %s: listening for tool changes failed again (%s)", agent_id, exc)
    else:
        logger.warning(
            "agent %s: listening for the MCP server's tool changes failed (%s); retrying with "
            "back-off up to %g s, without repeating this warning",
            agent_id,
            exc,
            _LISTEN_RETRY_MAX,
        )
    return True


async def _list_tools(client: Client) -> list[Any]:
    """Every tool, page by page (at most 100 pages)."""
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _handler(client: Client) -> Any:
    from mcp.shared.exceptions import MCPError

    async def handle_tool(tool_name: str, arguments: dict[str, Any], *, progress_callback: Any) -> Any:
        async def relay(progress: float, total: float | None, message: str | None) -> None:
            await progress_callback(
                progress_message(progress, total, message), progress_fraction(progress, total)
            )

        try:
            result = await client.call_tool(tool_name, arguments, progress_callback=relay)
        except MCPError as exc:
            raise ToolError(f"MCP error {exc.code}: {exc.message}"[:MAX_ERROR_CHARS]) from None
        return tool_result(result)

    return handle_tool
