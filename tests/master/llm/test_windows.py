"""The context budget follows the model's window: configured, else reported, else the default."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from master.llm.tokens import count_text
from master.llm.windows import (
    CALIBRATED_MARGIN,
    COUNT_MARGIN,
    MIN_BUDGET,
    TEMPLATE_TOKENS,
    ContextWindows,
    calibration_sample,
)
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


async def test_a_calibrated_ratio_replaces_the_fixed_margin_and_is_asked_once_per_model() -> None:
    asked: list[tuple[str, str]] = []

    async def reported() -> int | None:
        return 8192

    async def tokenize(model: str, text: str) -> int | None:
        asked.append((model, text))
        return round(count_text(text) * 1.2)

    sample = calibration_sample("You are an orchestrator.")
    windows = ContextWindows(
        default_budget=12000, output_tokens=2048, reported=reported, tokenize=tokenize, sample=sample
    )
    ratio = await windows.ratio("smollm2")
    assert ratio == pytest.approx(1.2, abs=0.01)
    room = 8192 - 2048 - TEMPLATE_TOKENS
    assert await windows.budget("smollm2") == int(room / (ratio * (1 + CALIBRATED_MARGIN)))
    assert await windows.budget("smollm2") > int(room / COUNT_MARGIN)  # a 1.2 tokenizer gets more room
    assert [model for model, _ in asked] == ["smollm2"]  # kept
    await windows.budget("other")
    assert [model for model, _ in asked] == ["smollm2", "other"] and asked[0][1] == sample
    assert "weather-agent__get_weather" in sample and "You are an orchestrator." in sample


async def test_without_a_tokenizer_the_fixed_margin_stays() -> None:
    async def reported() -> int | None:
        return 8192

    async def no_tokenizer(model: str, text: str) -> int | None:
        return None

    async def failing(model: str, text: str) -> int | None:
        raise OSError("connection refused")

    room = 8192 - 2048 - TEMPLATE_TOKENS
    for tokenize in (no_tokenizer, failing, None):
        windows = ContextWindows(
            default_budget=12000, output_tokens=2048, reported=reported, tokenize=tokenize, sample="sample"
        )
        assert await windows.ratio("m") is None
        assert await windows.budget("m") == int(room / COUNT_MARGIN)


async def test_a_tokenizer_finer_than_the_masters_count_never_gets_a_factor_below_one() -> None:
    async def reported() -> int | None:
        return 8192

    async def coarse(model: str, text: str) -> int | None:
        return count_text(text) // 2

    windows = ContextWindows(
        default_budget=100000,
        output_tokens=2048,
        reported=reported,
        tokenize=coarse,
        sample="some sample text",
    )
    assert await windows.budget("m") == 8192 - 2048 - TEMPLATE_TOKENS


async def test_a_tokenizer_that_could_not_be_reached_is_asked_again_one_without_is_not() -> None:
    async def reported() -> int | None:
        return 8192

    outcomes: list[int | None | Exception] = [OSError("connection refused"), 120]
    asked: list[str] = []

    async def flaky(model: str, text: str) -> int | None:
        asked.append(model)
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    windows = ContextWindows(
        default_budget=12000, output_tokens=2048, reported=reported, tokenize=flaky, sample="some sample text"
    )
    assert await windows.ratio("m") is None  # unreachable: the margin, this time
    assert await windows.ratio("m") == 120 / count_text("some sample text")  # asked again
    assert await windows.ratio("m") == 120 / count_text("some sample text") and asked == ["m", "m"]

    none_asked: list[str] = []

    async def none(model: str, text: str) -> int | None:
        none_asked.append(model)
        return None

    windows = ContextWindows(
        default_budget=12000, output_tokens=2048, reported=reported, tokenize=none, sample="some sample text"
    )
    assert await windows.ratio("m") is None and await windows.ratio("m") is None
    assert none_asked == ["m"]  # no tokenizer: not asked again


async def test_the_budget_is_window_bound_only_when_the_window_sets_it() -> None:
    windows = ContextWindows(
        default_budget=12000, output_tokens=2048, configured={"small": 8192, "big": 131072}
    )
    assert await windows.window_bound("small") and not await windows.window_bound("big")
    assert not await windows.window_bound("unknown")
