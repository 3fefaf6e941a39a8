"""One tool call the model asked for: checked, then run, and reported as it goes.

A call is resolved against the run's :class:`~master.agents.toolbox.Toolbox` and its arguments
checked against the tool's JSON Schema (an unknown tool or invalid arguments go back to the model
as the call's error, never sent); a valid call goes through the dispatcher
(:class:`~master.agents.tool_calls.ToolCaller`), or is one of the master's own functions:
``start_collaboration`` (:func:`collaboration_tool`) and ``spawn_agent`` (:func:`spawn_tool`).
Each call's ``tool_call``, ``tool_progress`` and ``tool_result`` events go to the run's
:class:`~master.orchestration.hooks.RunHooks`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from master.agents.calls import ToolRun
from master.agents.dispatch import Dispatcher, Target
from master.agents.tool_calls import ToolCaller
from master.agents.toolbox import Toolbox
from master.errors import CollaborationRejected, SandboxError, SessionStoreUnavailable
from master.llm.model import ToolCallRequest
from master.observability.metrics import Metrics
from master.orchestration.hooks import RunHooks, Verdict
from protocol import ToolCallEvent, ToolProgress, ToolProgressEvent, ToolResultEvent

__all__ = [
    "SPAWN_AGENT",
    "START_COLLABORATION",
    "ToolRunner",
    "collaboration_tool",
    "result_event",
    "spawn_tool",
]

START_COLLABORATION = "start_collaboration"
SPAWN_AGENT = "spawn_agent"


class ToolRunner:
    """Runs the calls of a round, one at a time (the orchestrator gathers them)."""

    def __init__(self, dispatcher: Dispatcher, metrics: Metrics | None = None) -> None:
        self._caller = ToolCaller(dispatcher, metrics)

    def verdict(self, toolbox: Toolbox, call: ToolCallRequest, hooks: RunHooks) -> Verdict:
        """``hooks.approval``'s word on a call; a call that cannot run anyway (unknown tool,
        invalid arguments) runs, to get its error."""
        assert hooks.approval is not None
        target = toolbox.resolve(call.name)
        if target is None:
            return "run"
        agent, tool = target
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            return "run"
        if not isinstance(arguments, dict) or tool.validate(arguments):
            return "run"
        return hooks.approval(call.name, agent, tool)

    async def run_or_refuse(
        self,
        toolbox: Toolbox,
        call: ToolCallRequest,
        hooks: RunHooks,
        tools: list[dict[str, Any]],
        verdicts: dict[str, Verdict],
    ) -> ToolRun:
        """Run ``call``, or answer it with an error when its verdict is ``refuse``."""
        if verdicts.get(call.id) == "refuse":
            target = toolbox.resolve(call.name)
            assert target is not None
            agent, tool = target
            error = (
                f"{call.name!r} requires a person's approval, and this query asked for no approval "
                '(approval: "never"); it was not run'
            )
            return self._refused(
                call, agent, tool.schema.name, json.loads(call.arguments or "{}"), error, hooks
            )
        return await self.run(toolbox, call, hooks, tools)

    async def run(
        self, toolbox: Toolbox, call: ToolCallRequest, hooks: RunHooks, tools: list[dict[str, Any]]
    ) -> ToolRun:
        """Run one call: the master's own functions, or a valid call of an agent's tool (an
        unknown tool or invalid arguments are answered with the error, never sent)."""
        if call.name == START_COLLABORATION and hooks.collaborate is not None:
            return await self._collaborate(call, hooks.collaborate, hooks)
        if call.name == SPAWN_AGENT and hooks.spawn is not None:
            return await self._spawn(call, hooks.spawn, toolbox, tools, hooks)
        target = toolbox.resolve(call.name)
        if target is None:
            known = sorted(tool["function"]["name"] for tool in tools)
            shown = ", ".join(known[:20]) + (", …" if len(known) > 20 else "")
            error = (
                f"unknown tool {call.name!r}; the tools are: {shown}"
                if known
                else f"unknown tool {call.name!r}"
            )
            run = ToolRun(call.name, None, None, call.arguments, error=error)
            if hooks.events is not None:
                hooks.emit(result_event(run, None))
            return run
        agent, tool = target
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError as exc:
            return self._refused(
                call, agent, tool.schema.name, call.arguments, f"arguments are not valid JSON: {exc}", hooks
            )
        if not isinstance(arguments, dict):
            return self._refused(
                call, agent, tool.schema.name, arguments, "arguments must be a JSON object", hooks
            )
        problems = tool.validate(arguments)
        if problems:
            error = f"invalid arguments for {tool.schema.name!r}: " + "; ".join(problems)
            return self._refused(call, agent, tool.schema.name, arguments, error, hooks)
        return await self.dispatch(agent, tool.schema.name, arguments, call.id, hooks)

    async def _collaborate(
        self,
        call: ToolCallRequest,
        collaborate: Callable[[list[str], str], Awaitable[dict[str, Any]]],
        hooks: RunHooks,
    ) -> ToolRun:
        run = ToolRun(call.name, None, START_COLLABORATION, call.arguments)
        try:
            arguments = json.loads(call.arguments or "{}")
            agents, task = arguments["agents"], arguments["task"]
            if not (
                isinstance(agents, list) and all(isinstance(a, str) for a in agents) and isinstance(task, str)
            ):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            run.error = "start_collaboration needs {'agents': [agent ids, initiator first], 'task': text}"
            return run
        run.arguments = arguments
        if hooks.events is not None:
            hooks.emit(
                ToolCallEvent(
                    call_id=call.id, agent_id=None, tool_name=START_COLLABORATION, arguments=arguments
                )
            )
        try:
            run.result = await collaborate(agents, task)
            run.success, run.dispatched, run.collaboration = True, True, agents
        except (CollaborationRejected, SessionStoreUnavailable) as exc:
            run.error = str(exc)
        if hooks.events is not None:
            hooks.emit(result_event(run, call.id))
        return run

    async def _spawn(
        self,
        call: ToolCallRequest,
        spawn: Callable[[str], Awaitable[Target]],
        toolbox: Toolbox,
        tools: list[dict[str, Any]],
        hooks: RunHooks,
    ) -> ToolRun:
        """Deploy a saved agent; on success its tools are offered from the next round on."""
        run = ToolRun(call.name, None, SPAWN_AGENT, call.arguments)
        try:
            arguments = json.loads(call.arguments or "{}")
            agent_id = arguments["agent_id"]
            if not isinstance(agent_id, str):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            run.error = "spawn_agent needs {'agent_id': the id of a saved agent}"
            return run
        run.arguments, run.agent_id = arguments, agent_id
        if hooks.events is not None:
            hooks.emit(
                ToolCallEvent(call_id=call.id, agent_id=agent_id, tool_name=SPAWN_AGENT, arguments=arguments)
            )
        try:
            agent = await spawn(agent_id)
        except SandboxError as exc:
            run.error = str(exc)
        else:
            added = toolbox.add(agent)
            tools.extend(added)
            run.success, run.dispatched = True, True
            run.result = {
                "agent_id": agent_id,
                "status": "running",
                "tools": [tool["function"]["name"] for tool in added],
            }
        if hooks.events is not None:
            hooks.emit(result_event(run, call.id))
        return run

    def _refused(
        self,
        call: ToolCallRequest,
        agent: Target,
        tool_name: str,
        arguments: Any,
        error: str,
        hooks: RunHooks,
    ) -> ToolRun:
        run = ToolRun(call.name, agent.agent_id, tool_name, arguments, error=error)
        if hooks.events is not None:
            hooks.emit(result_event(run, None))
        return run

    async def dispatch(
        self, agent: Target, tool_name: str, arguments: dict[str, Any], ref: str, hooks: RunHooks
    ) -> ToolRun:
        """Send a checked call to ``agent`` through the dispatcher, reporting its events."""

        def started(call_id: str) -> None:
            if hooks.events is not None:
                hooks.emit(
                    ToolCallEvent(
                        call_id=call_id, agent_id=agent.agent_id, tool_name=tool_name, arguments=arguments
                    )
                )

        def progress(p: ToolProgress) -> None:
            hooks.emit(
                ToolProgressEvent(
                    call_id=p.call_id,
                    message=p.message,
                    progress=p.progress,
                    agent_id=agent.agent_id,
                    tool_name=tool_name,
                )
            )

        options = hooks.call_options(agent, tool_name, arguments) if hooks.call_options else None
        run, call_id = await self._caller.run(
            agent,
            tool_name,
            arguments,
            options=options,
            on_started=started,
            on_progress=progress if hooks.events else None,
        )
        if hooks.events is not None:
            hooks.emit(result_event(run, call_id))
        return run


def collaboration_tool(eligible: list[str]) -> dict[str, Any]:
    """The ``start_collaboration`` function, offered when two or more linked agents support it."""
    return {
        "type": "function",
        "function": {
            "name": START_COLLABORATION,
            "description": (
                "Start a peer-to-peer collaboration in which agents negotiate or converge on a result, "
                "relayed by the master; returns the agreed summary. The first agent listed is the initiator. "
                f"Agents that can collaborate: {', '.join(eligible)}."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "agents": {"type": "array", "items": {"type": "string", "enum": eligible}, "minItems": 2},
                    "task": {"type": "string", "description": "What the agents must agree on."},
                },
                "required": ["agents", "task"],
            },
        },
    }


def spawn_tool(candidates: list[str]) -> dict[str, Any]:
    """The ``spawn_agent`` function, offered in auto mode when saved agents are not running."""
    return {
        "type": "function",
        "function": {
            "name": SPAWN_AGENT,
            "description": (
                "Deploy a saved agent that is not running yet (Kubernetes sandbox) and wait until it is "
                "connected; its tools are offered from the next step on. Saved agents not running: "
                f"{', '.join(candidates)}."
            ),
            "parameters": {
                "type": "object",
                "properties": {"agent_id": {"type": "string", "enum": candidates}},
                "required": ["agent_id"],
            },
        },
    }


def result_event(run: ToolRun, call_id: str | None) -> ToolResultEvent:
    """The ``tool_result`` event of a finished (or refused) call."""
    return ToolResultEvent(
        call_id=call_id,
        agent_id=run.agent_id,
        tool_name=run.tool_name,
        success=run.success,
        result=run.result if run.success else None,
        error=None if run.success else run.error,
    )
