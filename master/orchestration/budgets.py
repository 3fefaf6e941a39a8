"""Per-query budgets: tool calls, LLM tokens and wall-clock seconds.

Defaults come from Settings (``ORCHESTRATOR_MAX_TOOL_CALLS``,
``ORCHESTRATOR_MAX_TOKENS``, ``ORCHESTRATOR_MAX_SECONDS``); a request may override
each one (``budget`` in ``POST /query``). Reaching a budget ends the run cleanly
with an answer naming it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from master.errors import BudgetExceeded
from protocol import Budget

_NO_OVERRIDE = Budget()
"""A request without ``budget`` (read only: built once, not per query)."""


@dataclass
class BudgetTracker:
    """What one run may still spend."""

    max_tool_calls: int
    max_tokens: int
    max_seconds: float
    tool_calls: int = 0
    tokens: int = 0
    prompt_tokens: int = 0
    """Of the orchestrator's own rounds (:meth:`add_usage`), as the provider reported them."""
    completion_tokens: int = 0
    round_tokens: int = 0
    """The total of the orchestrator's own rounds (:attr:`tokens` adds the context summaries)."""
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def from_request(
        cls, override: Budget | None, *, tool_calls: int, tokens: int, seconds: float
    ) -> BudgetTracker:
        override = override or _NO_OVERRIDE
        return cls(
            max_tool_calls=override.max_tool_calls if override.max_tool_calls is not None else tool_calls,
            max_tokens=override.max_tokens if override.max_tokens is not None else tokens,
            max_seconds=override.max_seconds if override.max_seconds is not None else seconds,
        )

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def remaining_seconds(self) -> float:
        return max(0.0, self.max_seconds - self.elapsed)

    def add_tokens(self, tokens: int) -> None:
        self.tokens += tokens

    def add_usage(self, total: int, prompt: int, completion: int) -> None:
        """Count one orchestrator round: its total against the budget, its parts for the usage."""
        self.tokens += total
        self.round_tokens += total
        self.prompt_tokens += prompt
        self.completion_tokens += completion

    def check_tokens(self) -> None:
        """Before an LLM call: stop when the token budget is spent."""
        if self.tokens >= self.max_tokens:
            raise BudgetExceeded("max_tokens", self.max_tokens)

    def allow_tool_calls(self, wanted: int) -> int:
        """How many of ``wanted`` calls may run; raises when none may."""
        left = self.max_tool_calls - self.tool_calls
        if left <= 0:
            raise BudgetExceeded("max_tool_calls", self.max_tool_calls)
        allowed = min(left, wanted)
        self.tool_calls += allowed
        return allowed
