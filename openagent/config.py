"""SDK configuration: where the master is, how long to wait for it, and where invocation agents listen.

Agents usually build their configuration from the environment::

    config = ClientConfig.from_env()

or pass values explicitly (handy in tests)::

    config = ClientConfig(master_ws="ws://127.0.0.1:9000/ws", keepalive_interval=0)

Environment variables read by :meth:`ClientConfig.from_env` (an empty value counts
as unset):

========================== ============================ ==========================================
Variable                   Default                      Meaning
========================== ============================ ==========================================
``MASTER_WS``              ``ws://{host}:{port}/ws``    WebSocket URL of the master
``MASTER_PORT``            ``8000``                     The master's port, when ``MASTER_WS`` is unset
``MASTER_HOST``            ``127.0.0.1``                The master's address, when ``MASTER_WS`` is unset
``OPENAGENT_API_KEY``      unset                        Sent as ``Authorization: Bearer <key>``
``WS_CONNECT_TIMEOUT``     ``10.0``                     Seconds to open the WebSocket
``WS_REGISTRATION_TIMEOUT`` ``10.0``                    Seconds to wait for ``registered``
``WS_KEEPALIVE_INTERVAL``  ``30``                       Seconds between ``ping`` frames; 0 disables
``QUERY_RESPONSE_TIMEOUT`` ``180.0``                    Seconds to wait for a ``query_result``
========================== ============================ ==========================================

HTTP invocation agents (:mod:`openagent.invocation`) read theirs with
:meth:`InvocationConfig.from_env`, and :func:`~openagent.registration.register_invocation_agent`
the last three with :meth:`RegistrationConfig.from_env`; an argument given to the agent or
the function wins, and its variable is then not read:

========================== ============================ ==========================================
Variable                   Default                      Meaning
========================== ============================ ==========================================
``INVOCATION_HOST``        ``127.0.0.1``                Where the agent's HTTP server listens
``INVOCATION_PORT``        ``9000``                     Its port; 0 picks a free one
``INVOCATION_BASE_URL``    ``http://{host}:{port}``     URL the master uses to reach the agent
``MASTER_BASE_URL``        ``http://{host}:{port}``     HTTP URL of the master (``/register``)
``OPENAGENT_API_KEY``      unset                        Sent as ``Authorization: Bearer <key>``
``HTTP_REGISTER_TIMEOUT``  ``10.0``                     Seconds per registration attempt
========================== ============================ ==========================================

``MASTER_WS`` and ``MASTER_BASE_URL`` follow ``MASTER_PORT`` (and ``MASTER_HOST``, the
master's own variables) unless set explicitly: with only ``MASTER_PORT=9000`` in ``.env``,
agents connect to ``ws://127.0.0.1:9000/ws`` and register at ``http://127.0.0.1:9000``.
A wildcard ``MASTER_HOST`` (``0.0.0.0``, ``::``) means loopback for clients.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dotenv import dotenv_values, load_dotenv

from openagent.errors import ConfigurationError

__all__ = [
    "DEFAULT_MASTER_BASE_URL",
    "DEFAULT_MASTER_WS",
    "ClientConfig",
    "InvocationConfig",
    "RegistrationConfig",
]

logger = logging.getLogger("openagent.config")

DEFAULT_MASTER_WS = "ws://127.0.0.1:8000/ws"
"""Where agents look for the master when ``MASTER_WS`` is unset."""
DEFAULT_MASTER_BASE_URL = "http://127.0.0.1:8000"
"""Where invocation agents register when ``MASTER_BASE_URL`` is unset."""


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Settings of one agent's connection to the master.

    Immutable; build a changed copy with :func:`dataclasses.replace`. Invalid values
    raise :class:`~openagent.errors.ConfigurationError` naming the field.
    """

    master_ws: str = DEFAULT_MASTER_WS
    """WebSocket URL of the master's ``/ws`` endpoint (``ws://`` or ``wss://``); several masters
    serving one system as a comma-separated list, tried in turn when a connection is lost
    (see :attr:`master_urls`)."""
    api_key: str | None = field(default=None, repr=False)
    """Sent as ``Authorization: Bearer <api_key>`` when set. Never shown in ``repr``. Left out
    (``None``), it is ``OPENAGENT_API_KEY`` of the environment, else of ``.env`` in the current
    directory, so ``ClientConfig(master_ws=...)`` joins a master that needs the key as
    :meth:`from_env` does; ``""`` sends no key and stays ``""``, so a copy made with
    :func:`dataclasses.replace` is keyless too (never the environment's key)."""
    connect_timeout: float = 10.0
    """Seconds allowed to open the WebSocket (TCP, TLS and HTTP upgrade)."""
    registration_timeout: float = 10.0
    """Seconds allowed between sending ``register`` and receiving ``registered``."""
    keepalive_interval: float = 30.0
    """Seconds between ``ping`` frames; ``0`` disables keepalive. When nothing at all
    arrives from the master for two intervals, the connection is considered dead and
    is reopened."""
    query_timeout: float = 180.0
    """Default seconds a query waits for its ``query_result``."""
    reconnect_initial_delay: float = 0.5
    """First delay before reconnecting after a drop; doubles after each failed attempt."""
    reconnect_max_delay: float = 10.0
    """Upper bound of the reconnect delay."""

    def __post_init__(self) -> None:
        if self.api_key is None:  # left out: the environment's; "" (no key) is kept as it is
            object.__setattr__(self, "api_key", _api_key_of_environment() or "")
        if not self.master_urls or not all(url.startswith(("ws://", "wss://")) for url in self.master_urls):
            raise ConfigurationError(
                f"master_ws must be a ws:// or wss:// URL, or a comma-separated list of them (env MASTER_WS),"
                f" got {self.master_ws!r}"
            )
        positive = {
            "connect_timeout": self.connect_timeout,
            "registration_timeout": self.registration_timeout,
            "query_timeout": self.query_timeout,
            "reconnect_initial_delay": self.reconnect_initial_delay,
            "reconnect_max_delay": self.reconnect_max_delay,
        }
        for name, value in positive.items():
            if not value > 0:
                raise ConfigurationError(f"{name} must be greater than 0, got {value!r}")
        if not self.keepalive_interval >= 0:
            raise ConfigurationError(
                f"keepalive_interval must be 0 (disabled) or positive, got {self.keepalive_interval!r}"
            )
        if self.reconnect_max_delay < self.reconnect_initial_delay:
            raise ConfigurationError(
                f"reconnect_max_delay ({self.reconnect_max_delay!r}) must not be smaller than "
                f"reconnect_initial_delay ({self.reconnect_initial_delay!r})"
            )

    @property
    def master_urls(self) -> tuple[str, ...]:
        """The masters' WebSocket URLs, in order: the agent connects to the first that answers and,
        when its connection is lost, moves on to the next (round robin)."""
        return tuple(url.strip() for url in self.master_ws.split(",") if url.strip())

    @property
    def auth_headers(self) -> dict[str, str]:
        """The HTTP headers of the WebSocket handshake: the bearer token, if any."""
        return _bearer(self.api_key)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ClientConfig:
        """Build a configuration from environment variables (see the module docstring).

        Args:
            environ: Variables to read instead of the process environment. When omitted,
                ``.env`` in the current directory is first loaded into ``os.environ``
                with python-dotenv, without overriding variables that are already set.

        Raises:
            ConfigurationError: A variable is not a valid value; the message names it.
        """
        environ = _environ(environ)
        return cls(
            master_ws=_text(environ, "MASTER_WS") or f"ws://{_master_address(environ)}/ws",
            api_key=_text(environ, "OPENAGENT_API_KEY") or "",  # read here: "" is none
            connect_timeout=_number(environ, "WS_CONNECT_TIMEOUT", 10.0),
            registration_timeout=_number(environ, "WS_REGISTRATION_TIMEOUT", 10.0),
            keepalive_interval=_number(environ, "WS_KEEPALIVE_INTERVAL", 30.0, allow_zero=True),
            query_timeout=_number(environ, "QUERY_RESPONSE_TIMEOUT", 180.0),
        )


