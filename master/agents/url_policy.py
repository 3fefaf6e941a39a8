"""The agent URL policy: which addresses the master may call for an agent.

The master calls the URLs agents register (an invocation agent's ``invocation_base_url``, an MCP
server's ``mcp_url``, an A2A agent's ``a2a_url`` and the endpoints its card lists). Anyone with a
key that may register could otherwise point the master at an address inside its own network
that nobody meant to expose, above all a cloud provider's metadata service. One
:class:`AgentUrlPolicy`, built by the lifespan from the settings, decides:

- refused by default: link-local addresses (``169.254.0.0/16``, ``fe80::/10``), the cloud metadata
  addresses (``169.254.169.254``, ``fd00:ec2::254``, ``100.100.100.200``, the name
  ``metadata.google.internal``), multicast, unspecified (``0.0.0.0``, ``::``) and broadcast
  (``255.255.255.255``); an IPv4 address written as IPv6 (``::ffff:a.b.c.d``) is judged as IPv4;
- loopback and private ranges (``127.0.0.0/8``, ``::1``, ``10.0.0.0/8``, ``172.16.0.0/12``,
  ``192.168.0.0/16``, ``100.64.0.0/10``, ``fc00::/7``...) are refused at registration unless an
  administrator registers the agent: an administrator's agents run on loopback in development
  (``scripts/run.sh``) and on private addresses inside a cluster, while another key could use
  them to reach what the master's own network hides (and learn which loopback ports answer);
- ``OPENAGENT_AGENT_URL_ALLOW`` (host names and CIDRs) re-opens what the defaults refuse, for
  every key, ``OPENAGENT_AGENT_URL_DENY`` refuses more; an address or name both lists match is
  refused.

A host name is judged by the addresses it resolves to (every one must be allowed), and so is
every redirect. It is checked at registration (``POST /register``, the WebSocket ``register`` with
an ``invocation_url``, a workspace restore: a 422 naming the rule), with the registering principal,
and again whenever the master connects, on the address it connects to: the
master's aiohttp session uses :meth:`AgentUrlPolicy.aiohttp_connector`, which resolves through
the policy and refuses a refused host, IP literals included (aiohttp never resolves those),
before each request and each followed redirect; the MCP and A2A connectors' httpx clients
connect through a network backend that resolves through :meth:`AgentUrlPolicy.allowed_addresses`
and connects by address (:mod:`master.agents.policy_transport`). No client resolves a name a
second time after the policy judged it, so a name that answers differently from one lookup to
the next (DNS rebinding) is judged by the answer that is used. Resolution runs off the event
loop (``loop.getaddrinfo``) within :data:`RESOLVE_TIMEOUT`; :attr:`AgentUrlPolicy.resolver` is
the seam tests point at a fake mapping.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.connector import Connection

from master.auth import Principal
from master.errors import RegistrationRefused
from protocol import ErrorCode

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[list[str]]]
"""``(host, port)`` → the addresses the name resolves to (an ``OSError`` when it does not)."""

RESOLVE_TIMEOUT = 5.0
"""Seconds a name may take to resolve before the request (or the registration check) gives up."""

_REMEMBERED_HOSTS = 1024
"""How many hosts :meth:`AgentUrlPolicy.host_refusal` remembers its answer for (then it starts over)."""

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
"""AWS/GCP/Azure/OpenStack (169.254.169.254), AWS over IPv6, Alibaba Cloud."""
METADATA_NAMES = frozenset({"metadata.google.internal"})
"""Names of metadata services refused whatever they resolve to."""

_BROADCAST = ipaddress.ip_address("255.255.255.255")
_SHARED = ipaddress.ip_network("100.64.0.0/10")
"""Carrier-grade NAT space: not ``is_private`` for Python, internal all the same."""


class AddressRefused(aiohttp.ClientConnectionError, OSError):
    """A connection the policy refused (at call time). An ``OSError`` so that aiohttp's connector
    reports it from its resolver as a connection error, a ``ClientConnectionError`` so that a
    refusal raised by the trace is one too; the message names the rule."""

    def __init__(self, reason: str) -> None:
        super().__init__(errno.EACCES, reason)  # aiohttp shows an OSError's strerror
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


class ResolveTimeout(AddressRefused):
    """A name took longer than the policy's timeout to resolve."""


