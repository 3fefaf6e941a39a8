"""The LLM orchestrator: answer directly, or call tools and answer from their results.

The model sees the conversation and the tools of the linked agents. When it asks
for tool calls, they run concurrently (arguments validated against each tool's
JSON Schema first, invalid ones go back as the error), the results go back to the
model, and it writes the answer. A failing tool never fails the query.

- Without auto mode there is one tool round, then the answer.
- In auto mode the loop goes on while the model asks for tools, at most
  ``ORCHESTRATOR_AUTO_MAX_STEPS`` rounds; at the limit the model is asked to
  answer with what was done, and the answer says the limit was hit.
- Budgets (tool calls, tokens, seconds) end a run cleanly with an answer naming
  the budget that stopped it.
- Each round is reported through :class:`RunHooks` (session turns, stream events; in
  :mod:`master.orchestration.hooks`); a call is checked and run by
  :class:`~master.orchestration.tool_runs.ToolRunner`.
- Tools the asker runs itself (:attr:`RunHooks.external`, the client tools of the OpenAI-compatible
  API) are offered beside the agents'; a round that calls one runs the agents' calls of the round,
  then pauses: the outcome is ``awaiting_tool_results`` with the calls in ``pending`` and the
  messages so far, and :meth:`Orchestrator.run` continues the run once the results are appended
  (``steps_done`` says how many rounds it had). Any pause for results from outside can use this.
- A call that needs a person's approval (:attr:`RunHooks.approval` says ``hold``) does not run:
  the other calls of its round run, then the run pauses the same way, with the held calls in
  ``held`` and the status ``awaiting_approval``; once decided, :meth:`Orchestrator.run_held` runs
  the approved ones and :meth:`Orchestrator.run` continues. ``refuse`` answers the call with an
  error instead (a query that asked for no approval, for a tool that requires it).
- In auto mode with the Kubernetes sandbox on, ``spawn_agent`` deploys a saved agent that is
  not running and waits for it to register; its tools join the offer for the next rounds.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

from master.agents.calls import ToolRun
from master.agents.dispatch import Dispatcher, Target
from master.agents.toolbox import Toolbox, function_name
from master.conversation.outcome import Outcome
from master.errors import BudgetExceeded, LLMError
from master.llm.model import ChatMessage, ChatModel, ChatResult, ToolCallRequest
from master.observability.metrics import Metrics
from master.orchestration import repairs
from master.orchestration.budgets import BudgetTracker
from master.orchestration.hooks import EventSink, RunHooks, Verdict
from master.orchestration.tool_runs import ToolRunner, collaboration_tool, spawn_tool
from protocol import PendingToolCall, StepEvent, TokenEvent

__all__ = ["EventSink", "Orchestrator", "RunHooks", "Verdict", "collaboration_tool", "spawn_tool"]

logger = logging.getLogger("master.orchestration.orchestrator")

STEP_LIMIT_NOTE = (
    "The step limit of {limit} tool rounds is reached: do not ask for more tools. Answer now with what "
    "was done and what remains undone."
)


class Orchestrator:
    """Runs the model and the tools for one query."""

    def __init__(
        self, llm: ChatModel, dispatcher: Dispatcher, *, auto_max_steps: int, metrics: Metrics | None = None
    ) -> None:
        self._llm = llm
        self._tools = ToolRunner(dispatcher, metrics)
        self._auto_max_steps = auto_max_steps
        self._metrics = metrics

    @property
    def llm(self) -> ChatModel:
        return self._llm

    async def run(
        self,
        *,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]],
        toolbox: Toolbox,
        model: str,
        auto_mode: bool,
        budget: BudgetTracker,
        hooks: RunHooks,
        steps_done: int = 0,
    ) -> Outcome:
        """Answer the query that ends ``messages``. Raises :class:`master.errors.LLMError`.

        ``steps_done``: the tool rounds a paused run had (it continues with ``messages`` as it
        left them plus the results it waited for)."""
        outcome = Outcome(answer="", steps=steps_done)
        hit_limit = False
        repaired = False  # the one repair round of a run is used
        repair_next = False  # the last round had malformed calls: offer the tools once more
        malformed = 0  # calls of the last round that could not run as written
        try:
            async with asyncio.timeout(budget.remaining_seconds):
                while True:
                    offer = tools if auto_mode or outcome.steps == 0 or repair_next else []
                    if repaired and not repair_next and malformed:
                        offer = []  # malformed again after the repair round: answer plainly
                    reply = await self._complete(model, messages, offer, budget, hooks)
                    if offer and not reply.tool_calls:
                        reply = self._text_calls(reply, offer)
                    if reply.tool_calls and offer and auto_mode and outcome.steps >= self._auto_max_steps:
                        hit_limit = True
                        limit_note = STEP_LIMIT_NOTE.format(limit=self._auto_max_steps)
                        messages.append({"role": "user", "content": limit_note})
                        reply = await self._complete(model, messages, [], budget, hooks)
                    if not reply.tool_calls or not offer or hit_limit:
                        outcome.answer = reply.content or _fallback_answer(outcome.tool_runs)
                        break
                    malformed = self._malformed(toolbox, reply.tool_calls, offer, hooks)
                    repair_next = bool(malformed) and not repaired
                    repaired = repaired or repair_next
                    await self._round(
                        reply.content, reply.tool_calls, messages, toolbox, budget, hooks, outcome, tools
                    )
                    if outcome.held:
                        outcome.answer, outcome.status = reply.content or "", "awaiting_approval"
                        break
                    if outcome.pending:
                        outcome.answer, outcome.status = reply.content or "", "awaiting_tool_results"
                        break
        except BudgetExceeded as exc:
            return _stopped(outcome, exc.name, exc.limit)
        except TimeoutError:
            return _stopped(outcome, "max_seconds", budget.max_seconds)
        except LLMError as exc:
            if not outcome.tool_runs:
                raise
            return _failed_after_tools(outcome, exc)
        if hit_limit:
            outcome.status, outcome.stopped_by = "stopped", "max_steps"
            outcome.answer = (
                f"[Stopped at the step limit of {self._auto_max_steps} tool rounds.] {outcome.answer}"
            )
        return outcome

    def _text_calls(self, reply: ChatResult, offer: list[dict[str, Any]]) -> ChatResult:
        """``reply`` with the tool calls its text holds as real ones (a weak model's habit)."""
        offered = {tool["function"]["name"] for tool in offer}
        calls, left = repairs.text_calls(reply.content, offered)
        if not calls:
            return reply
        for call in calls:
            self._count_repair("text_call", call.name, "a tool call written as text")
        return ChatResult(
            content=left,
            tool_calls=calls,
            total_tokens=reply.total_tokens,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
        )

    def _malformed(
        self, toolbox: Toolbox, calls: list[ToolCallRequest], offer: list[dict[str, Any]], hooks: RunHooks
    ) -> int:
        """How many of ``calls`` cannot run as written (each logged and counted); their errors
        go back to the model as their results."""
        known = {tool["function"]["name"] for tool in offer} | set(hooks.external)
        count = 0
        for call in calls:
            found = repairs.problem(toolbox, call, known)
            if found is not None:
                count += 1
                self._count_repair(found[0], call.name, found[1])
        return count

    def _count_repair(self, kind: repairs.RepairKind, name: str, why: str) -> None:
        logger.info("the model's call of %r needs a repair (%s): %s", name, kind, why)
        if self._metrics is not None:
            self._metrics.tool_call_repairs.labels(kind).inc()

    async def run_steps(
        self,
        *,
        messages: list[ChatMessage],
        steps: Sequence[tuple[Target, str, dict[str, Any]]],
        model: str,
        budget: BudgetTracker,
        hooks: RunHooks,
    ) -> Outcome:
        """Run fixed steps in order (an approved plan), then let the model write the answer."""
        outcome = Outcome(answer="")
        try:
            async with asyncio.timeout(budget.remaining_seconds):
                for index, (target, tool_name, arguments) in enumerate(steps):
                    # The OpenAI-safe name, as a normal round uses: the history is sent back to the model.
                    call = ToolCallRequest(
                        f"plan_step_{index + 1}", function_name(target.agent_id, tool_name), ""
                    )
                    budget.allow_tool_calls(1)
                    if hooks.events is not None:
                        hooks.emit(StepEvent(step=index + 1, tool_calls=[call.name]))
                    if hooks.sending is not None:
                        await hooks.sending([(call.id, call.name, arguments)])
                    run = await self._tools.dispatch(target, tool_name, arguments, call.id, hooks)
                    outcome.steps += 1
                    outcome.tool_runs.append(run)
                    messages.append(_assistant_calls(None, [(call.id, call.name, arguments)]))
                    messages.append(run.as_tool_message(call.id))
                    if hooks.on_step is not None:
                        await hooks.on_step([run])
                reply = await self._complete(model, messages, [], budget, hooks)
                outcome.answer = reply.content or _fallback_answer(outcome.tool_runs)
        except BudgetExceeded as exc:
            return _stopped(outcome, exc.name, exc.limit)
        except TimeoutError:
            return _stopped(outcome, "max_seconds", budget.max_seconds)
        except LLMError as exc:
            if not outcome.tool_runs:
                raise
            return _failed_after_tools(outcome, exc)
        return outcome

    async def _complete(
        self,
        model: str,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]],
        budget: BudgetTracker,
        hooks: RunHooks,
    ) -> Any:
        budget.check_tokens()
        on_token = (lambda text: hooks.emit(TokenEvent(text=text))) if hooks.events else None
        reply = await self._llm.complete(
            model=model, messages=messages, tools=tools or None, on_token=on_token, options=hooks.llm_options
        )
        budget.add_usage(reply.total_tokens, reply.prompt_tokens, reply.completion_tokens)
        return reply

    async def _round(
        self,
        content: str | None,
        calls: list[ToolCallRequest],
        messages: list[ChatMessage],
        toolbox: Toolbox,
        budget: BudgetTracker,
        hooks: RunHooks,
        outcome: Outcome,
        tools: list[dict[str, Any]],
    ) -> None:
        allowed = budget.allow_tool_calls(len(calls))
        if hooks.events is not None:
            hooks.emit(StepEvent(step=outcome.steps + 1, tool_calls=[call.name for call in calls]))
        taken = calls[:allowed]
        ours = [call for call in taken if call.name not in hooks.external] if hooks.external else taken
        verdicts = (
            {call.id: self._tools.verdict(toolbox, call, hooks) for call in ours} if hooks.approval else {}
        )
        held = [call for call in ours if verdicts.get(call.id) == "hold"]
        now = [call for call in ours if verdicts.get(call.id) != "hold"]
        if hooks.sending is not None and now:
            await hooks.sending([(call.id, call.name, call.arguments) for call in now])
        if len(now) == 1:  # the common case, without gather's tasks
            runs = [await self._tools.run_or_refuse(toolbox, now[0], hooks, tools, verdicts)]
        else:
            runs = list(
                await asyncio.gather(
                    *(self._tools.run_or_refuse(toolbox, call, hooks, tools, verdicts) for call in now)
                )
            )
        outcome.steps += 1
        outcome.tool_runs.extend(runs)
        messages.append(_assistant_calls(content, [(c.id, c.name, c.arguments) for c in taken]))
        messages.extend(run.as_tool_message(call.id) for run, call in zip(runs, now, strict=True))
        if hooks.on_step is not None and runs:
            await hooks.on_step(runs)
        if held:  # a person decides these: pause (the asker's own calls, if any, wait with them)
            outcome.held = [PendingToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in held]
            return
        if len(ours) < len(taken):  # the asker runs the others: pause for their results
            outcome.pending = [
                PendingToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in taken if c not in ours
            ]
            return
        if allowed < len(calls):
            raise BudgetExceeded("max_tool_calls", budget.max_tool_calls)

    async def run_held(
        self, toolbox: Toolbox, call: ToolCallRequest, hooks: RunHooks, tools: list[dict[str, Any]]
    ) -> ToolRun:
        """Run a call a person approved (``call.arguments`` as decided), checked like any call."""
        return await self._tools.run(toolbox, call, hooks, tools)


