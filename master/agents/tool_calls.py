"""One tool call with everything around it: the log context, the trace span, the metrics.

The orchestrator's calls (the model asked for them) and the doors' direct calls (an MCP
``tools/call``, an A2A message naming a tool) both go through :meth:`ToolCaller.run`, so every
call is counted, traced and recorded the same way whoever asked for it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from master.agents.calls import CallOptions, ToolRun
from master.agents.dispatch import Dispatcher, Target
from master.agents.invocation import InvocationAgent
from master.errors import AgentDisconnected, AgentUnavailable, ToolCallError, ToolFailed, ToolTimeout
from master.observability import logs, tracing
from master.observability.metrics import Metrics
from protocol import ToolProgress

logger = logging.getLogger("master.agents.tool_calls")

CALL_OUTCOMES: dict[type[ToolCallError], str] = {
    ToolTimeout: "timeout",
    AgentUnavailable: "unavailable",
    AgentDisconnected: "disconnected",
    ToolFailed: "failed",
}
"""The ``outcome`` label of a failed tool call (``GET /metrics``)."""


class ToolCaller:
    """Runs one tool call through the :class:`Dispatcher`, counted, traced and logged."""

    def __init__(self, dispatcher: Dispatcher, metrics: Metrics | None = None) -> None:
        self.dispatcher = dispatcher
        self._metrics = metrics

    async def run(
        self,
        agent: Target,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        options: CallOptions | None = None,
        on_started: Callable[[str], None] | None = None,
        on_progress: Callable[[ToolProgress], None] | None = None,
    ) -> tuple[ToolRun, str | None]:
        """Call ``tool_name`` on ``agent``; returns how it went and the call's id (``None`` when it
        never started). A failed call is a :class:`ToolRun` with ``success`` false and the error:
        this never raises for the tool's sake (cancellation propagates)."""
        run = ToolRun(f"{agent.agent_id}__{tool_name}", agent.agent_id, tool_name, arguments, dispatched=True)
        call_ids: list[str] = []

        def started(call_id: str) -> None:
            call_ids.append(call_id)
            if isinstance(agent, InvocationAgent):
                run.recorded_call_id = call_id
            logs.set_call(call_id)
            tracing.set_current_attribute("openagent.call_id", call_id)
            if on_started is not None:
                on_started(call_id)

        outcome = "success"
        begun = time.perf_counter()
        attributes = {"openagent.agent_id": agent.agent_id, "openagent.tool": tool_name}
        with logs.call_context(), tracing.span(f"tool {agent.agent_id}.{tool_name}", attributes) as span:
            try:
                run.result = await self.dispatcher.call(
                    agent,
                    tool_name,
                    options.arguments if options else arguments,
                    wait_seconds=options.wait_seconds if options else None,
                    invoke_seconds=options.invoke_seconds if options else None,
                    on_started=started,
                    on_progress=on_progress,
                )
                run.success = True
            except ToolCallError as exc:
                run.error = str(exc)
                outcome = CALL_OUTCOMES.get(type(exc), "failed")
                tracing.set_attribute(span, "error.type", outcome)
                logger.warning("tool call failed: %s", exc)
                if run.recorded_call_id is not None and self.dispatcher.released(run.recorded_call_id):
                    run.recorded_call_id = (
                        None  # the master gave up, not the agent: a callback may still come
                    )
        if self._metrics is not None:
            labels = (agent.agent_id, tool_name, outcome)
            self._metrics.tool_calls.labels(*labels).inc()
            self._metrics.tool_call_seconds.labels(*labels).observe(time.perf_counter() - begun)
        return run, call_ids[0] if call_ids else None