@dataclass(frozen=True, slots=True)
class RegistrationConfig:
    """Where and how an HTTP invocation agent registers with the master (``POST /register``).

    Immutable; invalid values raise :class:`~openagent.errors.ConfigurationError` naming the field.
    """

    master_base_url: str = DEFAULT_MASTER_BASE_URL
    """HTTP URL of the master (``http://`` or ``https://``); a trailing ``/`` is dropped."""
    api_key: str | None = field(default=None, repr=False)
    """Sent as ``Authorization: Bearer <api_key>`` when set. Never shown in ``repr``."""
    timeout: float = 10.0
    """Seconds allowed for each registration attempt."""

    def __post_init__(self) -> None:
        _check_http_url("master_base_url (env MASTER_BASE_URL)", self.master_base_url)
        object.__setattr__(self, "master_base_url", self.master_base_url.rstrip("/"))
        if not self.timeout > 0:
            raise ConfigurationError(f"register timeout must be greater than 0, got {self.timeout!r}")

    @property
    def auth_headers(self) -> dict[str, str]:
        """The HTTP headers of requests to the master: the bearer token, if any."""
        return _bearer(self.api_key)

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        master_base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
    ) -> RegistrationConfig:
        """Build a configuration from the arguments, then ``MASTER_BASE_URL``, ``OPENAGENT_API_KEY``
        and ``HTTP_REGISTER_TIMEOUT`` for those not given (``api_key=""`` means no key).

        Args:
            environ: As for :meth:`ClientConfig.from_env`: ``.env`` is loaded when omitted.

        Raises:
            ConfigurationError: An invalid argument or variable; the message names it.
        """
        environ = _environ(environ)
        key = api_key if api_key is not None else _text(environ, "OPENAGENT_API_KEY")
        return cls(
            master_base_url=master_base_url
            or _text(environ, "MASTER_BASE_URL")
            or f"http://{_master_address(environ)}",
            api_key=key or None,
            timeout=timeout if timeout is not None else _number(environ, "HTTP_REGISTER_TIMEOUT", 10.0),
        )