def _assistant_calls(content: str | None, calls: Sequence[tuple[str, str, Any]]) -> ChatMessage:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
            for call_id, name, args in calls
        ],
    }


def _fallback_answer(runs: Sequence[ToolRun]) -> str:
    """What was done, in words: used when the model wrote no answer, or a budget stopped it."""
    if not runs:
        return ""
    return "; ".join(
        f"{run.label} returned {json.dumps(run.result, default=str)[:500]}"
        if run.success
        else f"{run.label} failed: {run.error}"
        for run in runs
    )


BUDGET_LABELS = {
    "max_tool_calls": "tool-call budget ({limit:g} calls)",
    "max_tokens": "token budget ({limit:g} tokens)",
    "max_seconds": "time budget ({limit:g} s)",
}


def _failed_after_tools(outcome: Outcome, exc: LLMError) -> Outcome:
    """The run, stopped by the model's failure after tools already ran: the answer says so and
    keeps what the tools returned (the asker must not think nothing happened)."""
    outcome.status, outcome.stopped_by = "stopped", "llm_error"
    outcome.answer = (
        f"The model failed after {len(outcome.tool_runs)} tool call(s) had run ({exc}). "
        f"What the tools returned: {_fallback_answer(outcome.tool_runs)}"
    )
    logger.warning("run stopped by the model's failure after its tools ran: %s", exc)
    return outcome


def _stopped(outcome: Outcome, name: str, limit: float) -> Outcome:
    outcome.status, outcome.stopped_by = "stopped", name
    done = _fallback_answer(outcome.tool_runs)
    outcome.answer = (
        f"Stopped: the {BUDGET_LABELS[name].format(limit=limit)} was reached after {len(outcome.tool_runs)} tool call(s)."
        + (f" Done so far: {done}" if done else "")
    )
    logger.info("run stopped by %s", name)
    return outcome