class UrlRefused(RegistrationRefused):
    """A registered URL the policy refuses: ``field`` is the body's field, the message names the rule."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(ErrorCode.VALIDATION_ERROR, f"{field}: {message}")
        self.field = field
        self.reason = message


def parse_entries(value: str | Iterable[str], setting: str) -> tuple[frozenset[str], tuple[Network, ...]]:
    """Split ``host,10.0.0.0/8,fe80::1`` into host names and networks; ``ValueError`` names a bad entry."""
    entries = value.split(",") if isinstance(value, str) else list(value)
    hosts: set[str] = set()
    networks: list[Network] = []
    for raw in entries:
        entry = raw.strip().lower().strip("[]")
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
            continue
        except ValueError:
            pass
        name = entry.rstrip(".")
        if not name or "/" in name or any(not (c.isalnum() or c in ".-_") for c in name):
            raise ValueError(f"{setting}: {raw.strip()!r} is neither a host name nor an address/CIDR")
        hosts.add(name)
    return frozenset(hosts), tuple(networks)


def _address(host: str) -> Address | None:
    try:
        address = ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


async def resolve_with_loop(host: str, port: int) -> list[str]:
    """The addresses of ``host`` by ``loop.getaddrinfo`` (the system resolver, in a thread)."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class AgentUrlPolicy:
    """Which hosts and addresses the master may call for agents (see the module docstring)."""

    def __init__(
        self,
        allow: str | Iterable[str] = "",
        deny: str | Iterable[str] = "",
        *,
        resolver: Resolver = resolve_with_loop,
        resolve_timeout: float = RESOLVE_TIMEOUT,
    ) -> None:
        self.allow_hosts, self.allow_networks = parse_entries(allow, "OPENAGENT_AGENT_URL_ALLOW")
        self.deny_hosts, self.deny_networks = parse_entries(deny, "OPENAGENT_AGENT_URL_DENY")
        self.resolver = resolver
        """How names are resolved: the seam a test points at a fake mapping."""
        self.resolve_timeout = resolve_timeout
        self._refusals: dict[str, str | None] = {}
        """:meth:`host_refusal`'s answers by host: it runs before every request to an agent."""

    @classmethod
    def from_settings(cls, settings: Any) -> AgentUrlPolicy:
        """The policy of ``OPENAGENT_AGENT_URL_ALLOW`` and ``OPENAGENT_AGENT_URL_DENY``."""
        return cls(settings.openagent_agent_url_allow, settings.openagent_agent_url_deny)

    # ------------------------------------------------------------------ the rules

    def host_refusal(self, host: str) -> str | None:
        """Why a host name (or literal) is refused by name alone, or ``None`` (remembered for the
        last :data:`_REMEMBERED_HOSTS` hosts: the rules do not change while the master runs)."""
        try:
            return self._refusals[host]
        except KeyError:
            pass
        if len(self._refusals) >= _REMEMBERED_HOSTS:
            self._refusals.clear()
        why = self._refusals[host] = self._host_refusal(host)
        return why

    def _host_refusal(self, host: str) -> str | None:
        name = host.strip("[]").lower().rstrip(".")
        address = _address(name)
        if address is not None:
            return self.address_refusal(address)
        if name in self.deny_hosts:
            return f"{name} is denied by OPENAGENT_AGENT_URL_DENY"
        if name in METADATA_NAMES and name not in self.allow_hosts:
            return (
                f"{name} is a cloud-metadata host, refused by the agent URL policy "
                "(OPENAGENT_AGENT_URL_ALLOW to allow)"
            )
        return None

    def address_refusal(self, address: Address | str, host: str | None = None) -> str | None:
        """Why the master may not connect to ``address`` (resolved from ``host``), or ``None``."""
        parsed = _address(address) if isinstance(address, str) else address
        if parsed is None:
            return f"{address} is not an IP address"
        parsed = _unmapped(parsed)
        subject = f"{host} resolves to {parsed}, which" if host else str(parsed)
        for network in self.deny_networks:
            if parsed.version == network.version and parsed in network:
                return f"{subject} is denied by OPENAGENT_AGENT_URL_DENY ({network})"
        if self._allowed(parsed, host):
            return None
        kind = (
            "a link-local/cloud-metadata address"
            if parsed in METADATA_ADDRESSES
            else "a link-local address"
            if parsed.is_link_local
            else "a multicast address"
            if parsed.is_multicast
            else "an unspecified address"
            if parsed.is_unspecified
            else "the broadcast address"
            if parsed == _BROADCAST
            else None
        )
        if kind is None:
            return None
        return f"{subject} is {kind}, refused by the agent URL policy (OPENAGENT_AGENT_URL_ALLOW to allow)"

    def internal_refusal(self, address: Address, host: str | None = None) -> str | None:
        """Why a registration by a key that is not an administrator's may not use ``address``
        (loopback or private), or ``None`` (a public address, or one ``OPENAGENT_AGENT_URL_ALLOW``
        names)."""
        address = _unmapped(address)
        if self._allowed(address, host):
            return None
        internal = address.is_loopback or address.is_private or (address.version == 4 and address in _SHARED)
        if not internal:
            return None
        subject = f"{host} resolves to {address}, which" if host else str(address)
        return (
            f"{subject} is a loopback or private address, which only an administrator's key may "
            "register (OPENAGENT_AGENT_URL_ALLOW to allow it for every key)"
        )

    def _allowed(self, address: Address, host: str | None) -> bool:
        """Whether ``OPENAGENT_AGENT_URL_ALLOW`` names ``host`` or a network holding ``address``."""
        if host is not None and host.lower().rstrip(".") in self.allow_hosts:
            return True
        return any(address.version == n.version and address in n for n in self.allow_networks)

    # ------------------------------------------------------------------ resolution

    async def resolve(self, host: str, port: int) -> list[str]:
        """The addresses of ``host`` within :attr:`resolve_timeout` (``OSError`` when it does not
        resolve, ``TimeoutError`` when it takes too long)."""
        async with asyncio.timeout(self.resolve_timeout):
            addresses = await self.resolver(host, port)
        if not addresses:
            raise OSError(f"{host} resolves to no address")
        return addresses

    async def allowed_addresses(self, host: str, port: int, *, internal: bool = True) -> list[str]:
        """The addresses of ``host`` the master may connect to; :class:`AddressRefused` naming the
        rule when the name or any of its addresses is refused. ``internal=False``: loopback and
        private addresses are refused too (a registration by a key that is not an administrator's)."""
        why = self.host_refusal(host)
        if why is not None:
            raise AddressRefused(why)
        literal = _address(host)
        if literal is not None:
            why = None if internal else self.internal_refusal(literal)
            if why is not None:
                raise AddressRefused(why)
            return [str(literal)]
        try:
            addresses = await self.resolve(host, port)
        except TimeoutError:
            raise ResolveTimeout(f"{host} did not resolve within {self.resolve_timeout:g} s") from None
        for address in addresses:
            why = self.address_refusal(address, host)
            if why is None and not internal:
                parsed = _address(address)
                why = None if parsed is None else self.internal_refusal(parsed, host)
            if why is not None:
                raise AddressRefused(why)
        return addresses

    async def check_url(self, url: str, field: str, *, registrant: Principal) -> None:
        """Registration by ``registrant``: :class:`UrlRefused` (422, naming ``field`` and the rule)
        when the URL's host or an address it resolves to is refused; loopback and private
        addresses only for an administrator (or as ``OPENAGENT_AGENT_URL_ALLOW`` names them).
        A name that does not resolve (yet) passes: the connection is checked again when it is made."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            port = 80
        try:
            await self.allowed_addresses(host, port, internal=registrant.is_admin)
        except ResolveTimeout:
            return
        except AddressRefused as exc:
            raise UrlRefused(field, str(exc)) from None
        except OSError:
            return

    # ------------------------------------------------------------------ the HTTP clients

    def aiohttp_resolver(self) -> AbstractResolver:
        """For ``TCPConnector(resolver=...)``: resolves through the policy, refuses denied addresses."""
        return _PolicyResolver(self)

    def aiohttp_connector(self, **kwargs: Any) -> aiohttp.TCPConnector:
        """For ``ClientSession(connector=...)``: a ``TCPConnector`` (``kwargs``: its options) that
        resolves names through the policy (:meth:`aiohttp_resolver`) and, for every request, each
        followed redirect included, refuses a refused host by name before it takes a pooled
        connection or opens one: aiohttp never resolves an IP literal, so the resolver alone would
        not see one. In the connector rather than in a request trace: a session with any trace
        builds and sends every trace signal of every request, which cost an HTTP invocation call
        about 3% of the master's instructions (``bench.instructions``, system ``master-http``)."""
        return _PolicyConnector(self, resolver=self.aiohttp_resolver(), **kwargs)


