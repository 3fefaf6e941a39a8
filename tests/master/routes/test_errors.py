"""Every HTTP refusal is {"detail": ..., "error_code": ...}, the status following from the code."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from protocol import ErrorCode
from tests.factories import InProcessMaster, in_process_master

KEY = "errors-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture
async def master() -> AsyncIterator[InProcessMaster]:
    async with in_process_master(openagent_api_key=KEY, openagent_http_max_body_bytes=200_000) as running:
        yield running


@pytest.fixture
async def http(master: InProcessMaster) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as client:
        yield client


def _refusal(response: httpx.Response, code: ErrorCode) -> Any:
    body = response.json()
    assert (response.status_code, body.get("error_code")) == (code.status, code.value), response.text
    assert set(body) == {"detail", "error_code"}, body
    return body["detail"]


async def test_the_frameworks_refusals_carry_their_codes(http: httpx.AsyncClient) -> None:
    _refusal(await http.get("/agents"), ErrorCode.UNAUTHORIZED)  # the early auth middleware
    _refusal(await http.post("/query", content=b"{", headers=AUTH), ErrorCode.VALIDATION_ERROR)
    _refusal(await http.get("/no/such/path", headers=AUTH), ErrorCode.NOT_FOUND)

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the limit is found while reading
        yield b'{"yaml": "'
        for _ in range(30):
            yield b"x" * 10_000
        yield b'"}'

    headers = {**AUTH, "Content-Type": "application/json"}
    response = await http.post("/internal/workspace/restore", content=chunks(), headers=headers)
    _refusal(response, ErrorCode.BODY_TOO_LARGE)
    response = await http.put("/query", headers=AUTH)
    _refusal(response, ErrorCode.METHOD_NOT_ALLOWED)
    assert response.headers["allow"] == "POST"


async def test_route_refusals_carry_their_codes(http: httpx.AsyncClient) -> None:
    detail = _refusal(await http.get("/sessions/nope", headers=AUTH), ErrorCode.UNKNOWN_SESSION)
    assert detail == "unknown or expired session 'nope'"
    detail = _refusal(
        await http.get("/agent-source", params={"handler": "agents.no_such_module"}, headers=AUTH),
        ErrorCode.NOT_FOUND,
    )
    assert detail["code"] == "not_found"  # the object the builder's clients read is kept
    body = await http.post("/save-agent", json={"module": "not a name", "source": "x"}, headers=AUTH)
    assert _refusal(body, ErrorCode.INVALID_MODULE)["code"] == "invalid_module"


async def test_a_refused_query_answers_with_its_code(http: httpx.AsyncClient) -> None:
    """A query's refusal keeps the query's answer shape, with its code (this master has no LLM)."""
    response = await http.post("/query", json={"query": "hi"}, headers=AUTH)
    body = response.json()
    assert response.status_code == ErrorCode.LLM_NOT_CONFIGURED.status == 503
    assert (body["success"], body["error_code"]) == (False, "llm_not_configured")


async def test_validation_errors_do_not_echo_large_inputs(http: httpx.AsyncClient) -> None:
    """A large query (over the field's limit) is named, not sent back."""
    response = await http.post("/query", json={"query": "x" * 150_000}, headers=AUTH)
    detail = _refusal(response, ErrorCode.VALIDATION_ERROR)
    assert len(response.content) < 2_000
    assert detail[0]["loc"] == ["body", "query"] and detail[0]["type"] == "string_too_long"
    assert detail[0]["input"].startswith("x" * 200) and "150000 characters" in detail[0]["input"]


async def test_a_json_body_sent_as_a_form_names_the_header(http: httpx.AsyncClient) -> None:
    """What ``curl -d '{...}'`` sends (a form), or a body without Content-Type: the answer names the header."""
    body = json.dumps({"query": "hi"})
    headers = {**AUTH, "Content-Type": "application/x-www-form-urlencoded"}
    detail = _refusal(await http.post("/query", content=body, headers=headers), ErrorCode.VALIDATION_ERROR)
    assert "'Content-Type: application/json'" in detail[0]["msg"]
    assert "application/x-www-form-urlencoded" in detail[0]["msg"]
    # Without Content-Type the body is not read as JSON (FastAPI's guard against cross-site posts
    # to a master on localhost); the answer says which header to send.
    bare = await http.post("/query", content=body.encode(), headers=AUTH)
    assert "content-type" not in bare.request.headers
    detail = _refusal(bare, ErrorCode.VALIDATION_ERROR)
    assert "'Content-Type: application/json'" in detail[0]["msg"] and "no Content-Type" in detail[0]["msg"]


async def test_register_names_the_url_scheme_not_a_pattern(http: httpx.AsyncClient) -> None:
    registration = {
        "agent_id": "ftp-agent",
        "invocation_base_url": "ftp://127.0.0.1:9",
        "tools": [{"name": "t"}],
    }
    detail = _refusal(
        await http.post("/register", json=registration, headers=AUTH), ErrorCode.VALIDATION_ERROR
    )
    assert "must be an http or https URL, not 'ftp'" in detail[0]["msg"]
    assert "^" not in detail[0]["msg"]


@pytest.mark.parametrize("path", ["/tool_callback", "/tool_progress"])
@pytest.mark.parametrize("query", ["", "?token="])
async def test_callbacks_without_their_token_answer_401(
    http: httpx.AsyncClient, path: str, query: str
) -> None:
    """Authentication before validation: a missing token is 401 even with an invalid body."""
    for body in ({"call_id": "c1", "success": True, "message": "m"}, {"not": "valid"}):
        detail = _refusal(await http.post(path + query, json=body), ErrorCode.UNAUTHORIZED)
        assert "call token" in detail
