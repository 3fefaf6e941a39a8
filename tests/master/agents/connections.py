"""Test seams for the agent URL policy's connections: a fake resolver whose answers change (DNS
rebinding) and a record of every address the MCP and A2A transports connected to.

The record wraps the backend's own connector (what opens sockets, by address) and refuses any
address but loopback before a socket is made: whatever the code under test does, the tests send
no packet anywhere but 127.0.0.1/::1.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

import pytest

from master.agents import policy_transport
from master.agents.url_policy import AgentUrlPolicy

METADATA = "169.254.169.254"


class Rebinding:
    """A resolver whose answers for a name change: ``answers[name]`` is the list of answers in
    turn, the last one repeated; every lookup is recorded in :attr:`lookups`."""

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.lookups: list[tuple[str, list[str]]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        if host not in self.answers:
            raise OSError(f"{host}: no such name (fake resolver)")
        turns = self.answers[host]
        answer = turns.pop(0) if len(turns) > 1 else turns[0]
        self.lookups.append((host, answer))
        return answer


class _Stream:
    """A connection's stream, recording the name TLS is started for."""

    def __init__(self, inner: Any, tls: list[str | None]) -> None:
        self.inner = inner
        self.tls = tls

    async def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> Any:
        self.tls.append(server_hostname)
        return await self.inner.start_tls(ssl_context, server_hostname, timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _Recorder:
    """The inner backend of a policy transport, recording each connect (and refusing non-loopback)."""

    def __init__(self, inner: Any, connections: Connections) -> None:
        self.inner = inner
        self.opened = connections.opened
        self.tls = connections.tls

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> Any:
        self.opened.append((host, port))
        if not ipaddress.ip_address(host).is_loopback:  # a name here would be a second lookup
            raise AssertionError(f"test guard: a connection to {host} was attempted")
        stream = await self.inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return _Stream(stream, self.tls)

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class Connections:
    """Every ``(address, port)`` the policy transports built while installed connected to, and
    the server name of each TLS handshake they started."""

    def __init__(self) -> None:
        self.opened: list[tuple[str, int]] = []
        self.tls: list[str | None] = []

    def wrap(self, transport: Any) -> Any:
        """Record the connections of one transport (a ``PolicyTransport`` or ``PolicyTransport2``)."""
        transport.backend.inner = _Recorder(transport.backend.inner, self)
        return transport

    def install(self, monkeypatch: pytest.MonkeyPatch) -> Connections:
        """Record the transports the connectors build from now on."""
        connections = self
        for name in ("PolicyTransport", "PolicyTransport2"):
            base = getattr(policy_transport, name)

            class Recorded(base):  # type: ignore[misc, valid-type]
                def __init__(self, policy: AgentUrlPolicy) -> None:
                    super().__init__(policy)
                    connections.wrap(self)

            monkeypatch.setattr(policy_transport, name, Recorded)
        return self
