"""``openagent.workspace.cli``: the workspace and generate subcommands against a real master."""

from __future__ import annotations

import io
from pathlib import Path

import httpx
import pytest

from openagent.testing import ScriptedOpenAIServer
from openagent.workspace import load_workspace
from openagent.workspace.cli import main
from tests.factories import ROOT, MasterProcess
from tests.master.builder.samples import UNIT_CONVERTER, fenced


def test_check_validates_offline(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["workspace", "check", str(ROOT / "docs" / "examples" / "workspace.yaml")]) == 0
    assert capsys.readouterr().out.startswith("ok: 3 agents")
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ncolour: blue\n")
    assert main(["workspace", "check", str(bad)]) == 1
    assert "line 2: colour: unknown field 'colour'" in capsys.readouterr().err


def test_export_and_restore(
    master: MasterProcess, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["workspace", "export", "--master", master.base_url]) == 0
    load_workspace(capsys.readouterr().out)
    down = tmp_path / "ws.yaml"
    down.write_text(
        "version: 1\nagents:\n  - agent_id: cli-down\n    transport: invocation\n"
        "    invocation_base_url: http://127.0.0.1:9\n    tools: [{name: ping}]\n"
    )
    assert main(["workspace", "restore", str(down), "--master", master.base_url]) == 1
    assert capsys.readouterr().out.startswith("cli-down: unreachable (")
    assert main(["workspace", "restore", str(down), "--no-register-http", "--master", master.base_url]) == 0
    assert main(["workspace", "stop", "--master", master.base_url]) == 0
    httpx.post(f"{master.base_url}/unregister", json={"agent_id": "cli-down"}, timeout=10).raise_for_status()


def test_generate_prints_the_checked_source(
    master: MasterProcess, llm: ScriptedOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    llm.add_text(fenced(UNIT_CONVERTER))
    assert (
        main(["generate", "Converts km to miles", "--name", "Unit converter", "--master", master.base_url])
        == 0
    )
    captured = capsys.readouterr()
    assert captured.out == UNIT_CONVERTER
    assert "check smoke_import: passed" in captured.err


def test_an_unreachable_master_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workspace", "export", "--master", "http://127.0.0.1:9"]) == 1
    assert "cannot reach the master" in capsys.readouterr().err


def test_the_subcommands_are_part_of_the_openagent_command(capsys: pytest.CaptureFixture[str]) -> None:
    from openagent.cli import main as openagent

    assert openagent(["workspace", "check", str(ROOT / "docs" / "examples" / "workspace.yaml")]) == 0
    assert capsys.readouterr().out.startswith("ok: 3 agents")
    with pytest.raises(SystemExit):
        openagent(["generate", "--help"])
    assert "--save" in capsys.readouterr().out


def test_an_agent_that_did_not_come_up_fails_the_command() -> None:
    """Exit status 1 when any agent failed: each row is printed, and only good statuses pass."""
    from openagent.workspace.cli import _report

    out = io.StringIO()
    assert _report([{"agent_id": "a", "status": "started"}, {"agent_id": "b", "status": "skipped"}], out)
    assert not _report([{"agent_id": "c", "status": "failed", "reason": "import failed"}], out)
    assert out.getvalue() == "a: started\nb: skipped\nc: failed (import failed)\n"
