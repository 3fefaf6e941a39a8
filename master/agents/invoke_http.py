"""The ``POST`` that hands a tool call to an HTTP invocation agent (one of its URLs), for
:class:`master.agents.dispatch.Dispatcher`."""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
from aiohttp.payload import BytesPayload

from master.agents.call_records import RECORD_MARGIN_SECONDS
from master.agents.invocation import InvocationAgent, InvocationAgents
from master.agents.pending import PendingCall
from master.errors import AgentUnavailable, ToolFailed
from master.observability import tracing
from master.storage.json_bytes import dump_json

logger = logging.getLogger("master.agents.dispatch")


class CallPoster:
    """Posts calls to invocation agents: the body names the callback and progress URLs with the
    call's token; a refused connection tries the agent's next URL (the call is known not sent)."""

    def __init__(
        self,
        http: aiohttp.ClientSession,
        invocation: InvocationAgents,
        master_base_url: str,
        invoke_timeout: float,
    ) -> None:
        self._http = http
        self._invocation = invocation
        self._callback_base = master_base_url.rstrip("/")
        self._invoke_timeout = aiohttp.ClientTimeout(total=invoke_timeout)

    async def post(
        self,
        agent: InvocationAgent,
        pending: PendingCall,
        arguments: dict[str, Any],
        invoke_seconds: float | None = None,
        call_timeout: float | None = None,
    ) -> None:
        query = f"call_id={pending.call_id}&token={pending.token or ''}"  # token_urlsafe: nothing to quote
        body: dict[str, Any] = {
            "call_id": pending.call_id,
            "tool_name": pending.tool_name,
            "arguments": arguments,
            "callback_url": f"{self._callback_base}/tool_callback?{query}",
            "progress_url": f"{self._callback_base}/tool_progress?{query}",
        }
        if call_timeout is not None:  # the agent retries its result as long as the record lives
            body["result_window_seconds"] = int(call_timeout) + RECORD_MARGIN_SECONDS
        parent = tracing.traceparent()
        headers = {"traceparent": parent} if parent else None
        timeout = (
            self._invoke_timeout if invoke_seconds is None else aiohttp.ClientTimeout(total=invoke_seconds)
        )
        encoded = dump_json(body)
        urls, tried = agent.urls, list[int]()
        while True:
            index = pending.url_index = urls.pick(tried)  # counts as in flight until the call ends
            assert index is not None  # the first pick always finds one; a retry only when one is left
            url = agent.endpoint_url(pending.tool_name, index)
            try:
                data = BytesPayload(encoded, content_type="application/json", encoding="utf-8")
                async with self._http.post(url, data=data, headers=headers, timeout=timeout) as response:
                    status = response.status
                    refusal = (await response.text())[:300] if status >= 300 else ""
                urls.answered(index)
                break
            except (aiohttp.ClientError, TimeoutError) as exc:
                tried.append(index)
                # Refused before the request left: known not sent, so another copy may take it.
                if isinstance(exc, aiohttp.ClientConnectorError) and len(tried) < len(urls.urls):
                    urls.refused(index)
                    urls.done(index)
                    pending.url_index = None
                    logger.info(
                        "call %s: %s refused the connection, trying another URL", pending.call_id, url
                    )
                    continue
                if len(urls.urls) > 1 and len(tried) < len(urls.urls):
                    urls.refused(
                        index
                    )  # it may have been sent: never sent twice, it fails; the agent stays UP
                    raise AgentUnavailable(
                        f"agent {agent.agent_id!r} did not take the call at {url} ({type(exc).__name__})"
                    ) from exc
                self._invocation.mark(agent, "DOWN", f"{type(exc).__name__}: {exc}")
                raise AgentUnavailable(
                    f"agent {agent.agent_id!r} is unreachable at {url} ({type(exc).__name__}); it is marked DOWN"
                ) from exc
        if status >= 300:
            raise ToolFailed(
                f"agent {agent.agent_id!r} refused the call to {pending.tool_name!r}: HTTP {status} {refusal}"
            )
        await self._invocation.touch(agent)
