"""Per-query budgets: request overrides, token and tool-call limits."""

from __future__ import annotations

import time

import pytest

from master.errors import BudgetExceeded
from master.orchestration.budgets import BudgetTracker
from protocol import Budget


def test_request_overrides_each_default_alone() -> None:
    defaults = {"tool_calls": 50, "tokens": 1000, "seconds": 300.0}
    plain = BudgetTracker.from_request(None, **defaults)
    assert (plain.max_tool_calls, plain.max_tokens, plain.max_seconds) == (50, 1000, 300.0)
    tight = BudgetTracker.from_request(Budget(max_tool_calls=0, max_seconds=1.5), **defaults)
    assert (tight.max_tool_calls, tight.max_tokens, tight.max_seconds) == (0, 1000, 1.5)


def test_tool_calls_are_granted_until_the_budget_is_spent() -> None:
    budget = BudgetTracker(max_tool_calls=3, max_tokens=10, max_seconds=60)
    assert budget.allow_tool_calls(2) == 2
    assert budget.allow_tool_calls(5) == 1  # only what is left
    with pytest.raises(BudgetExceeded) as info:
        budget.allow_tool_calls(1)
    assert (info.value.name, info.value.limit) == ("max_tool_calls", 3)


def test_tokens_are_checked_before_each_llm_call() -> None:
    budget = BudgetTracker(max_tool_calls=3, max_tokens=10, max_seconds=60)
    budget.check_tokens()
    budget.add_tokens(9)
    budget.check_tokens()
    budget.add_tokens(1)
    with pytest.raises(BudgetExceeded) as info:
        budget.check_tokens()
    assert (info.value.name, info.value.limit) == ("max_tokens", 10)


def test_remaining_seconds_counts_down_from_the_start_and_never_below_zero() -> None:
    spent = BudgetTracker(max_tool_calls=1, max_tokens=1, max_seconds=5, started=time.monotonic() - 10)
    assert spent.remaining_seconds == 0.0 and spent.elapsed >= 10
    fresh = BudgetTracker(max_tool_calls=1, max_tokens=1, max_seconds=3600)
    assert 0 < fresh.remaining_seconds <= 3600 and fresh.elapsed >= 0
