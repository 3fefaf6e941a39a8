"""Tool-call routing: send a call to an agent and wait for its result.

Each call gets a fresh ``call_id`` and a future in the pending table.

- WebSocket agents get a ``tool_call`` frame and answer with ``tool_result``;
  only the connection that was called can resolve the call.
- HTTP invocation agents get ``POST {base}{endpoint}`` (within
  ``TOOL_INVOKE_HTTP_TIMEOUT``) carrying a ``callback_url`` with a per-call secret
  token, and answer at ``POST /tool_callback``. Only that token resolves the
  call, so an invocation agent never needs the master's API key.

A call ends with its result, at once when a WebSocket agent disconnects, or
after ``TOOL_CALL_TIMEOUT``. While calls to an invocation agent are in flight, its
``/health`` is checked every ``OPENAGENT_INFLIGHT_HEALTH_INTERVAL`` seconds: a failed
check (or a refused connection) fails its calls at once, naming the agent, instead of
holding the query until the timeout. Callbacks for finished or timed-out calls are refused
and change nothing; a repeated callback is answered as a duplicate. Each invocation call is
recorded in Redis before it is sent (:mod:`master.agents.call_records`): a callback for a
call this master does not know (another master's, or its own before a restart) is forwarded
to the master waiting for it, or recorded in the call's session once.

Every result and every progress frame passes here, whatever brought it (a WebSocket frame, an
HTTP callback, a connector, another master), so the limits on what agents send are decided here
once:

- a result larger than ``OPENAGENT_MAX_TOOL_RESULT_BYTES`` (as compact JSON) fails the call with
  a :class:`ToolFailed` naming the limit, which the model sees as the tool's failure; nothing of
  it is kept;
- at most ``OPENAGENT_MAX_PROGRESS_PER_SECOND`` progress frames of one call are relayed and
  logged (at DEBUG) per second; the others are coalesced: the latest is relayed when the second
  is over, and each one held back is counted (``openagent_tool_progress_coalesced_total``).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import aiohttp
import orjson
from aiohttp.payload import BytesPayload

from master.agents.call_records import (
    DEFAULT_MAX_RESULT_BYTES,
    RECORD_MARGIN_SECONDS,
    CallRecords,
    result_too_large,
)
from master.agents.frames import tool_call_frame
from master.agents.invocation import InvocationAgent, InvocationAgents
from master.agents.registry import LiveAgent
from master.agents.remote import RemoteAgent
from master.errors import AgentDisconnected, AgentUnavailable, ToolCallError, ToolFailed, ToolTimeout
from master.observability import tracing
from master.observability.redaction import cap
from master.storage.json_bytes import dump_json
from protocol import ToolCancel, ToolProgress, ToolResult

logger = logging.getLogger("master.agents.dispatch")

Target = LiveAgent | InvocationAgent | RemoteAgent
CallbackOutcome = Literal["accepted", "duplicate", "finished", "unknown"]
CallStarted = Callable[[str], None]
"""Told the ``call_id`` of a call once it has been sent."""
CallProgress = Callable[[ToolProgress], None]

MAX_PROGRESS_MESSAGE_CHARS = 1000
"""A progress message is kept, relayed and shown cut to this many characters (and logged cut to
:data:`master.observability.redaction.LOG_ARG_MAX_CHARS`, control characters escaped)."""

DEFAULT_PROGRESS_PER_SECOND = 10
"""``OPENAGENT_MAX_PROGRESS_PER_SECOND``' default."""
PROGRESS_WINDOW_SECONDS = 1.0

_FINISHED_MEMORY = 10_000
"""How many finished calls are remembered, to tell duplicates and late callbacks apart."""
FINISHED_RETENTION_CALL_TIMEOUTS = 2.0
"""...and for how long: twice ``TOOL_CALL_TIMEOUT`` after the call ended. Later, a callback is
"unknown" rather than "finished"; the memory (about 0.5 kB a call) stops growing under a steady
load instead of filling up to its count."""


