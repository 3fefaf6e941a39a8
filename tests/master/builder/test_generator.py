"""``master.builder.generator``: one retry with the failed checks, then 422-worthy failures."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from master.builder.generator import AgentGenerator, GenerationRequest, extract_code, module_name_for
from master.errors import GenerationFailed
from master.llm.model import ChatResult, FunctionChatModel
from tests.master.builder.samples import BAD, PROSE, UNIT_CONVERTER, fenced


def scripted(*answers: str) -> tuple[FunctionChatModel, list[list[dict[str, Any]]]]:
    queue = list(answers)
    seen: list[list[dict[str, Any]]] = []

    def reply(messages: Sequence[dict[str, Any]], tools: object) -> ChatResult:
        seen.append(list(messages))
        return ChatResult(content=queue.pop(0))

    return FunctionChatModel(reply), seen


REQUEST = GenerationRequest(
    name="Unit converter", description="Convert units", model="gpt-4o-mini", tools=("convert",)
)


def test_module_names_and_code_extraction() -> None:
    assert module_name_for("Unit Converter!") == "unit_converter"
    assert module_name_for("2 fast") == "agent_2_fast"
    assert extract_code(PROSE) is None
    assert extract_code(fenced("import x\n")) == "import x\n"
    assert extract_code(UNIT_CONVERTER) == UNIT_CONVERTER


async def test_good_code_is_returned_with_its_checks() -> None:
    model, seen = scripted(fenced(UNIT_CONVERTER))
    generated = await AgentGenerator(model).generate(REQUEST)
    assert (generated.module, generated.agent_id, generated.attempts) == (
        "unit_converter",
        "unit-converter",
        1,
    )
    assert all(check.passed for check in generated.checks)
    assert 'AGENT_ID is "unit-converter"' in seen[0][0]["content"]


async def test_failed_checks_are_fed_back_once() -> None:
    model, seen = scripted(fenced(BAD), fenced(UNIT_CONVERTER))
    generated = await AgentGenerator(model).generate(REQUEST)
    assert generated.attempts == 2
    feedback = seen[1][-1]["content"]
    assert "imports:" in feedback and "'subprocess' is not allowed" in feedback


async def test_code_that_still_fails_is_returned_with_the_failed_checks() -> None:
    model, _ = scripted(fenced(BAD), fenced(BAD))
    with pytest.raises(GenerationFailed) as caught:
        await AgentGenerator(model).generate(REQUEST)
    assert caught.value.code == "checks_failed"
    assert caught.value.source.startswith("# module: unit_converter")
    assert {"imports", "tool_schemas"} <= {c["name"] for c in caught.value.checks if not c["passed"]}


async def test_prose_twice_is_no_code() -> None:
    model, _ = scripted(PROSE, PROSE)
    with pytest.raises(GenerationFailed) as caught:
        await AgentGenerator(model).generate(REQUEST)
    assert caught.value.code == "no_code"


async def test_a_declared_module_name_that_is_not_an_identifier_is_refused() -> None:
    bad_name = UNIT_CONVERTER.replace("# module: unit_converter", "# module: ../unit-converter")
    model, _ = scripted(fenced(bad_name), fenced(bad_name))
    with pytest.raises(GenerationFailed) as caught:
        await AgentGenerator(model).generate(REQUEST)
    [module_check] = [c for c in caught.value.checks if c["name"] == "module_name"]
    assert not module_check["passed"] and "not a Python identifier" in str(module_check["detail"])
