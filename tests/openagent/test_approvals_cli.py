"""``openagent approvals | approve | reject`` (openagent/approvals_cli.py) against a real master
(in process, real Redis), the scripted LLM and a real SDK agent whose ``transfer`` requires approval."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from openagent.approvals_cli import time_left
from openagent.testing import ScriptedOpenAIServer
from tests.factories import free_port, serve_app
from tests.master.query.test_approvals import KEY, Bank, _paused, _pay_and_read, bank
from tests.openagent.conftest import PointCli, run_cli


@pytest.fixture
async def hub(llm: ScriptedOpenAIServer, point_cli: PointCli) -> AsyncIterator[Bank]:
    async with bank(llm) as b:
        point_cli(b.master.base_url, KEY)
        yield b


async def run_and_read(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The command's exit status, stdout and stderr."""
    status = await run_cli(*argv)
    out, err = capsys.readouterr()
    return status, out, err


async def test_ask_says_which_calls_wait_and_how_to_decide_them(
    hub: Bank, capsys: pytest.CaptureFixture[str]
) -> None:
    _pay_and_read(hub.llm)
    status, out, err = await run_and_read(capsys, "ask", "pay Bob")
    assert status == 0, err
    [approval] = (await hub.http.get("/approvals")).json()["approvals"][-1:]
    assert 'waiting for approval: bank.transfer {"to": "bob", "amount": 10}' in out
    assert f"decide: openagent approve {approval['approval_id']} [--edit JSON]" in out


async def test_approvals_lists_the_pending_calls_as_a_table(
    hub: Bank, capsys: pytest.CaptureFixture[str]
) -> None:
    paused = await _paused(hub)
    approval = paused["approvals"][0]
    status, out, err = await run_and_read(capsys, "approvals")
    assert status == 0, err
    header, *rows = out.splitlines()
    assert header.split() == ["ID", "SESSION", "AGENT", "TOOL", "STATUS", "TIME", "LEFT"]
    [row] = [r for r in rows if r.startswith(approval["approval_id"])]  # (other tests' may be pending)
    assert row.split()[:5] == [approval["approval_id"], paused["session_id"], "bank", "transfer", "pending"]
    assert row.split()[5] in {"23h59m", "24h00m"}  # the default TTL, 24 h

    status, out, _ = await run_and_read(capsys, "approvals", "--session", "no-such-session")
    assert status == 0 and out.strip() == "no approvals in session no-such-session"


async def test_approve_with_an_edit_runs_the_edited_call_and_prints_the_answer(
    hub: Bank, capsys: pytest.CaptureFixture[str]
) -> None:
    paused = await _paused(hub)
    approval_id = paused["approvals"][0]["approval_id"]
    hub.llm.add_text("Paid Bob 5.")
    status, out, err = await run_and_read(
        capsys, "approve", approval_id, "--edit", '{"to": "bob", "amount": 5}'
    )
    assert status == 0, err
    assert out.splitlines()[0] == "Paid Bob 5."
    assert "agents used: bank (transfer)" in out and f"session: {paused['session_id']}" in out
    assert hub.calls[-1] == ("transfer", {"to": "bob", "amount": 5})
    status, out, _ = await run_and_read(capsys, "approvals", "--session", paused["session_id"])
    assert status == 0 and out.splitlines()[1].split()[4:] == ["approved", "-"]


async def test_an_invalid_edit_is_refused_naming_the_field(
    hub: Bank, capsys: pytest.CaptureFixture[str]
) -> None:
    paused = await _paused(hub)
    approval_id = paused["approvals"][0]["approval_id"]
    status, out, err = await run_and_read(
        capsys, "approve", approval_id, "--edit", '{"to": "bob", "amount": -3}'
    )
    assert status == 1 and out == ""
    assert err.startswith("openagent approve: error: 422 validation_error: ")
    assert "amount" in err and "minimum" in err
    assert hub.calls == [("balance", {})]  # nothing ran, nothing was decided
    assert (await hub.http.get(f"/approvals/{approval_id}")).json()["status"] == "pending"


async def test_reject_tells_the_model_and_a_late_approve_names_the_decision_that_won(
    hub: Bank, capsys: pytest.CaptureFixture[str]
) -> None:
    paused = await _paused(hub)
    approval_id = paused["approvals"][0]["approval_id"]
    hub.llm.add_text("I did not pay Bob.")
    status, out, err = await run_and_read(capsys, "reject", approval_id, "--reason", "too much")
    assert status == 0, err
    assert out.splitlines()[0] == "I did not pay Bob."
    assert hub.calls == [("balance", {})]

    status, out, err = await run_and_read(capsys, "approve", approval_id)
    assert status == 1 and out == ""
    assert "409 approval_decided" in err and "already decided: rejected" in err
    assert "reason 'too much'" in err


async def test_an_unknown_id_is_a_404_naming_it(hub: Bank, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = await run_and_read(capsys, "approve", "appr-nope")
    assert status == 1
    assert "404 unknown_approval" in err and "'appr-nope'" in err


async def test_reject_needs_a_reason_and_edit_needs_a_json_object(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = await run_and_read(capsys, "reject", "appr-1")
    assert status == 2 and "--reason" in err
    status, _, err = await run_and_read(capsys, "approve", "appr-1", "--edit", "[1, 2]")
    assert status == 2 and "--edit must be a JSON object" in err
    status, _, err = await run_and_read(capsys, "approve", "appr-1", "--edit", "{amount: 5}")
    assert status == 2 and "--edit is not valid JSON" in err


async def test_remember_session_is_sent_only_when_asked(
    point_cli: PointCli, capsys: pytest.CaptureFixture[str]
) -> None:
    bodies: list[dict[str, Any]] = []

    async def decide(request: Request) -> JSONResponse:
        bodies.append(await request.json())
        return JSONResponse({"session_id": "s-1", "success": True, "status": "completed", "answer": "ok"})

    app = Starlette(routes=[Route("/approvals/{approval_id}", decide, methods=["POST"])])
    async with serve_app(app) as url:
        point_cli(url)
        assert (await run_and_read(capsys, "approve", "appr-1", "--remember-session"))[0] == 0
        assert (await run_and_read(capsys, "approve", "appr-2"))[0] == 0
    assert bodies == [{"decision": "approve", "remember": "session"}, {"decision": "approve"}]


def test_time_left_reads_like_a_clock() -> None:
    assert time_left(1000 + 86399, 1000) == "23h59m"
    assert time_left(1000 + 245, 1000) == "4m05s"
    assert time_left(1012, 1000) == "12s"
    assert time_left(1000, 1000) == "expired"


async def test_an_unreachable_master_is_named_with_how_to_start_it(
    point_cli: PointCli, capsys: pytest.CaptureFixture[str]
) -> None:
    point_cli(f"http://127.0.0.1:{free_port()}")
    status, out, err = await run_and_read(capsys, "approvals")
    assert status == 1 and out == ""
    assert err.startswith("openagent approvals: error: cannot reach the master at http://127.0.0.1:")
    assert "openagent master" in err and "MASTER_BASE_URL" in err