class RemoteCalls(Protocol):
    """Hands calls to the masters holding :class:`RemoteAgent` targets (``master.cluster``).

    Their results come back through :meth:`Dispatcher.settle_remote` and
    :meth:`Dispatcher.progress_remote`.
    """

    async def send_call(
        self,
        agent: RemoteAgent,
        call_id: str,
        tool_name: str,
        arguments: dict[str, Any],
        wait_seconds: float,
        traceparent: str | None,
    ) -> None:
        """Hand the call to the master holding ``agent``; raises :class:`AgentUnavailable` when it is gone."""

    def forget(self, call_id: str) -> None:
        """The call ended (result, error or timeout): stop watching its owner."""


@dataclass(eq=False)
class PendingCall:
    """A tool call waiting for its result."""

    call_id: str
    target: Target
    tool_name: str
    future: asyncio.Future[Any]
    token: str | None = None
    started: float = field(default_factory=time.monotonic)
    last_progress: ToolProgress | None = None
    on_progress: CallProgress | None = None
    window_start: float = -PROGRESS_WINDOW_SECONDS
    """When the current second of progress frames began (the rate limit's window)."""
    window_count: int = 0
    """Progress frames relayed in the current window."""
    held: ToolProgress | None = None
    """The latest progress frame held back by the rate limit, relayed when the window ends."""
    flush: asyncio.TimerHandle | None = None
    url_index: int | None = None
    """The invocation agent's URL the call went to (``InvocationAgent.urls``), while in flight."""

    @property
    def agent_id(self) -> str:
        return self.target.agent_id


@dataclass
class _Finished:
    token: str | None
    resolved: bool
    last_progress: ToolProgress | None
    at: float = 0.0


