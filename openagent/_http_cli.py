"""One HTTP request from an ``openagent`` command to the master.

Shared by :mod:`openagent.cli` and :mod:`openagent.approvals_cli`: both find the master and its
key the same way (``MASTER_BASE_URL`` or ``MASTER_HOST``/``MASTER_PORT``, ``OPENAGENT_API_KEY``,
from the environment or ``.env``) and say the same when it cannot be reached or does not answer
in time. Each words a refusal its own way, so the caller passes its :class:`Refusal` formatter.
"""

from __future__ import annotations

from typing import Any, Protocol

import httpx

from openagent.config import ClientConfig, RegistrationConfig

__all__ = ["CommandError", "Refusal", "answer_timeout", "request"]

_HTTP_MARGIN = 10.0
"""Seconds a command waits beyond ``QUERY_RESPONSE_TIMEOUT`` for a run's answer (the master
answers within it)."""


class CommandError(Exception):
    """A failure the command reports in one line on stderr (exit status 1)."""


class Refusal(Protocol):
    """Words the master's refusal (a status of 400 or more, or a body that is not a JSON object)."""

    def __call__(self, method: str, url: str, status: int, payload: Any, text: str) -> str:
        """One line; ``payload`` is the parsed body (``None`` when it is not JSON), ``text`` the raw one."""
        ...


def answer_timeout() -> float:
    """How long to wait for a request that runs a query: ``QUERY_RESPONSE_TIMEOUT`` and a margin."""
    return ClientConfig.from_env().query_timeout + _HTTP_MARGIN


def request(method: str, route: str, *, timeout: float, refusal: Refusal, body: Any = None) -> dict[str, Any]:
    """Send one request to the master and return its JSON object; raise :class:`CommandError`
    saying what went wrong (unreachable, timed out, or refused in ``refusal``'s words)."""
    config = RegistrationConfig.from_env()
    url = f"{config.master_base_url}{route}"
    try:
        response = httpx.request(method, url, json=body, headers=config.auth_headers, timeout=timeout)
    except httpx.TimeoutException:
        raise CommandError(f"{method} {url} timed out after {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise CommandError(
            f"cannot reach the master at {config.master_base_url} ({exc}); start it "
            "(./scripts/run.sh or openagent master) or set MASTER_BASE_URL / MASTER_PORT"
        ) from None
    try:
        payload = response.json()
    except ValueError:
        payload = None
    if response.status_code >= 400 or not isinstance(payload, dict):
        raise CommandError(refusal(method, url, response.status_code, payload, response.text))
    return payload
