"""Registering an HTTP invocation agent with the master: ``POST {MASTER_BASE_URL}/register``.

:class:`~openagent.invocation.InvocationActionAgent` registers itself when it starts. Call
:func:`register_invocation_agent` yourself when you serve the agent's app (or your own HTTP
server speaking the same contract) some other way::

    from openagent.registration import register_invocation_agent

    await register_invocation_agent("echo-agent", "http://10.0.0.5:9000", TOOLS)

The master keeps the registration (in Redis), so it survives restarts of either side.
Needs only the SDK's own dependencies (``httpx``), not the ``invocation`` extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from openagent._backoff import backoff_delays
from openagent._callbacks import response_detail
from openagent._handlers import validate_tools
from openagent.config import RegistrationConfig
from openagent.errors import AuthenticationError, ConfigurationError, RegistrationError
from protocol import ToolSchema

__all__ = ["register_invocation_agent"]

logger = logging.getLogger("openagent.registration")

_FIRST_DELAY, _MAX_DELAY = 0.5, 10.0  # between registration attempts, seconds


async def register_invocation_agent(
    agent_id: str,
    invocation_base_url: str,
    tools: Sequence[ToolSchema | Mapping[str, Any]],
    *,
    metadata: Mapping[str, Any] | None = None,
    master_base_url: str | None = None,
    api_key: str | None = None,
    timeout: float | None = None,  # noqa: ASYNC109 - seconds per attempt, not for the whole call
    client: httpx.AsyncClient | None = None,
    replica_urls: Sequence[str] = (),
) -> dict[str, Any]:
    """Register an HTTP agent you serve yourself: ``POST {master_base_url}/register``.

    Retries forever, with delays from 0.5 s doubling to 10 s (with jitter), while the master is
    unreachable, times out or answers 5xx; wrap it in :func:`asyncio.timeout` to give up sooner.

    Args:
        agent_id, invocation_base_url, tools, metadata: What to register.
        master_base_url: The master's HTTP URL (``MASTER_BASE_URL``, default ``http://127.0.0.1:8000``).
        api_key: Sent as ``Authorization: Bearer <api_key>`` (``OPENAGENT_API_KEY``; ``""`` for none).
        timeout: Seconds per attempt (``HTTP_REGISTER_TIMEOUT``, default 10).
        client: The HTTP client to use; a temporary one when omitted.
        replica_urls: Further base URLs of copies of the same agent: the master balances the
            calls over ``invocation_base_url`` and these.

    Returns:
        The master's JSON reply (an empty dict when it is not a JSON object).

    Raises:
        AuthenticationError: The master answered 401: set ``OPENAGENT_API_KEY``.
        RegistrationError: Any other 4xx; the message carries the master's ``detail``.
        ConfigurationError: An invalid tool, URL or environment variable.
    """
    config = RegistrationConfig.from_env(master_base_url=master_base_url, api_key=api_key, timeout=timeout)
    for name, each in [
        ("invocation_base_url", invocation_base_url),
        *(("replica_urls", u) for u in replica_urls),
    ]:
        if not each.startswith(("http://", "https://")):
            raise ConfigurationError(f"{name} must be an http:// or https:// URL, got {each!r}")
    body = {
        "agent_id": agent_id,
        "invocation_base_url": invocation_base_url,
        "tools": [
            tool.model_dump(mode="json", exclude_none=True) for tool in validate_tools(agent_id, tools)
        ],
        "metadata": dict(metadata or {}),
        **({"replica_urls": list(replica_urls)} if replica_urls else {}),
    }
    url, delays = f"{config.master_base_url}/register", backoff_delays(_FIRST_DELAY, _MAX_DELAY)
    async with contextlib.AsyncExitStack() as stack:
        if client is None:
            client = await stack.enter_async_context(httpx.AsyncClient())
        while True:
            try:
                response = await client.post(
                    url, json=body, headers=config.auth_headers, timeout=config.timeout
                )
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if response.is_success:
                    reply = response.json() if response.content else {}
                    return reply if isinstance(reply, dict) else {}
                refused = (
                    f"master at {config.master_base_url} refused agent {agent_id!r}:"
                    f" HTTP {response.status_code}: {response_detail(response)}"
                )
                if response.status_code == 401:
                    raise AuthenticationError(f"{refused} (set OPENAGENT_API_KEY to the master's key)")
                if response.status_code < 500:
                    raise RegistrationError(refused)
                problem = f"HTTP {response.status_code}"
            wait = next(delays)
            logger.warning(
                "could not register agent %s at %s (%s); retrying in %.1f s", agent_id, url, problem, wait
            )
            await asyncio.sleep(wait)
