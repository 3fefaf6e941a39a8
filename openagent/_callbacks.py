"""What an HTTP invocation agent sends back to the master about a call: progress and result.

The master POSTs a call with a ``callback_url``, usually a ``progress_url`` and a
``result_window_seconds`` (how long it keeps the call's record: its timeout plus a margin);
:class:`CallReporter` POSTs ``{"call_id", "message", "progress"}`` to the latter while the
tool runs and ``{"call_id", "success", "result" | "error"}`` to the former at the end. The
result is retried with backoff (honouring ``Retry-After``) until that window closes, so a master
that restarts meanwhile still gets it.
Used by :mod:`openagent.invocation`, under whose logger it logs; :func:`response_detail`
also by :mod:`openagent.registration`.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import httpx
import pydantic_core

from openagent._backoff import backoff_delays
from openagent._handlers import check_progress
from protocol import ToolResult

__all__ = ["CallReporter", "response_detail"]

logger = logging.getLogger("openagent.invocation")

DEFAULT_RESULT_WINDOW = 90.0
"""Seconds a result is retried when the master does not say (its default call timeout + 60 s)."""
_RESULT_DELAY, _RESULT_MAX_DELAY = 0.2, 5.0  # the backoff between attempts, seconds
_MAX_RETRY_AFTER = 60.0
_PROGRESS_TIMEOUT = aiohttp.ClientTimeout(total=5.0)
_JSON = {"Content-Type": "application/json"}


class CallReporter:
    """Posts the progress and the result of one call to the master.

    Args:
        http: Returns the agent's HTTP client session (asked on each request). aiohttp, not httpx:
            on a busy agent it costs a fraction of the CPU per callback.
        call_id: The call.
        callback_url: Where the result goes, exactly as the master gave it.
        progress_url: Where progress goes; when omitted, ``callback_url`` with its path ending
            ``/tool_progress`` instead of ``/tool_callback`` (no progress when it ends otherwise).
        result_window: Seconds from now during which the master accepts the result (it keeps
            the call's record for the call's timeout plus 60 s); the result is retried until
            then. :data:`DEFAULT_RESULT_WINDOW` when the master did not say.
        clock: Seconds, monotonic (:func:`time.monotonic`); with ``sleep``, what a test replaces
            to walk the whole window without waiting it.
        sleep: Waits between attempts (:func:`asyncio.sleep`).
    """

    def __init__(
        self,
        http: Callable[[], aiohttp.ClientSession],
        call_id: str,
        callback_url: str,
        progress_url: str | None = None,
        result_window: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._http = http
        self.call_id = call_id
        self.callback_url = callback_url
        self.progress_url = progress_url or _progress_url(callback_url)
        self._clock, self._sleep = clock, sleep
        window = DEFAULT_RESULT_WINDOW if result_window is None else result_window
        self.deadline = clock() + window
        """When the master forgets the call (on ``clock``): retries stop then, not after a number
        of attempts."""

    async def progress(self, message: str, progress: float | None = None) -> None:
        """The call's :class:`~openagent.action.ProgressCallback`: failures to post are logged
        and ignored."""
        check_progress(progress)
        if self.progress_url is None:
            return
        body = {"call_id": self.call_id, "message": message, "progress": progress}
        try:
            async with self._http().post(self.progress_url, json=body, timeout=_PROGRESS_TIMEOUT):
                pass
        except (aiohttp.ClientError, TimeoutError) as exc:
            logger.debug("could not post progress of call %s: %s", self.call_id, exc)

    async def deliver(self, result: ToolResult) -> None:
        """POST ``result`` to the callback URL until the master takes it or the result window
        closes: an unreachable master and 5xx answers are retried with backoff (a ``503``'s
        ``Retry-After`` is honoured), so a master restart or a failover loses nothing; a 4xx
        answer is final. A result that cannot be delivered is logged and dropped."""
        outcome = {"result": result.result} if result.success else {"error": result.error}
        content = pydantic_core.to_json({"call_id": result.call_id, "success": result.success, **outcome})
        delays = backoff_delays(_RESULT_DELAY, _RESULT_MAX_DELAY)
        attempts = 0
        while True:
            attempts += 1
            retry_after: float | None = None
            try:
                async with self._http().post(self.callback_url, data=content, headers=_JSON) as response:
                    status = response.status
                    text = await response.text() if status >= 300 else ""
                    if status == 503:
                        retry_after = _retry_after(response.headers.get("Retry-After"))
            except (aiohttp.ClientError, TimeoutError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if status < 300:
                    if attempts > 1:
                        logger.info("delivered the result of call %s at attempt %d", self.call_id, attempts)
                    return
                if status < 500:
                    logger.warning(
                        "master refused the result of call %s (HTTP %d: %s); dropping it",
                        self.call_id,
                        status,
                        detail_of(text),
                    )
                    return
                problem = f"HTTP {status}: {detail_of(text)}"
            delay = next(delays) if retry_after is None else retry_after
            remaining = self.deadline - self._clock()
            if remaining <= 0:
                break
            if attempts == 1:
                logger.warning(
                    "could not deliver the result of call %s (%s); retrying for up to %.0f s",
                    self.call_id,
                    problem,
                    remaining,
                )
            await self._sleep(min(delay, remaining))
        logger.error(
            "could not deliver the result of call %s after %d attempts, the master has forgotten the call"
            " by now: %s",
            self.call_id,
            attempts,
            problem,
        )


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date), capped; None if absent."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return min(max(seconds, 0.0), _MAX_RETRY_AFTER)


def response_detail(response: httpx.Response) -> str:
    """The ``detail`` of an error answer (FastAPI style), else the start of its body."""
    return detail_of(response.text)


def detail_of(body: str) -> str:
    """The ``detail`` of an error body (FastAPI style), else the start of the body."""
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        detail = None
    return detail if isinstance(detail, str) else str(detail or body[:300] or "no detail")


def _progress_url(callback_url: str) -> str | None:
    """``callback_url`` with its path ending ``/tool_progress`` instead of ``/tool_callback``."""
    url = urlsplit(callback_url)
    if not url.path.endswith("/tool_callback"):
        return None
    return urlunsplit(url._replace(path=url.path.removesuffix("/tool_callback") + "/tool_progress"))