class Dispatcher:
    """Routes tool calls to WebSocket and HTTP agents and matches their results."""

    def __init__(
        self,
        *,
        http: aiohttp.ClientSession,
        invocation: InvocationAgents,
        master_base_url: str,
        call_timeout: float,
        invoke_timeout: float,
        inflight_health_interval: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        records: CallRecords | None = None,
        remote: RemoteCalls | None = None,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        progress_per_second: int = DEFAULT_PROGRESS_PER_SECOND,
    ) -> None:
        self._http = http
        self._invocation = invocation
        self._callback_base = master_base_url.rstrip("/")
        self._call_timeout = call_timeout
        self._invoke_timeout = aiohttp.ClientTimeout(total=invoke_timeout)
        self._pending: dict[str, PendingCall] = {}
        self._finished: OrderedDict[str, _Finished] = OrderedDict()
        self._health_interval = inflight_health_interval
        self._clock = clock
        self._watchers: dict[str, asyncio.Task[None]] = {}
        self._cancels: set[asyncio.Task[None]] = set()
        """``tool_cancel`` frames being sent."""
        """Per invocation agent with calls in flight: the task that health-checks it."""
        self._remote = remote
        """How calls reach the agents of other masters (``OPENAGENT_CLUSTER``), or ``None``."""
        self.records = records
        """Where each HTTP invocation call is recorded before it goes out, so that its callback may
        reach another master, or this one after a restart (:mod:`master.agents.call_records`)."""
        self.refusal: str | None = None
        """Why new calls fail at once (the master has drained: :meth:`stop`), or ``None``."""
        self._released: set[str] = set()
        self.max_result_bytes = max_result_bytes
        """``OPENAGENT_MAX_TOOL_RESULT_BYTES``: a larger result fails its call."""
        self.progress_per_second = progress_per_second
        """``OPENAGENT_MAX_PROGRESS_PER_SECOND``: progress frames relayed per call and second."""
        self.progress_coalesced = 0
        """Progress frames held back by the rate limit since start (a counter in ``/metrics``); of
        those a call holds back in one second, only the latest is relayed, when the second ends."""

    def _tell_cancelled(self, agent: LiveAgent, call_id: str) -> None:
        """Send a WebSocket agent ``tool_cancel`` for a call whose caller was cancelled (best effort)."""

        async def send() -> None:
            frame = ToolCancel(call_id=call_id, reason="the caller cancelled the call")
            try:
                await agent.send(frame.model_dump_json())
            except Exception as exc:  # gone, or going: nothing left to stop
                logger.debug("tool_cancel of call %s not sent to %s: %s", call_id, agent.agent_id, exc)

        task = asyncio.create_task(send(), name=f"tool_cancel {call_id}")
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)

    async def aclose(self) -> None:
        """Stop the health watchers (master shutdown)."""
        await asyncio.gather(*self._cancels, return_exceptions=True)
        watchers = list(self._watchers.values())
        for task in watchers:
            task.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)

    @property
    def in_flight(self) -> int:
        """Tool calls waiting for their result now."""
        return len(self._pending)

    async def call(
        self,
        target: Target,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        wait_seconds: float | None = None,
        invoke_seconds: float | None = None,
        on_started: CallStarted | None = None,
        on_progress: CallProgress | None = None,
        arguments_json: str | None = None,
    ) -> Any:
        """Run ``tool_name`` on ``target`` and return its result.

        ``wait_seconds`` and ``invoke_seconds`` replace ``TOOL_CALL_TIMEOUT`` and
        ``TOOL_INVOKE_HTTP_TIMEOUT`` for this call (the RAG tools have their own).
        ``arguments_json``, when given, is the arguments already encoded (a call another master
        sent): a WebSocket agent gets them as they are, other targets decode them.

        Raises :class:`AgentUnavailable`, :class:`AgentDisconnected`,
        :class:`ToolTimeout` or :class:`ToolFailed`.
        """
        if self.refusal is not None:
            raise AgentUnavailable(
                f"tool {tool_name!r} on agent {target.agent_id!r} was not called: {self.refusal}"
            )
        timeout = self._call_timeout if wait_seconds is None else wait_seconds
        if arguments_json is not None and not isinstance(target, LiveAgent):
            arguments, arguments_json = orjson.loads(arguments_json), None
        if isinstance(target, LiveAgent):
            target = target.pick()  # the replica with the fewest calls in flight
            target.in_flight += 1
        call_id = secrets.token_hex(16)
        token = secrets.token_urlsafe(24) if isinstance(target, InvocationAgent) else None
        pending = PendingCall(call_id, target, tool_name, asyncio.get_running_loop().create_future(), token)
        pending.on_progress = on_progress
        self._pending[call_id] = pending
        if on_started is not None:
            on_started(call_id)
        remote: asyncio.Task[None] | None = None
        try:
            async with asyncio.timeout(timeout):
                if isinstance(target, RemoteAgent):
                    if self._remote is None:
                        raise AgentUnavailable(f"agent {target.agent_id!r} is on another master")
                    await self._remote.send_call(
                        target, call_id, tool_name, arguments, timeout, tracing.traceparent()
                    )
                elif isinstance(target, LiveAgent):
                    frame = tool_call_frame(
                        call_id, tool_name, arguments, tracing.traceparent(), arguments_json=arguments_json
                    )
                    await self._send_to_replica(target, pending, frame)
                elif target.transport != "invocation":
                    remote = asyncio.create_task(
                        self._connector_call(target, pending, arguments, timeout),
                        name=f"{target.transport} call {call_id}",
                    )
                    self._watch(target)
                else:
                    if self.records is not None:
                        await self.records.record(
                            call_id, token or "", target.agent_id, tool_name, arguments, timeout
                        )
                    await self._post_call(target, pending, arguments, invoke_seconds, timeout)
                    self._watch(target)
                return await pending.future
        except TimeoutError:
            raise ToolTimeout(
                f"tool {tool_name!r} on agent {target.agent_id!r} gave no result within {timeout:g} s"
            ) from None
        except asyncio.CancelledError:
            answered = pending.future.done() and not pending.future.cancelled()  # (awaiting it cancels it)
            if isinstance(pending.target, LiveAgent) and not answered:
                self._tell_cancelled(pending.target, call_id)  # the agent can stop the work nobody waits for
            raise
        finally:
            if isinstance(pending.target, LiveAgent):
                pending.target.in_flight -= 1
            elif pending.url_index is not None and isinstance(pending.target, InvocationAgent):
                pending.target.urls.done(pending.url_index)
            if remote is not None and not remote.done():
                remote.cancel()  # the connector cancels the remote work it started
            if pending.flush is not None:
                pending.flush.cancel()
            self._pending.pop(call_id, None)
            self._remember(pending)
            if self._remote is not None and isinstance(target, RemoteAgent):
                self._remote.forget(call_id)

    async def _connector_call(
        self, agent: InvocationAgent, pending: PendingCall, arguments: dict[str, Any], wait_seconds: float
    ) -> None:
        """Run a call on an MCP server or an A2A agent through its connector, settling ``pending``."""
        connector = self._invocation.connectors.get(agent.transport)
        future = pending.future

        def progress(message: str, fraction: float | None) -> None:
            if not future.done():
                update = ToolProgress(call_id=pending.call_id, message=message, progress=fraction)
                self._record_progress(pending, update, agent.transport)

        try:
            if connector is None:
                raise AgentUnavailable(
                    f"this master has no {agent.transport} connector for {agent.agent_id!r}"
                )
            result = await connector.call(
                agent, pending.tool_name, arguments, wait_seconds=wait_seconds, on_progress=progress
            )
        except AgentUnavailable as exc:
            self._invocation.mark(agent, "DOWN", str(exc))
            if not future.done():
                future.set_exception(exc)
        except ToolCallError as exc:
            if not future.done():
                future.set_exception(exc)
        except Exception as exc:  # a connector's bug or an unexpected protocol error: the call fails
            logger.warning("%s call to %s failed: %s", agent.transport, agent.agent_id, type(exc).__name__)
            if not future.done():
                future.set_exception(
                    ToolFailed(
                        f"tool {pending.tool_name!r} on agent {agent.agent_id!r} failed: {type(exc).__name__}: {exc}"
                    )
                )
        else:
            await self._invocation.touch(agent)
            if not future.done():
                self._deliver(pending, result)

    async def _send_to_replica(self, agent: LiveAgent, pending: PendingCall, frame: str) -> None:
        """Send the call's frame to ``agent``; when that connection is gone before the frame
        left (the call is known not to have run), to the next live replica of its id;
        ``pending.target`` is the replica that got it. A call is failed if its replica
        disconnects after that: it may have run, so it is never sent twice."""
        tried = [agent]
        while True:
            try:
                await self._send_frame(agent, frame)
                return
            except AgentDisconnected:
                others = [replica for replica in agent.group if replica not in tried]
                if not others:
                    raise
                agent.in_flight -= 1
                agent = min(others, key=lambda replica: replica.in_flight)
                agent.in_flight += 1
                tried.append(agent)
                pending.target = agent
                logger.info("call %s goes to another replica of %s", pending.call_id, agent.agent_id)

    async def _send_frame(self, agent: LiveAgent, frame: str) -> None:
        try:
            await agent.send(frame)
        except ConnectionError as exc:
            raise AgentDisconnected(
                f"agent {agent.agent_id!r} disconnected before receiving the call"
            ) from exc

    async def _post_call(
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

    def resolve(self, agent: LiveAgent, result: ToolResult) -> bool:
        """Deliver a WebSocket ``tool_result``; False when no such call is waiting for that connection."""
        pending = self._pending.get(result.call_id)
        if pending is None or pending.target is not agent or pending.future.done():
            return False
        self._settle(pending, result)
        return True

    def resolve_callback(self, token: str, result: ToolResult) -> CallbackOutcome:
        """Deliver an HTTP callback carrying the call's ``token``."""
        pending = self._pending.get(result.call_id)
        if pending is not None and _token_ok(pending.token, token):
            if pending.future.done():
                return "duplicate"
            self._settle(pending, result)
            return "accepted"
        finished = self._finished.get(result.call_id)
        if finished is not None and _token_ok(finished.token, token):
            return "duplicate" if finished.resolved else "finished"
        return "unknown"

    def settle_remote(self, call_id: str, *, result: Any = None, error: ToolCallError | None = None) -> bool:
        """End a call that another master ran (or whose master went away); False when none waits."""
        pending = self._pending.get(call_id)
        if pending is None or pending.future.done() or not isinstance(pending.target, RemoteAgent):
            return False
        if error is not None:
            pending.future.set_exception(error)
        else:
            self._deliver(pending, result)
        return True

    def progress_remote(self, progress: ToolProgress) -> bool:
        """Progress of a call that another master runs on its agent; False when none waits."""
        pending = self._pending.get(progress.call_id)
        if pending is None or pending.future.done() or not isinstance(pending.target, RemoteAgent):
            return False
        self._record_progress(pending, progress, "cluster")
        return True

    def _settle(self, pending: PendingCall, result: ToolResult) -> None:
        if result.success:
            self._deliver(pending, result.result)
        else:
            pending.future.set_exception(
                ToolFailed(
                    f"tool {pending.tool_name!r} on agent {pending.agent_id!r} failed: "
                    f"{result.error or 'no error message given'}"
                )
            )

    def _deliver(self, pending: PendingCall, result: Any) -> None:
        """End ``pending`` with ``result``, or with a :class:`ToolFailed` naming the limit when the
        result is larger than :attr:`max_result_bytes` (:func:`result_too_large`: the result is
        dropped, never stored)."""
        too_large = result_too_large(
            pending.agent_id, pending.tool_name, pending.call_id, result, self.max_result_bytes
        )
        if too_large is None:
            pending.future.set_result(result)
        else:
            pending.future.set_exception(ToolFailed(too_large))

    def progress(self, agent: LiveAgent, progress: ToolProgress) -> bool:
        """Record WebSocket progress; False when no such call is running on that connection."""
        pending = self._pending.get(progress.call_id)
        if pending is None or pending.target is not agent:
            return False
        self._record_progress(pending, progress, "WS")
        return True

    def progress_callback(self, token: str, progress: ToolProgress) -> bool:
        """Record HTTP progress carrying the call's ``token``; False for unknown or finished calls."""
        pending = self._pending.get(progress.call_id)
        if pending is None or not _token_ok(pending.token, token) or pending.future.done():
            return False
        self._record_progress(pending, progress, "HTTP")
        return True

    def _record_progress(self, pending: PendingCall, progress: ToolProgress, transport: str) -> None:
        """Keep ``progress`` as the call's latest, and relay it unless the call has had
        :attr:`progress_per_second` frames relayed in the current second: then it is held back
        (the latest held one is relayed when the second ends) and counted."""
        if len(progress.message) > MAX_PROGRESS_MESSAGE_CHARS:
            progress = progress.model_copy(
                update={"message": cap(progress.message, MAX_PROGRESS_MESSAGE_CHARS)}
            )
        pending.last_progress = progress
        now = self._clock()
        if now - pending.window_start >= PROGRESS_WINDOW_SECONDS:
            pending.window_start, pending.window_count = now, 0
        if pending.window_count < self.progress_per_second:
            pending.held = None  # superseded by this one (a flush late in its window)
            if pending.flush is not None:
                pending.flush.cancel()
                pending.flush = None
            pending.window_count += 1
            self._relay_progress(pending, progress, transport)
            return
        self.progress_coalesced += 1
        pending.held = progress
        if pending.flush is None:
            delay = max(0.0, pending.window_start + PROGRESS_WINDOW_SECONDS - now)
            pending.flush = asyncio.get_running_loop().call_later(
                delay, self._flush_progress, pending, transport
            )

    def _flush_progress(self, pending: PendingCall, transport: str) -> None:
        """The window of a call with a held progress frame ended: relay that frame (the latest)."""
        pending.flush = None
        held, pending.held = pending.held, None
        if held is None or pending.future.done():
            return
        pending.window_start, pending.window_count = self._clock(), 1
        self._relay_progress(pending, held, transport)

    def _relay_progress(self, pending: PendingCall, progress: ToolProgress, transport: str) -> None:
        if logger.isEnabledFor(logging.DEBUG):
            percent = "" if progress.progress is None else f" {progress.progress:.0%}"
            logger.debug(
                "progress (%s) %s.%s call=%s%s %s",
                transport,
                pending.agent_id,
                pending.tool_name,
                progress.call_id,
                percent,
                progress.message,
            )
        if pending.on_progress is not None:
            pending.on_progress(progress)

    def latest_progress(self, call_id: str) -> tuple[ToolProgress | None, bool] | None:
        """(latest progress, still running) of a known call, or ``None``."""
        pending = self._pending.get(call_id)
        if pending is not None:
            return pending.last_progress, not pending.future.done()
        finished = self._finished.get(call_id)
        if finished is not None:
            return finished.last_progress, False
        return None

    def fail_agent(self, agent: Target, reason: str, error: type[ToolCallError] = AgentDisconnected) -> int:
        """Fail every call in flight on ``agent`` at once; returns how many."""
        failed = 0
        for pending in list(self._pending.values()):
            if pending.target is agent and not pending.future.done():
                pending.future.set_exception(
                    error(f"agent {agent.agent_id!r} {reason} while running tool {pending.tool_name!r}")
                )
                failed += 1
        return failed

    def _fail_down_urls(self, agent: InvocationAgent) -> None:
        for pending in list(self._pending.values()):
            index = pending.url_index
            if pending.target is agent and index is not None and agent.urls.down(index):
                if not pending.future.done():
                    pending.future.set_exception(
                        AgentUnavailable(
                            f"agent {agent.agent_id!r} at {agent.urls.urls[index]} failed its health check"
                            f" while running tool {pending.tool_name!r} (another copy answers)"
                        )
                    )

    def stop(self, refusal: str, failure: str) -> int:
        """Refuse every new call with ``refusal`` and fail the calls in flight with ``failure``
        (the end of a drain, :mod:`master.gateway.drain`); returns how many failed."""
        self.refusal = refusal
        failed = 0
        for pending in list(self._pending.values()):
            if not pending.future.done():
                message = f"tool {pending.tool_name!r} on agent {pending.agent_id!r} failed: {failure}"
                if isinstance(pending.target, InvocationAgent) and self.records is not None:
                    # The agent still runs it: its record stays pending, and its callback, at the
                    # next master, is recorded in the session (master.agents.call_records).
                    self._released.add(pending.call_id)
                    message += "; its result will be recorded in the session when the agent delivers it"
                pending.future.set_exception(AgentDisconnected(message))
                failed += 1
        return failed

    def released(self, call_id: str) -> bool:
        """Whether this master gave up on the invocation call ``call_id`` without its outcome
        (:meth:`stop`): storing the query's turn must then leave the call's record pending."""
        return call_id in self._released

    def _in_flight(self, agent: InvocationAgent) -> bool:
        return any(p.target is agent and not p.future.done() for p in self._pending.values())

    def _watch(self, agent: InvocationAgent) -> None:
        """Health-check ``agent`` while it has calls in flight (one watcher per agent)."""
        task = self._watchers.get(agent.agent_id)
        if task is None or task.done():
            self._watchers[agent.agent_id] = asyncio.create_task(
                self._watch_loop(agent), name=f"health watch {agent.agent_id}"
            )

    async def _watch_loop(self, agent: InvocationAgent) -> None:
        try:
            while self._in_flight(agent):
                await asyncio.sleep(self._health_interval)
                if not self._in_flight(agent):
                    break
                if await self._invocation.check(agent) == "DOWN":
                    failed = self.fail_agent(
                        agent,
                        f"failed its health check ({agent.last_error}); it is marked DOWN",
                        AgentUnavailable,
                    )
                    logger.warning("agent %s is DOWN: %d call(s) in flight failed", agent.agent_id, failed)
                else:  # one of its copies is down: the calls it had fail (they may have run: not re-sent)
                    self._fail_down_urls(agent)
        finally:
            if self._watchers.get(agent.agent_id) is asyncio.current_task():
                del self._watchers[agent.agent_id]

    def _remember(self, pending: PendingCall) -> None:
        resolved = pending.future.done() and not pending.future.cancelled()
        if resolved and pending.future.exception() is not None:
            resolved = isinstance(pending.future.exception(), ToolFailed)
        now = self._clock()
        self._finished[pending.call_id] = _Finished(pending.token, resolved, pending.last_progress, now)
        oldest = now - self._call_timeout * FINISHED_RETENTION_CALL_TIMEOUTS
        while self._finished and (
            len(self._finished) > _FINISHED_MEMORY or next(iter(self._finished.values())).at < oldest
        ):
            self._finished.popitem(last=False)


def _token_ok(expected: str | None, presented: str) -> bool:
    return expected is not None and secrets.compare_digest(expected.encode(), presented.encode())
