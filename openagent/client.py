"""One WebSocket connection from an agent to the master.

:class:`AgentClient` is the transport under every agent of the SDK. It

1. opens the WebSocket (within ``WS_CONNECT_TIMEOUT``, sending the API key as a
   bearer token when one is configured),
2. sends ``register`` and waits for ``registered`` (within ``WS_REGISTRATION_TIMEOUT``),
3. sends a ``ping`` every ``WS_KEEPALIVE_INTERVAL`` seconds,
4. hands every incoming frame, parsed into a :mod:`protocol` model, to ``on_message``,
5. reconnects with exponential backoff and jitter when the connection drops or the
   master restarts, registering again each time; with several masters in ``MASTER_WS``
   (a comma-separated list) each attempt goes to the next one, and a master that closes
   the connection with code 1012 (service restart: it is draining) is left at once,

and stops for good after :class:`~openagent.errors.AuthenticationError` (close code
1008) or :class:`~openagent.errors.AgentReplacedError` (close code 4001: a second copy of the
agent, with the same key, took its id). Replaced by a connection of another key (close reason
:data:`protocol.REPLACED_BY_ANOTHER_KEY`), it logs who and reconnects with backoff.

Most users never touch it: :class:`~openagent.action.OrchestratorActionAgent` and
:class:`~openagent.query.QueryClient` build one. To speak the protocol directly::

    register = protocol.Register(agent_id="probe", role="query")
    async with connect_master(register, on_message=print_frame) as client:
        await client.send(protocol.Query(query_id="q1", query="hello"))
        ...
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ValidationError
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from openagent._backoff import backoff_delays
from openagent._ws_errors import closed_error, open_error, registration_error
from openagent.collaboration import CollaborationContext
from openagent.config import ClientConfig
from openagent.errors import (
    AgentReplacedError,
    AuthenticationError,
    ConfigurationError,
    ConnectionFailedError,
    ConnectionLostError,
    OpenAgentError,
    RegistrationError,
    TransportError,
)
from protocol import (
    CLOSE_SERVICE_RESTART,
    ErrorMessage,
    Message,
    Ping,
    Pong,
    Register,
    Registered,
    dump_message,
    parse_message,
)

__all__ = [
    "AgentClient",
    "CollaborationContext",
    "DisconnectHandler",
    "MessageHandler",
    "cancel_and_wait",
    "connect_master",
]

logger = logging.getLogger("openagent.client")

MessageHandler = Callable[[Message], Awaitable[None]]
"""``async def on_message(message)``: called in order for every frame but ``pong``.
The next frame is read only once it returns, so start a task for long work."""
DisconnectHandler = Callable[[OpenAgentError], Awaitable[None]]
"""``async def on_disconnect(error)``: the connection was lost (``ConnectionLostError``,
a reconnect follows) or ended for good (``AuthenticationError``/``AgentReplacedError``).
Not called by :meth:`AgentClient.close`."""

_MAX_FRAME_BYTES = 64 * 2**20


class AgentClient:
    """A registered, self-healing WebSocket connection of one agent to the master.

    Args:
        register: The ``register`` frame, sent on every (re)connection.
        config: Connection settings; :meth:`ClientConfig.from_env` when omitted.
        on_message: Receives every frame from the master except ``pong``.
        on_disconnect: Told when the connection is lost or ends for good.

    Call :meth:`connect` once (or use :func:`connect_master`), then :meth:`send`
    frames; :meth:`close` when done. The first connection fails fast with an
    exception; later drops are repaired in the background, forever, with delays
    growing from ``reconnect_initial_delay`` to ``reconnect_max_delay``.
    """

    def __init__(
        self,
        register: Register,
        *,
        config: ClientConfig | None = None,
        on_message: MessageHandler | None = None,
        on_disconnect: DisconnectHandler | None = None,
    ) -> None:
        self.register = register
        self.config = config if config is not None else ClientConfig.from_env()
        self._on_message = on_message
        self._on_disconnect = on_disconnect
        self._ws: ClientConnection | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._closing = False
        self._fatal_error: OpenAgentError | None = None
        self._last_received = 0.0
        self._url_index = 0
        self._draining = False
        """The master closed with 1012 (restarting): reconnect at once, elsewhere."""

    @property
    def master_url(self) -> str:
        """The master's WebSocket URL this client is connected (or connecting) to."""
        return self.config.master_urls[self._url_index]

    def _next_master(self) -> None:
        self._url_index = (self._url_index + 1) % len(self.config.master_urls)

    @property
    def agent_id(self) -> str:
        """The registered agent id."""
        return self.register.agent_id

    @property
    def connected(self) -> bool:
        """Whether the connection is open and registered (false while reconnecting)."""
        return self._ws is not None

    @property
    def fatal_error(self) -> OpenAgentError | None:
        """The error that stopped the client for good, if any."""
        return self._fatal_error

    async def connect(self) -> None:
        """Open the connection and register; return once ``registered`` arrived.

        Raises:
            ConnectionFailedError: The master is unreachable or the handshake failed.
            AuthenticationError: The master refused the API key.
            RegistrationError: The master rejected ``register`` or did not answer.
            ConfigurationError: Called twice, or ``master_ws`` is not a valid URL.
        """
        if self._supervisor is not None or self._closing:
            raise ConfigurationError(f"AgentClient {self.agent_id!r} can connect only once; create a new one")
        self._ws = await self._open_any()
        self._supervisor = asyncio.create_task(self._supervise(), name=f"openagent-client-{self.agent_id}")

    async def send(self, message: BaseModel) -> None:
        """Send one protocol frame.

        Raises:
            ConnectionLostError: Not connected (never connected, reconnecting, or closed).
        """
        ws = self._ws
        if ws is None:
            why = f": {self._fatal_error}" if self._fatal_error else ""
            raise ConnectionLostError(
                f"agent {self.agent_id!r} is not connected to the master at {self.master_url}{why}"
            )
        try:
            await ws.send(dump_message(message))
        except ConnectionClosed as exc:
            raise ConnectionLostError(
                f"connection of agent {self.agent_id!r} to {self.master_url} closed: {exc}"
            ) from exc

    async def close(self) -> None:
        """Stop reconnecting and close the connection. Safe to call more than once."""
        self._closing = True
        if self._supervisor is not None and self._supervisor is not asyncio.current_task():
            await cancel_and_wait(self._supervisor)
        ws, self._ws = self._ws, None
        if ws is not None:
            await ws.close()

    async def wait_closed(self) -> None:
        """Wait until the client stops for good.

        Returns after :meth:`close`; raises the fatal error (``AuthenticationError``
        or ``AgentReplacedError``) when that is what stopped it.
        """
        task = self._supervisor
        if task is not None:
            await asyncio.wait([task])
            crash = None if task.cancelled() else task.exception()
            if crash is not None:
                raise crash
        if self._fatal_error is not None:
            raise self._fatal_error

    # ------------------------------------------------------------------ connection lifecycle

    async def _supervise(self) -> None:
        """Serve the current connection; on a drop, reconnect; on a fatal close, stop."""
        while True:
            ws = self._ws
            assert ws is not None
            error = await self._serve(ws)
            self._ws = None
            if isinstance(error, ConnectionLostError):
                logger.warning("%s; reconnecting", error)
                await self._notify_disconnect(error)
                try:
                    self._ws = await self._reconnect()
                except (AuthenticationError, AgentReplacedError) as fatal:
                    error = fatal
                else:
                    continue
            logger.error("agent %s stopped, not reconnecting: %s", self.agent_id, error)
            self._fatal_error = error
            await self._notify_disconnect(error)
            return

    async def _serve(self, ws: ClientConnection) -> TransportError:
        """Read and dispatch frames until the connection closes; return why it closed."""
        keepalive = None
        if self.config.keepalive_interval > 0:
            keepalive = asyncio.create_task(self._keepalive(ws), name=f"openagent-ping-{self.agent_id}")
        replaced: str | None = None
        """What the ``agent_replaced`` error said, when one came."""
        try:
            while True:
                try:
                    raw = await ws.recv()
                except ConnectionClosed as exc:
                    return self._closed_error(exc, replaced=replaced)
                self._last_received = asyncio.get_running_loop().time()
                try:
                    message = parse_message(raw)
                except ValidationError as exc:
                    logger.warning("skipping invalid frame from the master: %s", exc)
                    continue
                if isinstance(message, Pong):
                    continue
                if isinstance(message, ErrorMessage) and message.code == "agent_replaced":
                    replaced = message.message
                await self._dispatch(message)
        finally:
            if keepalive is not None:
                await cancel_and_wait(keepalive)

    async def _keepalive(self, ws: ClientConnection) -> None:
        interval = self.config.keepalive_interval
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            silence = loop.time() - self._last_received
            if silence > 2 * interval:
                logger.warning(
                    "nothing from the master at %s for %.1fs; closing the connection",
                    self.master_url,
                    silence,
                )
                await ws.close(1011, "keepalive timeout")
                return
            try:
                await ws.send(dump_message(Ping()))
            except ConnectionClosed:
                return

    async def _reconnect(self) -> ClientConnection:
        delays = backoff_delays(self.config.reconnect_initial_delay, self.config.reconnect_max_delay)
        attempt = 0
        immediate, self._draining = self._draining, False
        while True:
            attempt += 1
            wait = 0.0 if immediate and attempt == 1 else next(delays)
            if len(self.config.master_urls) > 1:
                self._next_master()
            logger.info(
                "reconnecting agent %s to %s in %.2fs (attempt %d)",
                self.agent_id,
                self.master_url,
                wait,
                attempt,
            )
            await asyncio.sleep(wait)
            try:
                ws = await self._open()
            except (ConnectionFailedError, RegistrationError) as exc:
                logger.warning("reconnect attempt %d of agent %s failed: %s", attempt, self.agent_id, exc)
                continue
            logger.info("agent %s reconnected after %d attempt(s)", self.agent_id, attempt)
            return ws

    async def _open_any(self) -> ClientConnection:
        """Open and register on the first master that answers, in the order of ``master_urls``."""
        for _ in range(len(self.config.master_urls) - 1):
            try:
                return await self._open()
            except (ConnectionFailedError, RegistrationError) as exc:
                logger.warning("%s; trying the next master", exc)
                self._next_master()
        return await self._open()

    async def _open(self) -> ClientConnection:
        """Open a WebSocket and register on it."""
        url = self.master_url
        try:
            ws = await connect(
                url,
                additional_headers=self.config.auth_headers,
                open_timeout=self.config.connect_timeout,
                close_timeout=self.config.connect_timeout,
                ping_interval=None,  # liveness is the protocol's own ping/pong, see _keepalive
                max_size=_MAX_FRAME_BYTES,
                # Frames are small JSON on loopback or a LAN: permessage-deflate costs the master
                # CPU on every frame and most of the memory of each idle connection.
                compression=None,
            )
        except (InvalidURI, OSError, InvalidHandshake) as exc:  # also TimeoutError, InvalidStatus
            raise open_error(url, exc, self.config.connect_timeout) from exc
        try:
            await self._register_on(ws)
        except BaseException:
            await ws.close()
            raise
        self._last_received = asyncio.get_running_loop().time()
        return ws

    async def _register_on(self, ws: ClientConnection) -> None:
        url = self.master_url
        timeout = self.config.registration_timeout
        try:
            async with asyncio.timeout(timeout):
                await ws.send(dump_message(self.register))
                while True:
                    try:
                        message = parse_message(await ws.recv())
                    except ValidationError as exc:
                        logger.warning("skipping invalid frame from the master: %s", exc)
                        continue
                    if isinstance(message, Registered):
                        logger.info("agent %s registered with the master at %s", self.agent_id, url)
                        return
                    if isinstance(message, ErrorMessage):
                        raise registration_error(url, self.agent_id, message)
                    logger.debug("ignoring %s frame received before registered", message.type)
        except TimeoutError:
            raise RegistrationError(
                f"the master at {url} did not answer register of agent {self.agent_id!r}"
                f" within {timeout}s (WS_REGISTRATION_TIMEOUT)"
            ) from None
        except ConnectionClosed as exc:
            error = self._closed_error(exc, replaced=None)
            if isinstance(error, ConnectionLostError):
                error = RegistrationError(
                    f"the master at {url} closed the connection before registering agent"
                    f" {self.agent_id!r}: {exc}"
                )
            raise error from exc

    def _closed_error(self, exc: ConnectionClosed, *, replaced: str | None) -> TransportError:
        self._draining = exc.rcvd is not None and exc.rcvd.code == CLOSE_SERVICE_RESTART
        return closed_error(self.master_url, self.agent_id, exc, replaced=replaced is not None, why=replaced)

    # ------------------------------------------------------------------ callbacks

    async def _dispatch(self, message: Message) -> None:
        if self._on_message is None:
            return
        try:
            await self._on_message(message)
        except Exception:
            logger.exception("message handler of agent %s failed on a %s frame", self.agent_id, message.type)

    async def _notify_disconnect(self, error: OpenAgentError) -> None:
        if self._on_disconnect is None:
            return
        try:
            await self._on_disconnect(error)
        except Exception:
            logger.exception("disconnect handler of agent %s failed", self.agent_id)


@contextlib.asynccontextmanager
async def connect_master(
    register: Register,
    *,
    config: ClientConfig | None = None,
    on_message: MessageHandler | None = None,
    on_disconnect: DisconnectHandler | None = None,
) -> AsyncIterator[AgentClient]:
    """Connect and register an :class:`AgentClient`; close it when the block exits.

    Takes the same arguments as :class:`AgentClient` and raises what
    :meth:`AgentClient.connect` raises.
    """
    client = AgentClient(register, config=config, on_message=on_message, on_disconnect=on_disconnect)
    await client.connect()
    try:
        yield client
    finally:
        await client.close()


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait until it has finished, logging an error it ended with."""
    task.cancel()
    await asyncio.wait([task])
    if not task.cancelled() and task.exception() is not None:
        logger.error("task %s failed", task.get_name(), exc_info=task.exception())
