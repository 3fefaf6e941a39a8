"""Tool-call routing: send a ``tool_call`` to an agent and wait for its ``tool_result``.

Each call gets a fresh ``call_id`` and a future in the pending table. The future
is resolved by the agent's ``tool_result``, failed at once when the agent
disconnects, or timed out after ``TOOL_CALL_TIMEOUT``. Results for unknown
call ids, or from an agent other than the one called, are refused.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from master.errors import AgentDisconnected, AgentUnavailable, ToolFailed, ToolTimeout
from master.registry import LiveAgent, Registry
from protocol import ToolCall, ToolProgress, ToolResult

logger = logging.getLogger("master.dispatch")

ProgressListener = Callable[["PendingCall", ToolProgress], None]


@dataclass(eq=False)
class PendingCall:
    """A tool call waiting for its result."""

    call_id: str
    agent: LiveAgent
    tool_name: str
    future: asyncio.Future[Any]
    started: float = field(default_factory=time.monotonic)
    last_progress: ToolProgress | None = None


class Dispatcher:
    """Routes tool calls to live WebSocket agents and matches their results."""

    def __init__(self, registry: Registry, *, default_timeout: float) -> None:
        self._registry = registry
        self._default_timeout = default_timeout
        self._pending: dict[str, PendingCall] = {}
        self._progress_listeners: list[ProgressListener] = []

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def add_progress_listener(self, listener: ProgressListener) -> None:
        self._progress_listeners.append(listener)

    async def call(
        self, agent_id: str, tool_name: str, arguments: dict[str, Any], *, wait_seconds: float | None = None
    ) -> Any:
        """Run ``tool_name`` on ``agent_id`` and return its result.

        Raises :class:`AgentUnavailable`, :class:`AgentDisconnected`,
        :class:`ToolTimeout` or :class:`ToolFailed`.
        """
        agent = self._registry.get(agent_id)
        if agent is None:
            raise AgentUnavailable(f"agent {agent_id!r} is not connected")
        timeout = self._default_timeout if wait_seconds is None else wait_seconds
        call_id = uuid.uuid4().hex
        pending = PendingCall(call_id, agent, tool_name, asyncio.get_running_loop().create_future())
        self._pending[call_id] = pending
        try:
            await agent.send(
                ToolCall(call_id=call_id, tool_name=tool_name, arguments=arguments).model_dump_json()
            )
            async with asyncio.timeout(timeout):
                return await pending.future
        except TimeoutError:
            raise ToolTimeout(
                f"tool {tool_name!r} on agent {agent_id!r} gave no result within {timeout:g} s"
            ) from None
        except ConnectionError as exc:
            raise AgentDisconnected(f"agent {agent_id!r} disconnected before receiving the call") from exc
        finally:
            self._pending.pop(call_id, None)

    def resolve(self, agent: LiveAgent, result: ToolResult) -> bool:
        """Deliver ``result`` from ``agent``; False when no such call is waiting for that agent."""
        pending = self._pending.get(result.call_id)
        if pending is None or pending.agent is not agent or pending.future.done():
            return False
        if result.success:
            pending.future.set_result(result.result)
        else:
            pending.future.set_exception(
                ToolFailed(
                    f"tool {pending.tool_name!r} on agent {agent.agent_id!r} failed: "
                    f"{result.error or 'no error message given'}"
                )
            )
        return True

    def progress(self, agent: LiveAgent, progress: ToolProgress) -> bool:
        """Record progress of a running call; False when no such call is running on that agent."""
        pending = self._pending.get(progress.call_id)
        if pending is None or pending.agent is not agent:
            return False
        pending.last_progress = progress
        percent = "" if progress.progress is None else f" {progress.progress:.0%}"
        logger.info(
            "progress (WS) %s.%s call=%s%s %s",
            agent.agent_id,
            pending.tool_name,
            progress.call_id,
            percent,
            progress.message,
        )
        for listener in self._progress_listeners:
            listener(pending, progress)
        return True

    def fail_agent(self, agent: LiveAgent, reason: str) -> int:
        """Fail every call in flight on ``agent`` at once; returns how many."""
        failed = 0
        for pending in list(self._pending.values()):
            if pending.agent is agent and not pending.future.done():
                pending.future.set_exception(
                    AgentDisconnected(
                        f"agent {agent.agent_id!r} {reason} while running tool {pending.tool_name!r}"
                    )
                )
                failed += 1
        return failed
