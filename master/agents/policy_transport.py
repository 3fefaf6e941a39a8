"""The transports of the MCP and A2A connectors' HTTP clients: they connect only to addresses the
agent URL policy allowed.

httpx resolves a URL's host itself when it opens a connection, so a check made before each
request (an event hook) judges one answer of the resolver while the connection may use another:
a name whose first answer is allowed and whose next one is a metadata address (DNS rebinding)
would get through. Here the answer the policy judges is the one connected to. The transport's
connection pool (httpcore's for ``httpx``, httpcore2's for the ``httpx2`` client of the ``mcp``
SDK) is given a network backend, httpcore's documented extension point, whose ``connect_tcp``
resolves the host once through :meth:`AgentUrlPolicy.allowed_addresses` and connects to those
addresses, in turn, by address. TLS still names the URL's host: httpcore hands it to
``start_tls`` as ``server_hostname`` (SNI and the certificate check) whatever address the stream
was opened to.

Every connection goes through the backend: the first request, an IP literal (judged by the same
rules), a redirect to another origin (one to the same origin reuses a connection already
checked). A client given a transport reads no ``HTTP(S)_PROXY`` from the environment (a proxy
would resolve the name itself, out of the policy's sight), like the master's aiohttp session for
agents.

Neither ``httpx.AsyncHTTPTransport`` nor ``httpx2.AsyncHTTPTransport`` takes a network backend
(encode/httpx#3749 would add it), so the transports here replace the pool the base class built
(its ``_pool``) by one with the same settings and the backend; the constructor checks the pool it
replaces is the kind it expects, and the tests check connections go through the backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

import httpcore
import httpcore2
import httpx
import httpx2

from master.agents.url_policy import AddressRefused, AgentUrlPolicy, ResolveTimeout

MAX_CONNECTIONS = 100
MAX_KEEPALIVE_CONNECTIONS = 20
"""httpx's default limits (``DEFAULT_LIMITS``), which the clients used before."""

Stream = TypeVar("Stream")


async def connect_allowed(
    policy: AgentUrlPolicy,
    host: str,
    port: int,
    seconds: float | None,
    connect: Callable[[str], Awaitable[Stream]],
    connect_error: type[Exception],
    connect_timeout: type[Exception],
) -> Stream:
    """``connect(address)`` to the first address of ``host`` that accepts, among those the policy
    allowed; ``connect_error`` naming the rule when it refuses the name or one of its addresses,
    ``connect_timeout`` when resolving and connecting take more than ``seconds``."""
    try:
        async with asyncio.timeout(seconds):
            try:
                addresses = await policy.allowed_addresses(host, port)
            except ResolveTimeout as exc:
                raise connect_timeout(str(exc)) from None
            except AddressRefused as exc:
                raise connect_error(str(exc)) from None
            except OSError as exc:  # does not resolve
                raise connect_error(f"{host}: {exc}") from None
            failure: Exception | None = None
            for address in addresses:
                try:
                    return await connect(address)
                except connect_error as exc:  # the next address, as a name's connect would
                    failure = exc
            assert failure is not None  # allowed_addresses returns at least one address
            raise failure
    except TimeoutError:
        raise connect_timeout(f"connecting to {host}:{port} timed out") from None


class _PolicyBackend(httpcore.AsyncNetworkBackend):
    """httpcore's asyncio backend, connecting only to the addresses the policy allowed."""

    def __init__(self, policy: AgentUrlPolicy, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self.policy = policy
        self.inner = inner or httpcore.AnyIOBackend()
        """What opens the connections (by address); the seam tests record calls on."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        async def connect(address: str) -> httpcore.AsyncNetworkStream:
            return await self.inner.connect_tcp(address, port, None, local_address, socket_options)

        return await connect_allowed(
            self.policy, host, port, timeout, connect, httpcore.ConnectError, httpcore.ConnectTimeout
        )

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class _PolicyBackend2(httpcore2.AsyncNetworkBackend):
    """The same for httpcore2 (the ``httpx2`` client's core)."""

    def __init__(self, policy: AgentUrlPolicy, inner: httpcore2.AsyncNetworkBackend | None = None) -> None:
        self.policy = policy
        self.inner = inner or httpcore2.AnyIOBackend()
        """What opens the connections (by address); the seam tests record calls on."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        async def connect(address: str) -> httpcore2.AsyncNetworkStream:
            return await self.inner.connect_tcp(address, port, None, local_address, socket_options)

        return await connect_allowed(
            self.policy, host, port, timeout, connect, httpcore2.ConnectError, httpcore2.ConnectTimeout
        )

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class PolicyTransport(httpx.AsyncHTTPTransport):
    """An ``httpx`` transport (the A2A connector's) whose connections the policy chose."""

    def __init__(self, policy: AgentUrlPolicy) -> None:
        ssl_context = httpx.create_ssl_context()
        limits = httpx.Limits(
            max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_KEEPALIVE_CONNECTIONS
        )
        super().__init__(verify=ssl_context, limits=limits)
        if not isinstance(self._pool, httpcore.AsyncConnectionPool):
            raise RuntimeError(f"httpx.AsyncHTTPTransport built a {type(self._pool).__name__}, not a pool")
        self.backend = _PolicyBackend(policy)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=self.backend,
        )


class PolicyTransport2(httpx2.AsyncHTTPTransport):
    """An ``httpx2`` transport (the MCP connector's) whose connections the policy chose."""

    def __init__(self, policy: AgentUrlPolicy) -> None:
        ssl_context = httpx2.create_ssl_context()
        limits = httpx2.Limits(
            max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_KEEPALIVE_CONNECTIONS
        )
        super().__init__(verify=ssl_context, limits=limits)
        if not isinstance(self._pool, httpcore2.AsyncConnectionPool):
            raise RuntimeError(f"httpx2.AsyncHTTPTransport built a {type(self._pool).__name__}, not a pool")
        self.backend = _PolicyBackend2(policy)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=self.backend,
        )
