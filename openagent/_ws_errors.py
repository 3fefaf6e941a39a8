"""Which SDK exception a failure of the WebSocket to the master becomes.

Used by :class:`~openagent.client.AgentClient`; :mod:`openagent.errors` draws the hierarchy.
Close code 1008 and HTTP 401/403 mean a refused API key, close code 4001 (or an
``agent_replaced`` error) a newer connection with the same ``agent_id``; the two are fatal. One
exception: 4001 with the reason :data:`protocol.REPLACED_BY_ANOTHER_KEY` means the newer
connection came with another key (an administrator, another agent key of the tenant), not a
second copy of this agent; the agent logs why and reconnects with backoff.
"""

from __future__ import annotations

from websockets.exceptions import ConnectionClosed, InvalidStatus, InvalidURI

from openagent.errors import (
    AgentReplacedError,
    AuthenticationError,
    ConfigurationError,
    ConnectionFailedError,
    ConnectionLostError,
    RegistrationError,
    TransportError,
)
from protocol import CLOSE_AGENT_REPLACED, CLOSE_POLICY_VIOLATION, REPLACED_BY_ANOTHER_KEY, ErrorMessage

__all__ = ["closed_error", "open_error", "registration_error"]


def open_error(url: str, exc: Exception, connect_timeout: float) -> TransportError | ConfigurationError:
    """Why the WebSocket to ``url`` could not be opened (``exc`` is what ``connect`` raised)."""
    if isinstance(exc, InvalidStatus):
        status = exc.response.status_code
        if status in (401, 403):
            return AuthenticationError(
                f"the master at {url} refused the connection (HTTP {status}); check OPENAGENT_API_KEY"
            )
        return ConnectionFailedError(f"the master at {url} rejected the WebSocket (HTTP {status})")
    if isinstance(exc, InvalidURI):
        return ConfigurationError(f"MASTER_WS is not a valid WebSocket URL: {url!r}")
    if isinstance(exc, TimeoutError):
        return ConnectionFailedError(
            f"could not connect to the master at {url} within {connect_timeout}s (WS_CONNECT_TIMEOUT)"
        )
    return ConnectionFailedError(f"could not connect to the master at {url}: {exc}")


def registration_error(url: str, agent_id: str, message: ErrorMessage) -> TransportError:
    """What an ``error`` answer to ``register`` means."""
    text = f"the master at {url} rejected agent {agent_id!r}: {message.message}"
    if message.code == "unauthorized":
        return AuthenticationError(text)
    if message.code == "agent_replaced":
        return AgentReplacedError(text)
    return RegistrationError(f"{text} ({message.code})")


def closed_error(
    url: str, agent_id: str, exc: ConnectionClosed, *, replaced: bool, why: str | None = None
) -> TransportError:
    """Why the connection closed: fatal for close codes 4001 and 1008 (or when an ``agent_replaced``
    error came first, ``replaced``), else a :class:`ConnectionLostError` to reconnect after; also
    for 4001 when another key replaced the agent (``why``: what the ``agent_replaced`` error said)."""
    code = exc.rcvd.code if exc.rcvd is not None else None
    if code == CLOSE_AGENT_REPLACED and exc.rcvd is not None and exc.rcvd.reason == REPLACED_BY_ANOTHER_KEY:
        return ConnectionLostError(
            f"agent {agent_id!r} was replaced on the master at {url} by a connection of another key"
            f" ({why or 'no reason given'})"
        )
    if replaced or code == CLOSE_AGENT_REPLACED:
        return AgentReplacedError(
            f"agent {agent_id!r} was replaced: a newer connection registered the same"
            f" agent_id on the master at {url} (close code {code})"
        )
    if code == CLOSE_POLICY_VIOLATION:
        return AuthenticationError(
            f"the master at {url} closed the connection of agent {agent_id!r} with code"
            f" {code} (policy violation); check OPENAGENT_API_KEY"
        )
    return ConnectionLostError(f"connection of agent {agent_id!r} to the master at {url} lost: {exc}")