class _PolicyConnector(aiohttp.TCPConnector):
    def __init__(self, policy: AgentUrlPolicy, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._policy = policy

    async def connect(
        self,
        req: aiohttp.ClientRequest,
        traces: list[Any],
        timeout: aiohttp.ClientTimeout,  # noqa: ASYNC109 - aiohttp's signature
    ) -> Connection:
        why = self._policy.host_refusal(req.url.host or "")
        if why is not None:
            raise AddressRefused(why)
        return await super().connect(req, traces, timeout)


class _PolicyResolver(AbstractResolver):
    def __init__(self, policy: AgentUrlPolicy) -> None:
        self._policy = policy

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        addresses = await self._policy.allowed_addresses(host, port)
        results: list[ResolveResult] = []
        for address in addresses:
            parsed = ipaddress.ip_address(address.split("%", 1)[0])
            if (
                family == socket.AF_INET
                and parsed.version != 4
                or family == socket.AF_INET6
                and parsed.version != 6
            ):
                continue
            results.append(
                ResolveResult(
                    hostname=host,
                    host=address,
                    port=port,
                    family=socket.AF_INET6 if parsed.version == 6 else socket.AF_INET,
                    proto=0,
                    flags=socket.AI_NUMERICHOST,
                )
            )
        if not results:
            raise OSError(f"{host} has no address of the family asked for")
        return results

    async def close(self) -> None:
        return None


def _unmapped(address: Address) -> Address:
    """An IPv4 address written as IPv6 (``::ffff:10.0.0.5``) as the IPv4 address it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address