@dataclass(frozen=True, slots=True)
class InvocationConfig:
    """Settings of an HTTP invocation agent: where it listens, its URL, and its registration.

    Immutable; invalid values raise :class:`~openagent.errors.ConfigurationError` naming the field.
    """

    host: str = "127.0.0.1"
    """Where the agent's HTTP server listens."""
    port: int = 9000
    """The server's port; 0 picks a free one."""
    invocation_base_url: str | None = None
    """URL the master uses to reach the agent; ``http://{host}:{port}`` when ``None``."""
    registration: RegistrationConfig = field(default_factory=RegistrationConfig)
    """Where and how the agent registers with the master."""

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigurationError(f"port must be from 0 to 65535 (env INVOCATION_PORT), got {self.port!r}")
        if self.invocation_base_url is not None:
            _check_http_url("invocation_base_url (env INVOCATION_BASE_URL)", self.invocation_base_url)

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        host: str | None = None,
        port: int | None = None,
        invocation_base_url: str | None = None,
        master_base_url: str | None = None,
        api_key: str | None = None,
        register_timeout: float | None = None,
    ) -> InvocationConfig:
        """Build a configuration from the arguments, then the environment (see the module
        docstring) for those not given.

        Args:
            environ: As for :meth:`ClientConfig.from_env`: ``.env`` is loaded when omitted.

        Raises:
            ConfigurationError: An invalid argument or variable; the message names it.
        """
        environ = _environ(environ)
        return cls(
            host=host or _text(environ, "INVOCATION_HOST") or "127.0.0.1",
            port=port if port is not None else _port(environ, "INVOCATION_PORT", 9000),
            invocation_base_url=invocation_base_url or _text(environ, "INVOCATION_BASE_URL"),
            registration=RegistrationConfig.from_env(
                environ, master_base_url=master_base_url, api_key=api_key, timeout=register_timeout
            ),
        )


def _environ(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    """``environ``, or else ``os.environ`` once ``.env`` in the current directory is loaded into it
    (without overriding variables that are already set)."""
    if environ is not None:
        return environ
    dotenv_path = Path.cwd() / ".env"
    if dotenv_path.is_file():
        logger.debug("loading %s", dotenv_path)
        load_dotenv(dotenv_path, override=False)
    return os.environ


def _api_key_of_environment() -> str | None:
    """``OPENAGENT_API_KEY`` of the process environment, else of ``.env`` in the current directory
    (read, not loaded: building a configuration changes no environment)."""
    key = _text(os.environ, "OPENAGENT_API_KEY")
    dotenv_path = Path.cwd() / ".env"
    if key is None and dotenv_path.is_file():
        key = (dotenv_values(dotenv_path).get("OPENAGENT_API_KEY") or "").strip() or None
    return key


def _master_host(environ: Mapping[str, str]) -> str:
    """The address the master listens on: ``MASTER_HOST``, default ``127.0.0.1``."""
    return _text(environ, "MASTER_HOST") or "127.0.0.1"


def _client_host(host: str) -> str:
    """Where a local client reaches a master listening on ``host`` (a wildcard is not connectable)."""
    if host in ("0.0.0.0", "::", "[::]"):
        return "127.0.0.1" if host == "0.0.0.0" else "[::1]"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _master_address(environ: Mapping[str, str]) -> str:
    """``host:port`` where clients reach the master, from ``MASTER_HOST`` and ``MASTER_PORT``."""
    return f"{_client_host(_master_host(environ))}:{_port(environ, 'MASTER_PORT', 8000)}"


def _bearer(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _check_http_url(name: str, url: str) -> None:
    if not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"{name} must be an http:// or https:// URL, got {url!r}")


def _port(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = _text(environ, name) or str(default)
    if not raw.isdigit() or int(raw) > 65535:
        raise ConfigurationError(f"{name} must be a port number (0-65535), got {raw!r}")
    return int(raw)


def _text(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name, "").strip()
    return value or None


def _number(environ: Mapping[str, str], name: str, default: float, *, allow_zero: bool = False) -> float:
    raw = _text(environ, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a number of seconds, got {raw!r}") from None
    if not math.isfinite(value):
        raise ConfigurationError(f"{name} must be a finite number of seconds, got {raw!r}")
    if value < 0 or (value == 0 and not allow_zero):
        expected = "0 or more" if allow_zero else "greater than 0"
        raise ConfigurationError(f"{name} must be {expected}, got {raw!r}")
    return value
