"""Action agents: expose tools that the master's orchestrator calls over WebSocket.

Pass a handler function::

    from openagent import OrchestratorActionAgent, ToolError, ToolSchema, run_action_agent

    TOOLS = [ToolSchema(name="get_weather", description="Weather of a city",
                        parameters={"type": "object", "properties": {"city": {"type": "string"}}})]

    async def handle_tool(tool_name, arguments, *, progress_callback=None):
        if progress_callback:
            await progress_callback("looking it up", 0.5)
        if arguments.get("city") != "Paris":
            raise ToolError(f"no weather for {arguments.get('city')!r}")
        return {"city": "Paris", "forecast": "sunny"}

    run_action_agent(OrchestratorActionAgent("weather-agent", TOOLS, handle_tool))

or subclass :class:`OrchestratorWebSocketActionAgent` and implement
:meth:`~OrchestratorWebSocketActionAgent.handle_tool`.

Every ``tool_call`` runs in its own task, so calls run concurrently. What the handler
returns becomes the ``result`` of a successful ``tool_result``; what it raises
becomes a failed one: a :class:`~openagent.errors.ToolError`'s message as is, any
other exception as ``"<ExceptionType>: <message>"`` (logged with its traceback).
The agent keeps serving either way. When the master sends ``tool_cancel`` for a call (its
caller cancelled it: an MCP client, a stopped query), the call's task is cancelled: the handler
gets :class:`asyncio.CancelledError` at its next ``await`` (clean up in ``finally``), and no
result is sent.

When the connection drops, the agent reconnects and registers again on its own.
Calls in flight keep running; a result that is ready once the agent is back is sent
(the master may already have given up on it), one ready before is dropped with a
warning. :meth:`~OrchestratorWebSocketActionAgent.stop` cancels them.

With a ``collaboration_handler``, each ``collaboration_start`` runs the handler in its
own task with a :class:`~openagent.collaboration.CollaborationContext`; see
:mod:`openagent.collaboration` for how a session ends.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from pydantic import BaseModel, ValidationError

from openagent._handlers import (
    ProgressCallback,
    ToolFunction,
    ToolHandler,
    check_progress,
    run_tool_call,
    validate_tools,
)
from openagent._runner import run_until_signalled
from openagent.client import AgentClient
from openagent.collaboration import CollaborationHandler, CollaborationSessions
from openagent.config import ClientConfig
from openagent.errors import ConfigurationError, ConnectionLostError, OpenAgentError
from protocol import (
    AGENT_ID_PATTERN,
    CollaborationEnd,
    CollaborationStart,
    ErrorMessage,
    Message,
    PeerMessage,
    Register,
    ToolCall,
    ToolCancel,
    ToolProgress,
    ToolResult,
    ToolSchema,
)

__all__ = [
    "OrchestratorActionAgent",
    "OrchestratorWebSocketActionAgent",
    "ProgressCallback",
    "ToolHandler",
    "run_action_agent",
]

logger = logging.getLogger("openagent.action")


class OrchestratorWebSocketActionAgent:
    """An action agent: registers its tools with the master and answers ``tool_call`` frames.

    Subclass it and implement :meth:`handle_tool`, or use :class:`OrchestratorActionAgent`
    with a handler function.

    Args:
        agent_id: Unique id on the master (letters, digits, ``. _ : -``; up to 128).
        tools: The tools, as :class:`~protocol.ToolSchema` or dicts of the same shape.
        metadata: Free-form description sent with ``register``.
        config: Connection settings; :meth:`ClientConfig.from_env` when omitted.
        instance: This copy's replica name. Copies of one agent id with different instances
            (on one master or several) all serve its calls, balanced by the master; a copy
            that connects with a live instance replaces it. Default: the environment's
            ``OPENAGENT_AGENT_INSTANCE``, else none (a new copy replaces the old one).

    Raises:
        ConfigurationError: Invalid ``agent_id`` or ``instance``, an invalid or duplicate
            tool, or ``handle_tool`` not implemented.
    """

    collaboration_handler: CollaborationHandler | None = None
    """Runs each collaboration session (set by :class:`OrchestratorActionAgent`)."""

    def __init__(
        self,
        agent_id: str,
        tools: Sequence[ToolSchema | Mapping[str, Any]],
        *,
        metadata: Mapping[str, Any] | None = None,
        config: ClientConfig | None = None,
        instance: str | None = None,
    ) -> None:
        if type(self).handle_tool is OrchestratorWebSocketActionAgent.handle_tool:
            raise ConfigurationError(
                f"agent {agent_id!r}: subclass OrchestratorWebSocketActionAgent and implement handle_tool(),"
                " or use OrchestratorActionAgent(agent_id, tools, tool_handler)"
            )
        schemas = validate_tools(agent_id, tools)
        if instance is None:
            instance = os.environ.get("OPENAGENT_AGENT_INSTANCE") or None
        try:
            self._register = Register(
                agent_id=agent_id,
                role="action",
                tools=schemas,
                metadata=dict(metadata or {}),
                instance=instance,
            )
        except ValidationError:
            raise ConfigurationError(
                f"invalid agent_id {agent_id!r} or instance {instance!r}: each must match {AGENT_ID_PATTERN}"
            ) from None
        self.config = config if config is not None else ClientConfig.from_env()
        self._tool_names = frozenset(tool.name for tool in schemas)
        self._client: AgentClient | None = None
        self._calls: dict[str, asyncio.Task[None]] = {}
        self._collaborations = CollaborationSessions(agent_id, self._send_frame)

    @property
    def agent_id(self) -> str:
        """The agent's id on the master."""
        return self._register.agent_id

    @property
    def tools(self) -> list[ToolSchema]:
        """The validated tools, as registered."""
        return list(self._register.tools)

    async def calls_done(self) -> None:
        """Return once the tool calls running now have ended and their results were sent
        (cancelling the wait leaves the calls running)."""
        if self._calls:
            await asyncio.wait(set(self._calls.values()))

    @property
    def registered(self) -> bool:
        """Whether the agent is connected and registered right now (false while reconnecting)."""
        return self._client is not None and self._client.connected

    async def handle_tool(
        self, tool_name: str, arguments: dict[str, Any], *, progress_callback: ProgressCallback
    ) -> Any:
        """Run one tool call and return its JSON-serialisable result. Subclasses implement it.

        Args:
            tool_name: One of the agent's tool names (unknown names never get here).
            arguments: The arguments object chosen by the model.
            progress_callback: Sends ``tool_progress`` frames for this call.

        Raises:
            ToolError: To fail the call with a clean message for the model.
        """
        raise NotImplementedError(f"{type(self).__name__}.handle_tool() is not implemented")

    async def start(self) -> None:
        """Connect and register; return once registered. Calls are served in the background.

        Raises:
            ConnectionFailedError, AuthenticationError, RegistrationError: See
                :meth:`AgentClient.connect <openagent.client.AgentClient.connect>`.
            ConfigurationError: The agent is already started.
        """
        if self._client is not None:
            raise ConfigurationError(f"agent {self.agent_id!r} is already started")
        self._client = AgentClient(
            self._register, config=self.config, on_message=self._on_message, on_disconnect=self._on_disconnect
        )
        try:
            await self._client.connect()
        except BaseException:
            self._client = None
            raise
        logger.info("action agent %s serving tools: %s", self.agent_id, ", ".join(sorted(self._tool_names)))

    async def run(self) -> None:
        """Start (unless started) and serve until :meth:`stop` or a fatal error.

        Raises:
            AuthenticationError: The master refused the API key.
            AgentReplacedError: Another process registered the same ``agent_id``.
            ConnectionFailedError, RegistrationError: The first connection failed.
        """
        if self._client is None:
            await self.start()
        assert self._client is not None
        try:
            await self._client.wait_closed()
        finally:
            await self.stop()

    async def stop(self) -> None:
        """Close the connection, then cancel the tool calls in flight. Safe to call twice."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()  # first, so that no new call starts while the others are cancelled
        await self._collaborations.aclose()
        calls = list(self._calls.values())
        for task in calls:
            task.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        if client is not None:
            logger.info("action agent %s stopped", self.agent_id)

    async def __aenter__(self) -> OrchestratorWebSocketActionAgent:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # ------------------------------------------------------------------ serving

    async def _on_message(self, message: Message) -> None:
        if isinstance(message, ToolCall):
            assert self._client is not None  # frames arrive only between start() and stop()
            serve = self._serve_call(message, self._client)
            call_id = message.call_id
            task = asyncio.create_task(serve, name=f"openagent-call-{call_id}")
            self._calls[call_id] = task
            task.add_done_callback(lambda done: self._forget_call(call_id, done))
        elif isinstance(message, ToolCancel):
            running = self._calls.get(message.call_id)
            if running is not None:
                logger.info(
                    "agent %s cancels call %s: %s",
                    self.agent_id,
                    message.call_id,
                    message.reason or "cancelled",
                )
                running.cancel()
        elif isinstance(message, ErrorMessage):
            self._collaborations.note_error(message)
            logger.warning(
                "master error for agent %s: %s (%s, ref %s)",
                self.agent_id,
                message.message,
                message.code,
                message.ref,
            )
        elif isinstance(message, CollaborationStart | PeerMessage | CollaborationEnd):
            self._collaborations.dispatch(message, self.collaboration_handler)
        else:
            logger.debug("agent %s ignores %s frame", self.agent_id, message.type)

    def _forget_call(self, call_id: str, task: asyncio.Task[None]) -> None:
        if self._calls.get(call_id) is task:
            del self._calls[call_id]

    async def _on_disconnect(self, error: OpenAgentError) -> None:
        self._collaborations.connection_lost(error)

    async def _send_frame(self, message: BaseModel) -> None:
        client = self._client
        if client is None:
            raise ConnectionLostError(f"agent {self.agent_id!r} is not started")
        await client.send(message)

    async def _serve_call(self, call: ToolCall, client: AgentClient) -> None:
        result = await self._execute(call, client)
        try:
            await client.send(result)
        except ConnectionLostError as exc:
            logger.warning("could not send the result of call %s (%s): %s", call.call_id, call.tool_name, exc)

    async def _execute(self, call: ToolCall, client: AgentClient) -> ToolResult:
        if call.tool_name not in self._tool_names:
            logger.warning("agent %s got a call of unknown tool %s", self.agent_id, call.tool_name)
            error = f"unknown tool {call.tool_name!r} on agent {self.agent_id!r}"
            return ToolResult(call_id=call.call_id, success=False, error=error)
        progress_callback = _progress_sender(client, call.call_id)
        return await run_tool_call(
            call.call_id,
            call.tool_name,
            lambda: self.handle_tool(call.tool_name, call.arguments, progress_callback=progress_callback),
            logger,
            agent_id=self.agent_id,
            traceparent=call.traceparent,
        )


class OrchestratorActionAgent(OrchestratorWebSocketActionAgent):
    """An action agent whose tool calls go to a handler function.

    Args:
        agent_id: Unique id on the master.
        tools: The tools, as :class:`~protocol.ToolSchema` or dicts.
        tool_handler: ``handler(tool_name, arguments, ...)``, an ``async def`` or a plain
            function (run in a worker thread with :func:`asyncio.to_thread`).
        collaboration_handler: ``async def handler(ctx: CollaborationContext) -> str``: takes
            part in collaboration sessions (one task per session); sets
            ``metadata["supports_collaboration"]``. See :mod:`openagent.collaboration`.
        metadata: Free-form description sent with ``register``.
        config: Connection settings; :meth:`ClientConfig.from_env` when omitted.
        instance: This copy's replica name (see :class:`OrchestratorWebSocketActionAgent`).

    How the handler gets its progress callback, decided once from its signature:

    - a parameter named ``progress_callback`` gets it under that name (WebSocket style);
    - a parameter named ``progress`` gets it under that name (invocation-agent style);
      a handler declaring both gets it twice;
    - a handler declaring neither but taking ``**kwargs`` gets both names;
    - any other handler is called as ``handler(tool_name, arguments)``.

    An async handler gets an async :class:`ProgressCallback`; a plain function gets a
    blocking one with the same arguments (``progress_callback("half way", 0.5)``). A
    plain function cannot be interrupted: :meth:`stop` stops waiting for it, but its
    thread runs to the end.
    """

    def __init__(
        self,
        agent_id: str,
        tools: Sequence[ToolSchema | Mapping[str, Any]],
        tool_handler: ToolHandler,
        *,
        collaboration_handler: CollaborationHandler | None = None,
        metadata: Mapping[str, Any] | None = None,
        config: ClientConfig | None = None,
        instance: str | None = None,
    ) -> None:
        metadata = dict(metadata or {})
        if collaboration_handler is not None:
            if not callable(collaboration_handler):
                raise ConfigurationError(
                    f"collaboration_handler of agent {agent_id!r} is not callable: {collaboration_handler!r}"
                )
            metadata["supports_collaboration"] = True
        super().__init__(agent_id, tools, metadata=metadata, config=config, instance=instance)
        self.tool_handler = tool_handler
        self.collaboration_handler = collaboration_handler
        self._tool_function = ToolFunction(agent_id, tool_handler)

    async def handle_tool(
        self, tool_name: str, arguments: dict[str, Any], *, progress_callback: ProgressCallback
    ) -> Any:
        """Call ``tool_handler`` as described in the class docstring and return its result."""
        return await self._tool_function(tool_name, arguments, progress_callback)


def run_action_agent(agent: OrchestratorWebSocketActionAgent) -> None:
    """Run an action agent until Ctrl-C or SIGTERM: the entry point of agent scripts.

    Configures ``logging.basicConfig(level=INFO)`` when logging is not configured yet,
    then runs :meth:`~OrchestratorWebSocketActionAgent.run` in a new event loop. Ctrl-C
    and SIGTERM stop the agent cleanly and return. Must not be called from a running
    event loop (``await agent.run()`` there instead).

    Raises:
        OpenAgentError: What stopped the agent otherwise, e.g. ``AgentReplacedError``.
    """
    run_until_signalled(agent, kind="action agent", log=logger)


def _progress_sender(client: AgentClient, call_id: str) -> ProgressCallback:
    async def progress_callback(message: str, progress: float | None = None) -> None:
        check_progress(progress)
        try:
            await client.send(ToolProgress(call_id=call_id, message=message, progress=progress))
        except ConnectionLostError as exc:
            logger.warning("dropping progress of call %s: %s", call_id, exc)

    return progress_callback
