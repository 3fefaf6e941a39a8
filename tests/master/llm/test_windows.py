"""The context budget follows the model's window: configured, else reported, else the default."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from master.llm.windows import COUNT_MARGIN, MIN_BUDGET, TEMPLATE_TOKENS, ContextWindows
from master.settings import Settings, parse_windows


async def test_the_budget_is_the_window_less_the_answer_with_a_margin_never_above_the_default() -> None:
    async def reported() -> int | None:
        return 8192

    windows = ContextWindows(
        default_budget=12000, output_tokens=2048, configured={"big": 131072, "tiny": 1024}, reported=reported
    )
    assert await windows.budget("smollm2") == int((8192 - 2048 - TEMPLATE_TOKENS) / COUNT_MARGIN)
    assert await windows.budget("big") == 12000  # never above ORCHESTRATOR_CONTEXT_MAX_TOKENS
    assert await windows.budget("tiny") == MIN_BUDGET
    unknown = ContextWindows(default_budget=12000, output_tokens=2048)
    assert await unknown.budget("gpt-4o") == 12000


def test_windows_setting_is_parsed_and_a_bad_pair_is_named() -> None:
    assert parse_windows(" smollm2=8192, llama3.2:1b=131072 ,") == {"smollm2": 8192, "llama3.2:1b": 131072}
    with pytest.raises(ValidationError, match="'smollm2' is not model=tokens"):
        Settings(_env_file=None, openagent_llm_context_windows="smollm2")
