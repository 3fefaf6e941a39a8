"""Query agents: ask the master's orchestrator questions over WebSocket.

::

    from openagent import QueryClient

    async with QueryClient() as client:
        result = await client.query("What's the weather in Paris?")
        if result.success:
            print(result.answer, result.agents_used)
        follow_up = await client.query("And tomorrow?", session_id=result.session_id)

One client can run many queries at once (``asyncio.gather``); each is matched to its
answer by a generated ``query_id``.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import uuid
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from pydantic import ValidationError

from openagent.client import AgentClient
from openagent.config import ClientConfig
from openagent.errors import (
    ConfigurationError,
    ConnectionLostError,
    OpenAgentError,
    QueryError,
    QueryTimeoutError,
)
from protocol import (
    ErrorMessage,
    Message,
    Query,
    QueryRequest,
    QueryResult,
    Register,
    RunEventFrame,
    ToolProgress,
)

__all__ = ["ProgressHandler", "QueryClient", "RunEventHandler"]

logger = logging.getLogger("openagent.query")

ProgressHandler = Callable[[ToolProgress], Awaitable[None]]
"""``async def on_progress(update)``: a ``tool_progress`` the master relays while tools run."""

RunEventHandler = Callable[[RunEventFrame], Awaitable[None]]
"""``async def on_event(frame)``: one event of a query as it runs (``frame.query_id`` names the
query, ``frame.event`` is a :data:`protocol.RunEvent`: ``step``, ``tool_call``, ``plan``, ...)."""

_QUERY_FIELDS = frozenset(QueryRequest.model_fields) - {"query", "session_id"}


class QueryClient:
    """A query agent: sends ``query`` frames and awaits their ``query_result``.

    Args:
        agent_id: Id on the master; ``query-client-<random>`` when omitted. Two live
            connections with one id replace each other, so keep ids unique.
        config: Connection settings; :meth:`ClientConfig.from_env` when omitted.
        on_progress: Receives the ``tool_progress`` frames the master relays.
        on_event: Receives each query's events as it runs (``run_event`` frames): with it, every
            query is sent with ``stream=True`` unless the call says otherwise.

    Use it as an async context manager, or call :meth:`connect` and :meth:`close`.
    After a dropped connection the client reconnects in the background; queries that
    were waiting fail with :class:`~openagent.errors.ConnectionLostError` (the master
    forgets the queries of a gone connection), and queries sent before the reconnect
    completes fail the same way.
    """

    def __init__(
        self,
        agent_id: str | None = None,
        *,
        config: ClientConfig | None = None,
        on_progress: ProgressHandler | None = None,
        on_event: RunEventHandler | None = None,
    ) -> None:
        agent_id = agent_id if agent_id is not None else f"query-client-{secrets.token_hex(4)}"
        try:
            register = Register(agent_id=agent_id, role="query")
        except ValidationError:
            raise ConfigurationError(f"invalid agent_id {agent_id!r}") from None
        self.config = config if config is not None else ClientConfig.from_env()
        self._on_progress = on_progress
        self._on_event = on_event
        self._pending: dict[str, asyncio.Future[QueryResult]] = {}
        self._client = AgentClient(
            register, config=self.config, on_message=self._on_message, on_disconnect=self._on_disconnect
        )

    @property
    def agent_id(self) -> str:
        """The client's agent id on the master."""
        return self._client.agent_id

    @property
    def connected(self) -> bool:
        """Whether the client is connected and registered right now."""
        return self._client.connected

    async def connect(self) -> None:
        """Connect and register; raises what :meth:`AgentClient.connect
        <openagent.client.AgentClient.connect>` raises."""
        await self._client.connect()

    async def close(self) -> None:
        """Close the connection; queries still waiting fail with ``ConnectionLostError``."""
        await self._client.close()
        self._fail_pending(ConnectionLostError(f"query client {self.agent_id!r} closed"))

    async def __aenter__(self) -> QueryClient:
        await self.connect()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def query(
        self,
        query: str,
        *,
        session_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-query default from the config
        **fields: Any,
    ) -> QueryResult:
        """Ask the orchestrator and wait for its answer.

        Args:
            query: The question.
            session_id: Continue this session (from an earlier ``result.session_id``).
            timeout: Seconds to wait; ``config.query_timeout`` (``QUERY_RESPONSE_TIMEOUT``)
                when omitted.
            **fields: Other :class:`~protocol.QueryRequest` fields: ``allowed_agent_ids``,
                ``attachments``, ``orchestrator_model``, ``orchestrator_prompt_profile``,
                ``auto_mode``, ``auto_require_plan_approval``, ``auto_plan_execute``, ``stream``
                (``run_event`` frames for ``on_event``).

        Returns:
            The master's ``query_result``. A query the orchestrator could not answer
            comes back with ``success`` false and an ``error``; it does not raise.

        Raises:
            QueryTimeoutError: No answer within ``timeout``.
            QueryError: The master rejected the query with an ``error`` frame.
            ConnectionLostError: Not connected, or the connection dropped while waiting.
            AgentReplacedError, AuthenticationError: The client stopped for good while waiting.
            ConfigurationError: An unknown field, an invalid value or a non-positive timeout.
        """
        unknown = sorted(set(fields) - _QUERY_FIELDS)
        if unknown:
            raise ConfigurationError(
                f"unknown query field(s) {', '.join(map(repr, unknown))};"
                f" expected one of {sorted(_QUERY_FIELDS)}"
            )
        wait = timeout if timeout is not None else self.config.query_timeout
        if not wait > 0:
            raise ConfigurationError(f"query timeout must be greater than 0, got {timeout!r}")
        query_id = uuid.uuid4().hex
        if self._on_event is not None:
            fields.setdefault("stream", True)
        try:
            message = Query(query_id=query_id, query=query, session_id=session_id, **fields)
        except ValidationError as exc:
            raise ConfigurationError(f"invalid query: {exc}") from None
        future: asyncio.Future[QueryResult] = asyncio.get_running_loop().create_future()
        self._pending[query_id] = future
        try:
            await self._client.send(message)
            logger.debug("sent query %s", query_id)
            async with asyncio.timeout(wait):
                return await future
        except TimeoutError:
            raise QueryTimeoutError(
                f"no answer to query {query_id} ({_preview(query)}) within {wait}s", query_id=query_id
            ) from None
        finally:
            del self._pending[query_id]
            if future.done() and not future.cancelled():
                future.exception()  # retrieved, so an unawaited failure is not reported as lost

    # ------------------------------------------------------------------ incoming frames

    async def _on_message(self, message: Message) -> None:
        if isinstance(message, QueryResult):
            future = self._pending.get(message.query_id)
            if future is None:
                logger.warning("dropping query_result for unknown or expired query %s", message.query_id)
            elif not future.done():
                future.set_result(message)
        elif isinstance(message, ErrorMessage):
            future = self._pending.get(message.ref) if message.ref is not None else None
            if future is None:
                logger.warning(
                    "master error for %s: %s (%s, ref %s)",
                    self.agent_id,
                    message.message,
                    message.code,
                    message.ref,
                )
            elif not future.done():
                future.set_exception(
                    QueryError(
                        f"query {message.ref} failed: {message.message}",
                        query_id=message.ref or "",
                        code=message.code,
                    )
                )
        elif isinstance(message, ToolProgress):
            if self._on_progress is not None:
                await self._on_progress(message)
        elif isinstance(message, RunEventFrame):
            if self._on_event is not None and message.query_id in self._pending:
                await self._on_event(message)
        else:
            logger.debug("query client %s ignores %s frame", self.agent_id, message.type)

    async def _on_disconnect(self, error: OpenAgentError) -> None:
        self._fail_pending(error)

    def _fail_pending(self, error: OpenAgentError) -> None:
        waiting = [future for future in self._pending.values() if not future.done()]
        if waiting:
            logger.warning("failing %d pending queries of %s: %s", len(waiting), self.agent_id, error)
        for future in waiting:
            # One exception object per waiter: each raise then gets its own traceback.
            future.set_exception(type(error)(*error.args))


def _preview(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")
