"""``master.builder.checks`` and ``master.builder.smoke``: what generated code must pass before it is saved."""

from __future__ import annotations

import pytest

from master.builder.checks import check_source, static_checks
from master.builder.smoke import smoke_test
from tests.master.builder.samples import BAD, NEGOTIATOR, UNIT_CONVERTER


def failed(report: object) -> dict[str, str]:
    return {check.name: check.detail for check in report.failures()}  # type: ignore[attr-defined]


async def test_good_code_passes_every_check_including_the_smoke_import() -> None:
    report = await check_source(
        UNIT_CONVERTER, "unit_converter", transport="websocket", tool_hints=["convert"]
    )
    assert report.passed, failed(report)
    assert [check.name for check in report.checks] == [
        "parses",
        "imports",
        "restricted_calls",
        "defines_agent",
        "tool_schemas",
        "smoke_import",
    ]
    assert report.smoke is not None and report.smoke.agent_id == "unit-converter"


def test_bad_code_fails_the_checks_that_name_why() -> None:
    problems = failed(static_checks(BAD, transport="websocket"))
    assert "'subprocess' is not allowed" in problems["imports"]
    assert "parameters must be a JSON Schema of type 'object'" in problems["tool_schemas"]


@pytest.mark.parametrize(
    ("source", "check", "detail"),
    [
        ("def oops(:\n", "parses", "line 1"),
        ("from . import sibling\n", "imports", "relative import"),
        ("import requests\n", "imports", "'requests' is not the SDK"),
        ("x = eval('1')\n", "restricted_calls", "eval() is not allowed"),
        ("x = ().__class__.__base__.__subclasses__()\n", "restricted_calls", "'__subclasses__'"),
        ("from openagent import ToolSchema\n", "defines_agent", "no OrchestratorActionAgent"),
    ],
)
def test_each_static_check_catches_its_problem(source: str, check: str, detail: str) -> None:
    problems = failed(static_checks(source, transport="websocket"))
    assert detail in problems[check]


def test_the_wrong_transport_and_a_missing_hinted_tool_are_failures() -> None:
    assert (
        "invocation was asked"
        in failed(static_checks(UNIT_CONVERTER, transport="invocation"))["defines_agent"]
    )
    hinted = failed(static_checks(UNIT_CONVERTER, transport="websocket", tool_hints=["convert", "round"]))
    assert "['round']" in hinted["tool_schemas"]


def test_collaboration_needs_a_real_handler_wired_in() -> None:
    assert static_checks(NEGOTIATOR, transport="websocket", requires_collaboration=True).passed
    stub = NEGOTIATOR.replace("collaboration_handler=handle_collaboration, ", "")
    assert (
        "pass collaboration_handler"
        in failed(static_checks(stub, transport="websocket", requires_collaboration=True))["collaboration"]
    )
    missing = failed(static_checks(UNIT_CONVERTER, transport="websocket", requires_collaboration=True))
    assert "handle_collaboration" in missing["collaboration"]


async def test_a_module_whose_runtime_tools_differ_from_its_source_fails_the_smoke_import() -> None:
    mutated = UNIT_CONVERTER.replace(
        "def build_agent(", "TOOLS.append(ToolSchema(name='extra', description='x'))\n\n\ndef build_agent("
    )
    report = await check_source(mutated, "mutated", transport="websocket")
    assert "differ from the tool schemas in the source" in failed(report)["smoke_import"]


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("import socket\nsocket.create_connection(('127.0.0.1', 6379))\n", "not allowed"),
        ("import urllib.request\nurllib.request.urlopen('http://127.0.0.1:9/')\n", "not allowed"),
        ("import os\nos.system('true')\n", "os.system is not allowed"),
        ("open('written.txt', 'w').write('x')\n", "writing"),
        ("raise SystemExit(3)\n", "SystemExit"),
    ],
)
async def test_the_smoke_import_has_no_network_processes_or_writes(source: str, reason: str) -> None:
    result = await smoke_test(source, "probe")
    assert not result.ok
    assert reason in result.error


async def test_the_smoke_import_is_time_limited() -> None:
    result = await smoke_test("while True:\n    pass\n", "spin", time_limit=2)
    assert not result.ok
    assert "did not finish within 2 s" in result.error
