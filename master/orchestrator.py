"""The LLM orchestrator: answer directly, or call tools and answer from their results.

One round: the model sees the conversation and the tools of the linked agents;
if it asks for tool calls, they run concurrently (arguments validated against
each tool's JSON Schema first), their results or errors go back to the model,
and the model writes the final answer. A failing tool never fails the query:
the model is told what failed and says so.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from master.dispatch import Dispatcher
from master.errors import ToolCallError
from master.llm import ChatMessage, ChatModel, ToolCallRequest
from master.prompts import system_prompt
from master.toolbox import Toolbox
from protocol import PromptProfile

logger = logging.getLogger("master.orchestrator")

_HISTORY_RESULT_CHARS = 2000
"""Tool results longer than this are cut when earlier turns are replayed to the model."""


@dataclass
class ToolRun:
    """One tool call the model asked for, and how it went."""

    function_name: str
    agent_id: str | None
    tool_name: str | None
    arguments: Any
    dispatched: bool = False
    """True when the call reached the agent (false: refused before sending)."""
    success: bool = False
    result: Any = None
    error: str | None = None

    def as_tool_message(self, tool_call_id: str) -> ChatMessage:
        body = {"result": self.result} if self.success else {"error": self.error}
        return {"role": "tool", "tool_call_id": tool_call_id, "content": json.dumps(body, default=str)}


@dataclass
class Outcome:
    """What the orchestrator did for one query."""

    answer: str
    tool_runs: list[ToolRun] = field(default_factory=list)
    tokens: int = 0


def history_messages(turns: Sequence[dict[str, Any]]) -> list[ChatMessage]:
    """Replay stored turns as chat messages: each query and its answer, with tool results inline."""
    messages: list[ChatMessage] = []
    current_query: str | None = None
    notes: list[str] = []
    answer: str | None = None

    def flush() -> None:
        if current_query is None:
            return
        messages.append({"role": "user", "content": current_query})
        text = "\n".join([*notes, answer or ""]).strip()
        if text:
            messages.append({"role": "assistant", "content": text})

    last_query_id: object = object()
    for turn in turns:
        decision = turn.get("decision")
        if decision == "summary":
            flush()
            current_query, notes, answer = None, [], None
            messages.append(
                {
                    "role": "system",
                    "content": f"Summary of the earlier conversation: {turn.get('summary', '')}",
                }
            )
            continue
        if turn.get("query_id") != last_query_id:
            flush()
            last_query_id = turn.get("query_id")
            current_query, notes, answer = str(turn.get("query", "")), [], None
        if decision == "call_tool":
            outcome = (
                f"returned {json.dumps(turn.get('result'), default=str)}"
                if "result" in turn
                else f"failed: {turn.get('error')}"
            )
            notes.append(
                f"[called {turn.get('tool_agent_id')}.{turn.get('tool_name')}"
                f"({json.dumps(turn.get('tool_args'), default=str)}) {outcome[:_HISTORY_RESULT_CHARS]}]"
            )
        elif decision == "collaboration":
            notes.append(
                f"[collaboration of {turn.get('agents')} on {turn.get('task')!r}: {turn.get('summary')}]"
            )
        if turn.get("answer"):
            answer = str(turn["answer"])
    flush()
    return messages


class Orchestrator:
    """Runs the model and the tools for one query."""

    def __init__(self, llm: ChatModel, dispatcher: Dispatcher) -> None:
        self._llm = llm
        self._dispatcher = dispatcher

    async def run(
        self,
        *,
        query: str,
        history: Sequence[ChatMessage],
        toolbox: Toolbox,
        model: str,
        profile: PromptProfile,
    ) -> Outcome:
        """Answer ``query``. Raises :class:`master.errors.LLMError` when the model cannot be reached."""
        messages: list[ChatMessage] = [
            {"role": "system", "content": system_prompt(profile)},
            *history,
            {"role": "user", "content": query},
        ]
        tools = toolbox.openai_tools()
        first = await self._llm.complete(model=model, messages=messages, tools=tools or None)
        if not first.tool_calls:
            return Outcome(answer=first.content or "", tokens=first.total_tokens)

        runs = await asyncio.gather(*(self._run_tool(toolbox, call) for call in first.tool_calls))
        messages.append(
            {
                "role": "assistant",
                "content": first.content,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for call in first.tool_calls
                ],
            }
        )
        messages.extend(
            run.as_tool_message(call.id) for run, call in zip(runs, first.tool_calls, strict=True)
        )
        final = await self._llm.complete(model=model, messages=messages, tools=None)
        answer = final.content or _fallback_answer(runs)
        return Outcome(answer=answer, tool_runs=list(runs), tokens=first.total_tokens + final.total_tokens)

    async def _run_tool(self, toolbox: Toolbox, call: ToolCallRequest) -> ToolRun:
        target = toolbox.resolve(call.name)
        if target is None:
            return ToolRun(call.name, None, None, call.arguments, error=f"unknown tool {call.name!r}")
        agent, tool = target
        run = ToolRun(call.name, agent.agent_id, tool.schema.name, call.arguments)
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError as exc:
            run.error = f"arguments are not valid JSON: {exc}"
            return run
        run.arguments = arguments
        if not isinstance(arguments, dict):
            run.error = "arguments must be a JSON object"
            return run
        problems = tool.validate(arguments)
        if problems:
            run.error = f"invalid arguments for {tool.schema.name!r}: " + "; ".join(problems)
            return run
        run.dispatched = True
        try:
            run.result = await self._dispatcher.call(agent, tool.schema.name, arguments)
            run.success = True
        except ToolCallError as exc:
            run.error = str(exc)
            logger.warning("tool call failed: %s", exc)
        return run


def _fallback_answer(runs: Sequence[ToolRun]) -> str:
    """An answer when the model wrote none after the tool round."""
    parts = []
    for run in runs:
        label = f"{run.agent_id}.{run.tool_name}" if run.agent_id else run.function_name
        parts.append(
            f"{label} returned {json.dumps(run.result, default=str)}"
            if run.success
            else f"{label} failed: {run.error}"
        )
    return "; ".join(parts)
