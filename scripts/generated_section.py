"""A generated section of a documentation page: the text between two markers, rewritten from the
code by a ``python -m scripts.<table>`` command, or checked against it with ``--check`` (a test
runs the check, so the page cannot drift from the code)."""

from __future__ import annotations

import sys
from pathlib import Path


def splice(page: str, begin: str, end: str, section: str) -> str:
    """``page`` with the text between the ``begin`` and ``end`` markers replaced by ``section``."""
    head, found_begin, rest = page.partition(begin)
    _, found_end, tail = rest.partition(end)
    if not found_begin or not found_end:
        raise ValueError(f"the page has no {begin!r} ... {end!r} markers")
    return f"{head}{begin}\n{section}{end}{tail}"


def write_or_check(argv: list[str], page: Path, wanted: str, command: str) -> int:
    """Write ``wanted`` to ``page``, or with ``--check`` in ``argv`` return 1 (naming ``command``)
    when the page differs from it."""
    current = page.read_text(encoding="utf-8")
    if "--check" in argv:
        if current != wanted:
            sys.stderr.write(f"{page} is stale: run 'python -m {command}'\n")
            return 1
        return 0
    if current != wanted:
        page.write_text(wanted, encoding="utf-8")
    return 0
