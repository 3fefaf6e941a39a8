"""docs/reference/errors.md holds the table generated from protocol.ErrorCode, and no other."""

from __future__ import annotations

import pytest

from master.errors import LLMError, QueryRejected
from protocol import ErrorCode
from scripts import error_codes_table as error_docs


def test_the_error_page_matches_the_enumeration() -> None:
    """Fails when a code, status or meaning changes without ``python -m scripts.error_codes_table``."""
    assert error_docs.main(["--check"]) == 0, "run: python -m scripts.error_codes_table"


def test_every_code_has_a_row_with_its_status_and_meaning() -> None:
    page = error_docs.PAGE.read_text(encoding="utf-8")
    for code in ErrorCode:
        assert f"| `{code.value}` | {code.status} | {code.meaning} |" in page, code


def test_a_drifted_page_is_found() -> None:
    page = error_docs.render(error_docs.PAGE.read_text(encoding="utf-8"))
    stale = page.replace(f"| `{ErrorCode.DRAINING.value}` | 503 |", "| `draining` | 500 |")
    assert error_docs.render(stale) == page
    with pytest.raises(ValueError, match="markers"):
        error_docs.render("no markers")


def test_the_masters_errors_carry_checked_codes() -> None:
    assert QueryRejected("unknown_session", "gone").code is ErrorCode.UNKNOWN_SESSION
    assert LLMError("down").code is ErrorCode.LLM_ERROR
    with pytest.raises(ValueError, match="not an ErrorCode"):
        QueryRejected("unknown_sesion", "a typo is caught where it is raised")
