"""``openagent.workspace.loading``: safe loading; every problem names its line and field."""

from __future__ import annotations

import json

import pytest

from openagent.errors import WorkspaceError
from openagent.workspace import export_workspace, load_workspace
from tests.openagent.workspace.samples import MINIMAL


def problems(text: str) -> WorkspaceError:
    with pytest.raises(WorkspaceError) as caught:
        load_workspace(text)
    return caught.value


# ------------------------------------------------------------------ errors name line and field


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        (MINIMAL.replace("    transport:", "    toolz: []\n    transport:"), 4, "agents[0].toolz"),
        (MINIMAL + "colour: blue\n", 11, "colour"),
        (MINIMAL.replace("        description:", "        descripton:"), 8, "agents[0].tools[0].descripton"),
        ("version: 1\nmaster:\n  base_url: http://x\n  secret: 1\n", 4, "master.secret"),
    ],
)
def test_unknown_fields_are_errors_naming_the_field_and_line(text: str, line: int, field: str) -> None:
    error = problems(text)
    assert error.code == "invalid"
    [problem] = error.problems
    assert (problem.line, problem.field) == (line, field)
    assert f"unknown field {field.rsplit('.', 1)[-1]!r}" in str(error)
    assert f"line {line}" in str(error)


def test_a_bad_value_names_its_line() -> None:
    error = problems(MINIMAL.replace("transport: websocket", "transport: carrier-pigeon"))
    assert error.problems[0].field == "agents[0].transport"
    assert error.problems[0].line == 4


def test_an_unsupported_version_is_named() -> None:
    assert "unsupported workspace version 3; this OpenAgent reads versions 1, 2" in str(
        problems("version: 3\n")
    )


def test_version_1_files_still_load() -> None:
    assert load_workspace(MINIMAL).version == 1
    assert "version: 2" in export_workspace(load_workspace(MINIMAL))


@pytest.mark.parametrize(
    "handler", ["../etc/passwd", "/etc/passwd", "os.path", "agents..x", "agents.x/../../y", "master.app"]
)
def test_handlers_outside_the_allowed_folders_are_refused(handler: str) -> None:
    error = problems(MINIMAL.replace("agents.unit_converter", json.dumps(handler)))
    assert error.problems[0].field == "agents[0].handler"
    assert "agents/" in str(error)


def test_invocation_agents_need_a_base_url() -> None:
    error = problems(MINIMAL.replace("transport: websocket", "transport: invocation"))
    assert "needs invocation_base_url" in str(error)


def test_a_link_to_an_unknown_agent_is_refused() -> None:
    assert "unknown node 'ghost'" in str(problems(MINIMAL + "  - source: ghost\n"))


# ------------------------------------------------------------------ bad input is refused early


def test_an_alias_bomb_is_refused_before_it_expands() -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 12):
        ref = f"*a{level - 1}"
        lines.append(f"a{level}: &a{level} [{', '.join([ref] * 9)}]")
    error = problems("\n".join(lines) + "\n")
    assert error.code == "yaml_bomb"
    assert "alias bomb" in str(error)


def test_a_50_megabyte_yaml_is_refused_by_size() -> None:
    huge = "agents: []\n# " + "x" * (50 * 1024 * 1024) + "\n"
    error = problems(huge)
    assert error.code == "too_large"
    assert "byte limit" in str(error)


def test_deep_nesting_and_several_documents_are_refused() -> None:
    assert problems("a: " + "[" * 200 + "]" * 200 + "\n").code == "too_deep"
    assert problems("version: 1\n---\nversion: 1\n").code == "yaml_syntax"


def test_python_tags_are_not_constructed() -> None:
    error = problems("version: !!python/object/apply:os.system ['true']\n")
    assert error.code == "yaml_syntax"


def test_invalid_yaml_names_its_line() -> None:
    error = problems("version: 1\nagents: [\n  {agent_id: x\n")
    assert error.code == "yaml_syntax"
    assert error.problems[0].line is not None
