"""What an HTTP invocation agent sends back to the master about a call: progress and result.

The master POSTs a call with a ``callback_url`` and, usually, a ``progress_url``;
:class:`CallReporter` POSTs ``{"call_id", "message", "progress"}`` to the latter while the
tool runs and ``{"call_id", "success", "result" | "error"}`` to the former at the end.
Used by :mod:`openagent.invocation`, under whose logger it logs; :func:`response_detail`
also by :mod:`openagent.registration`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import httpx
import pydantic_core

from openagent._handlers import check_progress
from protocol import ToolResult

__all__ = ["CallReporter", "response_detail"]

logger = logging.getLogger("openagent.invocation")

_RESULT_ATTEMPTS, _RESULT_DELAY = 3, 0.2  # the delay doubles after each failed attempt, seconds
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
    """

    def __init__(
        self,
        http: Callable[[], aiohttp.ClientSession],
        call_id: str,
        callback_url: str,
        progress_url: str | None = None,
    ) -> None:
        self._http = http
        self.call_id = call_id
        self.callback_url = callback_url
        self.progress_url = progress_url or _progress_url(callback_url)

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
        """POST ``result`` to the callback URL, retrying unreachable and 5xx answers twice; a 4xx
        answer is final. A result that cannot be delivered is logged and dropped."""
        outcome = {"result": result.result} if result.success else {"error": result.error}
        content = pydantic_core.to_json({"call_id": result.call_id, "success": result.success, **outcome})
        for attempt in range(1, _RESULT_ATTEMPTS + 1):
            try:
                async with self._http().post(self.callback_url, data=content, headers=_JSON) as response:
                    status = response.status
                    text = await response.text() if status >= 300 else ""
            except (aiohttp.ClientError, TimeoutError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if status < 300:
                    return
                if status < 500:
                    logger.warning(
                        "master refused the result of call %s (HTTP %d: %s); dropping it",
                        self.call_id,
                        status,
                        detail_of(text),
                    )
                    return
                problem = f"HTTP {status}"
            if attempt < _RESULT_ATTEMPTS:
                await asyncio.sleep(_RESULT_DELAY * 2 ** (attempt - 1))
        logger.error("could not deliver the result of call %s: %s", self.call_id, problem)


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
