"""protocol.ErrorCode: one enumeration of the stable codes, each with its HTTP status and meaning."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from protocol import ERROR_STATUS, ErrorCode, ErrorMessage, QueryResponse, parse_message


def test_every_code_has_a_status_and_a_one_sentence_meaning() -> None:
    """Walks the enumeration, so a new code without a status or a meaning fails here."""
    assert set(ERROR_STATUS) == set(ErrorCode)
    for code in ErrorCode:
        assert code.value == code.value.lower() and " " not in code.value, code
        assert 400 <= code.status < 600 and ERROR_STATUS[code] == code.status, code
        assert code.meaning[0].isupper() and code.meaning.endswith("."), code
        assert code.meaning.replace("e.g. ", "").count(". ") == 0, f"{code}: one sentence"


def test_codes_are_their_wire_strings() -> None:
    assert ErrorCode.UNKNOWN_SESSION == "unknown_session"
    assert ErrorCode.of("draining") is ErrorCode.DRAINING
    assert f"{ErrorCode.TOO_MANY_QUERIES}" == "too_many_queries"
    with pytest.raises(ValueError, match="'nope' is not an ErrorCode"):
        ErrorCode.of("nope")


def test_frames_and_answers_carry_an_error_code() -> None:
    frame = parse_message('{"type": "error", "code": "unknown_call", "message": "no call c1", "ref": "c1"}')
    assert isinstance(frame, ErrorMessage) and frame.code is ErrorCode.UNKNOWN_CALL
    assert '"code":"unknown_call"' in frame.model_dump_json()
    answer = QueryResponse(query_id="q", success=False, error="gone", error_code="unknown_session")
    assert answer.error_code is ErrorCode.UNKNOWN_SESSION
    assert answer.model_dump(mode="json")["error_code"] == "unknown_session"
    with pytest.raises(ValidationError):
        ErrorMessage(code="no_such_code", message="x")
