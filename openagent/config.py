"""Client configuration: where the master is and how long to wait for it.

Agents usually build their configuration from the environment::

    config = ClientConfig.from_env()

or pass values explicitly (handy in tests)::

    config = ClientConfig(master_ws="ws://127.0.0.1:9000/ws", keepalive_interval=0)

Environment variables read by :meth:`ClientConfig.from_env` (an empty value counts
as unset):

========================== ============================ ==========================================
Variable                   Default                      Meaning
========================== ============================ ==========================================
``MASTER_WS``              ``ws://127.0.0.1:8000/ws``   WebSocket URL of the master
``OPENAGENT_API_KEY``      unset                        Sent as ``Authorization: Bearer <key>``
``WS_CONNECT_TIMEOUT``     ``10.0``                     Seconds to open the WebSocket
``WS_REGISTRATION_TIMEOUT`` ``10.0``                    Seconds to wait for ``registered``
``WS_KEEPALIVE_INTERVAL``  ``30``                       Seconds between ``ping`` frames; 0 disables
``QUERY_RESPONSE_TIMEOUT`` ``180.0``                    Seconds to wait for a ``query_result``
========================== ============================ ==========================================
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dotenv import load_dotenv

from openagent.errors import ConfigurationError

__all__ = ["DEFAULT_MASTER_WS", "ClientConfig"]

logger = logging.getLogger("openagent.config")

DEFAULT_MASTER_WS = "ws://127.0.0.1:8000/ws"
"""Where agents look for the master when ``MASTER_WS`` is unset."""


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Settings of one agent's connection to the master.

    Immutable; build a changed copy with :func:`dataclasses.replace`. Invalid values
    raise :class:`~openagent.errors.ConfigurationError` naming the field.
    """

    master_ws: str = DEFAULT_MASTER_WS
    """WebSocket URL of the master's ``/ws`` endpoint (``ws://`` or ``wss://``)."""
    api_key: str | None = field(default=None, repr=False)
    """Sent as ``Authorization: Bearer <api_key>`` when set. Never shown in ``repr``."""
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
        if not self.master_ws.startswith(("ws://", "wss://")):
            raise ConfigurationError(
                f"master_ws must be a ws:// or wss:// URL (env MASTER_WS), got {self.master_ws!r}"
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
    def auth_headers(self) -> dict[str, str]:
        """The HTTP headers of the WebSocket handshake: the bearer token, if any."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

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
        if environ is None:
            dotenv_path = Path.cwd() / ".env"
            if dotenv_path.is_file():
                logger.debug("loading %s", dotenv_path)
                load_dotenv(dotenv_path, override=False)
            environ = os.environ
        return cls(
            master_ws=_text(environ, "MASTER_WS") or DEFAULT_MASTER_WS,
            api_key=_text(environ, "OPENAGENT_API_KEY"),
            connect_timeout=_number(environ, "WS_CONNECT_TIMEOUT", 10.0),
            registration_timeout=_number(environ, "WS_REGISTRATION_TIMEOUT", 10.0),
            keepalive_interval=_number(environ, "WS_KEEPALIVE_INTERVAL", 30.0, allow_zero=True),
            query_timeout=_number(environ, "QUERY_RESPONSE_TIMEOUT", 180.0),
        )


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
