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
once: a result larger than ``OPENAGENT_MAX_TOOL_RESULT_BYTES`` (as compact JSON) fails the call
with a :class:`ToolFailed` naming the limit, which the model sees as the tool's failure (nothing
of it is kept); progress frames are rate-limited per call (:class:`~master.agents.pending.ProgressRelay`).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson

from master.agents.call_records import DEFAULT_MAX_RESULT_BYTES, CallRecords, result_too_large
from master.agents.frames import tool_call_frame
from master.agents.invocation import InvocationAgent, InvocationAgents
from master.agents.invoke_http import CallPoster
from master.agents.pending import (
    DEFAULT_PROGRESS_PER_SECOND,
    FINISHED_MEMORY,
    FINISHED_RETENTION_CALL_TIMEOUTS,
    CallbackOutcome,
    CallProgress,
    CallStarted,
    FinishedCall,
    PendingCall,
    ProgressRelay,
    RemoteCalls,
)
from master.agents.pending import Target as Target  # re-exported: where callers import it from
from master.agents.registry import LiveAgent
from master.agents.remote import RemoteAgent
from master.errors import AgentDisconnected, AgentUnavailable, ToolCallError, ToolFailed, ToolTimeout
from master.observability import tracing
from protocol import ToolCancel, ToolProgress, ToolResult

logger = logging.getLogger("master.agents.dispatch")


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
        self._invocation = invocation
        self._poster = CallPoster(http, invocation, master_base_url, invoke_timeout)
        self._call_timeout = call_timeout
        self._pending: dict[str, PendingCall] = {}
        self._finished: OrderedDict[str, FinishedCall] = OrderedDict()
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
        self._progress = ProgressRelay(progress_per_second, clock)
        self._record_progress = self._progress.record

    @property
    def progress_per_second(self) -> int:
        """``OPENAGENT_MAX_PROGRESS_PER_SECOND``: progress frames relayed per call and second."""
        return self._progress.per_second

    @property
    def progress_coalesced(self) -> int:
        """Progress frames held back by the rate limit since start (a counter in ``/metrics``); of
        those a call holds back in one second, only the latest is relayed, when the second ends."""
        return self._progress.coalesced

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
                    await self._poster.post(target, pending, arguments, invoke_seconds, timeout)
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
        self._finished[pending.call_id] = FinishedCall(pending.token, resolved, pending.last_progress, now)
        oldest = now - self._call_timeout * FINISHED_RETENTION_CALL_TIMEOUTS
        while self._finished and (
            len(self._finished) > FINISHED_MEMORY or next(iter(self._finished.values())).at < oldest
        ):
            self._finished.popitem(last=False)


def _token_ok(expected: str | None, presented: str) -> bool:
    return expected is not None and secrets.compare_digest(expected.encode(), presented.encode())
