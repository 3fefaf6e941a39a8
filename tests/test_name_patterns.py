"""A pattern that guards a name matches the whole string: ``"evil\\n"`` is not a module name.

Python's ``re`` lets ``$`` match before a final newline, so ``re.match(r"^[a-z]+$", "evil\\n")``
succeeds; ``fullmatch`` does not. Pydantic's ``pattern=`` runs a Rust regex, whose ``$`` is the
end of the text. The tests walk the real lists: every anchored pattern matched in the source,
and every ``pattern`` in the master's OpenAPI document and the protocol's models.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

import protocol
from master.builder.checks import static_checks
from openagent.agent_modules import AgentModuleError, is_module_name, parse_handler
from openagent.workspace.schema import Workspace
from tests.master.builder.samples import UNIT_CONVERTER

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("master", "openagent", "protocol")


def _sources() -> Iterator[tuple[str, ast.Module]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            yield module, ast.parse(path.read_text(), filename=str(path))


def _pattern(module: str, node: ast.expr) -> re.Pattern[str] | None:
    """The compiled pattern ``node`` names in ``module`` (a module-level name or a literal)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.compile(node.value)
    if isinstance(node, ast.Name):
        value: Any = getattr(importlib.import_module(module), node.id, None)
        if isinstance(value, str):
            return re.compile(value)
        if isinstance(value, re.Pattern):
            return value
    return None


def _anchored_partial_matches() -> Iterator[str]:
    """``file:line pattern`` for each ``match``/``search`` of a pattern anchored with ``$``."""
    for module, tree in _sources():
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("match", "search")
            ):
                continue
            receiver = node.func.value
            if isinstance(receiver, ast.Name) and receiver.id == "re":
                pattern = _pattern(module, node.args[0]) if node.args else None
            else:
                pattern = _pattern(module, receiver)
            if pattern is None or not isinstance(pattern.pattern, str):
                continue
            if pattern.pattern.endswith("$") and not pattern.flags & re.MULTILINE:
                yield f"{module}:{node.lineno} {pattern.pattern}"


def test_no_anchored_pattern_is_matched_partially() -> None:
    found = list(_anchored_partial_matches())
    assert not found, f"use fullmatch (a final newline passes '$'): {found}"


def _schema_patterns(schema: Any) -> Iterator[str]:
    if isinstance(schema, dict):
        if isinstance(schema.get("pattern"), str):
            yield schema["pattern"]
        for value in schema.values():
            yield from _schema_patterns(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _schema_patterns(value)


def _every_schema_pattern() -> list[str]:
    from master.app import create_app

    schemas: list[Any] = [create_app().openapi(), Workspace.model_json_schema()]
    for name in protocol.__all__:
        value = getattr(protocol, name)
        if isinstance(value, type) and issubclass(value, BaseModel):
            schemas.append(value.model_json_schema())
    return sorted({pattern for schema in schemas for pattern in _schema_patterns(schema)})


EXAMPLES = (
    "a",
    "unit_converter",
    "att_" + "0" * 24,
    "agents.unit_converter",
    "http://127.0.0.1:8000",
    "ws://127.0.0.1:8000/ws",
    "/path",
    "Bearer ${A2A_TOKEN}",
)
"""Candidate values; each schema pattern must accept one of them (add one for a new kind of name)."""


def _example(pattern: str) -> str:
    compiled = re.compile(pattern)
    matching = [example for example in EXAMPLES if compiled.fullmatch(example)]
    assert matching, f"no example matches {pattern!r}: add one to EXAMPLES"
    return matching[0]


@pytest.mark.parametrize("pattern", _every_schema_pattern())
def test_every_schema_pattern_refuses_a_trailing_newline(pattern: str) -> None:
    adapter: TypeAdapter[str] = TypeAdapter(Annotated[str, Field(pattern=pattern)])
    example = _example(pattern)
    assert adapter.validate_python(example) == example
    if pattern.endswith("$"):
        with pytest.raises(ValidationError):
            adapter.validate_python(example + "\n")


@pytest.mark.parametrize("name", ["unit_converter\n", "evil\n", "evil\r\n"])
def test_a_module_name_with_a_trailing_newline_is_refused(name: str) -> None:
    assert not is_module_name(name)
    with pytest.raises(AgentModuleError):
        parse_handler(f"agents.{name}")
    with pytest.raises(AgentModuleError):
        parse_handler("agents.unit_converter:handle_tool\n")


def test_a_generated_agent_id_with_a_trailing_newline_is_refused() -> None:
    source = UNIT_CONVERTER.replace('AGENT_ID = "unit-converter"', 'AGENT_ID = "unit-converter\\n"')
    failures = {check.name: check.detail for check in static_checks(source, transport="websocket").failures()}
    assert "must match" in failures["defines_agent"]
