"""Write the settings table of ``docs/reference/settings.md`` from ``master.settings.Settings``.

    python -m scripts.settings_table            # rewrite the table in the page
    python -m scripts.settings_table --check    # exit 1 when the page differs from the code

The table sits between ``<!-- BEGIN GENERATED -->`` and ``<!-- END GENERATED -->``; the rest
of the page is written by hand. One row per field of ``Settings``: its environment variable,
type, default and description (the field's docstring), grouped under the comment that heads
its block in ``master/settings.py``. ``tests/docs/test_settings_table.py`` fails when the
page drifts from the code.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import re
import sys
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import SecretStr
from pydantic.fields import FieldInfo

from master.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reference" / "settings.md"
BEGIN = "<!-- BEGIN GENERATED -->"
END = "<!-- END GENERATED -->"
_BOUNDS = (
    (annotated_types.Gt, ">"),
    (annotated_types.Ge, "≥"),
    (annotated_types.Lt, "<"),
    (annotated_types.Le, "≤"),
)


def _type_name(annotation: Any) -> str:
    """A reader's name for a field's type: ``int``, ``text``, ``0 or 1``, ``one of `a`, `b```."""
    origin = get_origin(annotation)
    if origin is Literal:
        return "one of " + ", ".join(f"`{value}`" for value in get_args(annotation))
    if origin in (Union, types.UnionType):
        names = [_type_name(arg) for arg in get_args(annotation) if arg is not type(None)]
        return " or ".join(names)
    return {
        bool: "`0` or `1`",
        int: "integer",
        float: "number",
        str: "text",
        Path: "path",
        SecretStr: "secret",
    }.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _bounds(field: FieldInfo) -> str:
    parts = [
        f"{sign} {getattr(item, kind.__name__.lower())}"
        for item in field.metadata
        for kind, sign in _BOUNDS
        if isinstance(item, kind)
    ]
    return f" ({', '.join(parts)})" if parts else ""


def _default(name: str, field: FieldInfo) -> str:
    value = field.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{int(value)}`"
    if isinstance(value, Path):
        # The checkout the master runs from: say so rather than print this machine's path.
        return "the repository" if value == ROOT else f"`{value}`"
    if value == "":
        return "derived"
    return f"`{value}`"


def _description(field: FieldInfo) -> str:
    text = " ".join((field.description or "").split())
    # reStructuredText literals (``x``) are Markdown code (`x`); a pipe would split the table cell.
    return text.replace("``", "`").replace("|", "\\|")


def _sections() -> dict[str, str]:
    """Field name -> the heading of its block: the first line of the comment after a blank line."""
    source = inspect.getsource(Settings)
    lines = source.splitlines()
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    sections: dict[str, str] = {}
    current = "General"
    previous_end = 0
    for node in body.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            start = node.lineno - 1
            # A comment that follows a blank line opens a block; its first line is the heading.
            for index in range(previous_end, start):
                stripped = lines[index].strip()
                if stripped.startswith("#") and not lines[index - 1].strip():
                    current = re.sub(r"\s*\(.*$", "", stripped.lstrip("# ").strip()) or current
            sections[node.target.id] = current
        previous_end = node.end_lineno or node.lineno
    return sections


def render() -> str:
    """The generated Markdown: one table per block of ``Settings``, in the source's order."""
    sections = _sections()
    out: list[str] = []
    current = None
    for name, field in Settings.model_fields.items():
        section = sections.get(name, "Other")
        if section != current:
            current = section
            out += [
                "",
                f"### {section}",
                "",
                "| Variable | Type | Default | Description |",
                "| --- | --- | --- | --- |",
            ]
        kind = _type_name(field.annotation) + _bounds(field)
        out.append(f"| `{name.upper()}` | {kind} | {_default(name, field)} | {_description(field)} |")
    return "\n".join(out).lstrip("\n") + "\n"


def updated(page: str) -> str:
    """``page`` with the text between the markers replaced by :func:`render`'s."""
    start, end = page.index(BEGIN) + len(BEGIN), page.index(END)
    return page[:start] + "\n" + render() + page[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is out of date")
    args = parser.parse_args(argv)
    page = PAGE.read_text(encoding="utf-8")
    new = updated(page)
    if args.check:
        if new != page:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run python -m scripts.settings_table")
            return 1
        return 0
    PAGE.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
