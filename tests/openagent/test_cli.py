"""The ``openagent`` command (openagent/cli.py): help, ask, agents, run, master."""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from openagent import cli
from openagent.testing import ScriptedOpenAIServer, demo_handler
from tests.conftest import master_env
from tests.factories import ROOT, TEST_REDIS_URL, MasterProcess, agent_rows, free_port, serve_app
from tests.openagent.conftest import PointCli, run_cli

ANSWER = {
    "query_id": "http-1",
    "session_id": "s-123",
    "success": True,
    "answer": "12 × 7 is 84.",
    "error": None,
    "error_code": None,
    "agents_used": [{"agent_id": "calculator-agent", "tool_name": "multiply"}],
    "status": "completed",
}
AGENTS = {
    "agents": [
        {
            "agent_id": "calculator-agent",
            "role": "action",
            "connection_type": "websocket",
            "status": "online",
            "tools": [{"name": "add"}, {"name": "multiply"}],
        }
    ]
}


class FakeMaster:
    """A stand-in master recording what the CLI sends."""

    def __init__(self) -> None:
        self.queries: list[dict[str, Any]] = []
        self.headers: list[str | None] = []
        self.answer: dict[str, Any] = dict(ANSWER)
        self.status = 200

    def app(self) -> Starlette:
        async def query(request: Request) -> JSONResponse:
            self.headers.append(request.headers.get("authorization"))
            self.queries.append(await request.json())
            return JSONResponse(self.answer, status_code=self.status)

        async def agents(request: Request) -> JSONResponse:
            self.headers.append(request.headers.get("authorization"))
            return JSONResponse(AGENTS, status_code=self.status)

        return Starlette(routes=[Route("/query", query, methods=["POST"]), Route("/agents", agents)])


@pytest.fixture
async def fake_master(point_cli: PointCli) -> AsyncIterator[FakeMaster]:
    fake = FakeMaster()
    async with serve_app(fake.app()) as url:
        point_cli(url)
        yield fake


def test_the_console_script_is_installed() -> None:
    (entry,) = importlib.metadata.entry_points(group="console_scripts", name="openagent")
    assert entry.value == "openagent.cli:main"


def test_help_names_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for command in ("master", "ask", "agents", "run"):
        assert f"    {command}  " in out, out
    assert "OPENAGENT_API_KEY" in out and "MASTER_PORT" in out


@pytest.mark.parametrize("command", ["master", "ask", "agents", "run"])
def test_each_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main([command, "--help"])
    assert exited.value.code == 0
    assert f"usage: openagent {command}" in capsys.readouterr().out


def test_importing_and_asking_do_not_import_the_master() -> None:
    code = (
        "import sys\n"
        "from openagent import cli\n"
        "try:\n"
        "    cli.main(['ask', 'hi'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "assert not [m for m in sys.modules if m == 'master' or m.startswith('master.')], 'master imported'\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MASTER_BASE_URL": f"http://127.0.0.1:{free_port()}"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=tempfile.mkdtemp(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "cannot reach the master" in done.stderr


async def test_ask_prints_the_answer_the_agents_used_and_the_session(
    fake_master: FakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run_cli("ask", "What is 12 times 7?") == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "12 × 7 is 84."
    assert "agents used: calculator-agent (multiply)" in out
    assert "session: s-123" in out
    assert fake_master.queries == [{"query": "What is 12 times 7?"}]
    assert fake_master.headers == [None]


async def test_ask_session_and_agent_options_are_sent(fake_master: FakeMaster) -> None:
    assert await run_cli("ask", "--session", "s-123", "--agent", "a1", "--agent", "a2", "And 8?") == 0
    assert fake_master.queries == [
        {"query": "And 8?", "session_id": "s-123", "allowed_agent_ids": ["a1", "a2"]}
    ]


async def test_ask_sends_the_api_key_from_dotenv(fake_master: FakeMaster, workdir: Path) -> None:
    (workdir / ".env").write_text("OPENAGENT_API_KEY=from-dotenv\n")
    assert await run_cli("ask", "hi") == 0
    assert fake_master.headers == ["Bearer from-dotenv"]


async def test_ask_json_prints_the_response(
    fake_master: FakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run_cli("ask", "--json", "hi") == 0
    assert '"session_id": "s-123"' in capsys.readouterr().out


async def test_a_failed_answer_exits_1_with_the_error(
    fake_master: FakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_master.answer = {
        **ANSWER,
        "success": False,
        "answer": "",
        "error": "budget spent",
        "error_code": "budget",
    }
    assert await run_cli("ask", "hi") == 1
    assert "failed (budget): budget spent" in capsys.readouterr().err


@pytest.mark.parametrize(("status", "message"), [(401, "set OPENAGENT_API_KEY"), (503, "answered 503")])
async def test_http_errors_are_one_line_messages(
    fake_master: FakeMaster, capsys: pytest.CaptureFixture[str], status: int, message: str
) -> None:
    fake_master.status, fake_master.answer = status, {"detail": "nope"}
    assert await run_cli("ask", "hi") == 1
    err = capsys.readouterr().err
    assert err.startswith("openagent: error: ") and message in err


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (
            404,
            {"detail": {"code": "unknown_session", "message": "unknown or expired session 'nope'"}},
            "answered 404: unknown_session: unknown or expired session 'nope'",
        ),
        (
            422,
            {"detail": [{"loc": ["body", "query"], "msg": "Field required", "type": "missing"}]},
            "answered 422: query: Field required",
        ),
        (
            400,
            {"error_code": "unknown_agent", "error": "unknown agent 'ghost'"},
            "unknown_agent: unknown agent 'ghost'",
        ),
        (400, {"error": {"code": "invalid_query", "message": "empty query"}}, "invalid_query: empty query"),
    ],
)
async def test_error_bodies_are_printed_as_their_message_not_a_dict(
    fake_master: FakeMaster,
    capsys: pytest.CaptureFixture[str],
    status: int,
    body: dict[str, Any],
    message: str,
) -> None:
    fake_master.status, fake_master.answer = status, body
    assert await run_cli("ask", "hi") == 1
    err = capsys.readouterr().err
    assert message in err and "{'" not in err and "[{" not in err, err


def test_help_documents_the_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["ask", "--help"]):
        with pytest.raises(SystemExit) as done:
            cli.main(argv)
        assert done.value.code == 0
        out = capsys.readouterr().out
        assert "exit status:" in out and "0  done" in out and "2  the command line is wrong" in out
    with pytest.raises(SystemExit) as wrong:
        cli.main(["ask"])  # the question is missing
    assert wrong.value.code == 2


async def test_unreachable_master_names_the_url_and_the_fix(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    (workdir / ".env").write_text(f"MASTER_PORT={port}\n")
    assert await run_cli("agents") == 1
    err = capsys.readouterr().err
    assert f"cannot reach the master at http://127.0.0.1:{port}" in err
    assert "openagent master" in err


async def test_agents_lists_each_agent_with_its_tools(
    fake_master: FakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run_cli("agents") == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("calculator-agent  action  websocket")
    assert line.endswith("tools: add, multiply")


def test_master_without_the_extra_names_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        cli.importlib.util, "find_spec", lambda name, *a: None if name == "fastapi" else real(name, *a)
    )
    with pytest.raises(SystemExit) as exited:
        cli.main(["master"])
    assert exited.value.code == 1
    assert "pip install 'openagent[master]'" in capsys.readouterr().err


def test_run_a_plain_script_runs_it_as_main(workdir: Path) -> None:
    script = workdir / "hello.py"
    script.write_text(
        "import pathlib\nif __name__ == '__main__':\n    pathlib.Path('ran').write_text('yes')\n"
    )
    assert cli.main(["run", str(script)]) == 0
    assert (workdir / "ran").read_text() == "yes"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("agent = 42\n", "int is not an agent"),
        ("def build_agent(required):\n    pass\n", "build_agent() must be callable without arguments"),
    ],
)
def test_run_refuses_what_is_not_an_agent(
    workdir: Path, capsys: pytest.CaptureFixture[str], source: str, message: str
) -> None:
    script = workdir / "bad.py"
    script.write_text(source)
    with pytest.raises(SystemExit):
        cli.main(["run", str(script)])
    assert message in capsys.readouterr().err


def test_run_a_missing_file_names_it(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["run", "nowhere.py"])
    assert "no such agent file: 'nowhere.py'" in capsys.readouterr().err


@pytest.fixture
def calculator_process(master: MasterProcess) -> Iterator[subprocess.Popen[bytes]]:
    """``openagent run sample_agents/calculator.py``, from an empty directory, pointed at the master."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MASTER_WS": master.ws_url}
    process = subprocess.Popen(
        [sys.executable, "-m", "openagent", "run", str(ROOT / "sample_agents" / "calculator.py")],
        env=env,
        cwd=tempfile.mkdtemp(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    yield process
    process.terminate()
    process.wait(timeout=10)


async def test_run_then_ask_against_a_real_master(
    master: MasterProcess,
    llm: ScriptedOpenAIServer,
    calculator_process: subprocess.Popen[bytes],
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    llm.set_handler(demo_handler)
    async with asyncio.timeout(30):
        while "calculator-agent" not in {row["agent_id"] for row in await agent_rows(master.base_url)}:
            assert calculator_process.poll() is None, "openagent run exited"
            await asyncio.sleep(0.05)
    (workdir / ".env").write_text(f"MASTER_PORT={master.port}\n")

    assert await run_cli("ask", "--agent", "calculator-agent", "What is 12 times 7?") == 0
    out = capsys.readouterr().out
    assert "result 84" in out.splitlines()[0]
    assert "agents used: calculator-agent (multiply)" in out
    session = out.split("session: ")[1].split()[0]

    assert await run_cli("ask", "--session", session, "--agent", "calculator-agent", "And 3 plus 4?") == 0
    out = capsys.readouterr().out
    assert f"session: {session}" in out
    assert "agents used: calculator-agent (add)" in out
    replay = llm.requests[-2]["messages"]
    assert {"role": "user", "content": "What is 12 times 7?"} in replay, "the session was not continued"


async def test_ask_an_unknown_session_prints_the_master_s_message(
    master: MasterProcess, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / ".env").write_text(f"MASTER_PORT={master.port}\n")
    assert await run_cli("ask", "--session", "nope", "hi") == 1
    err = capsys.readouterr().err
    assert err.startswith("openagent: error: ") and "'nope'" in err
    assert "{'" not in err and '{"' not in err, err


def test_master_command_listens_on_master_port(llm: ScriptedOpenAIServer, workdir: Path) -> None:
    """``openagent master`` with only MASTER_PORT set (in .env) serves on that port."""
    port = free_port()
    (workdir / ".env").write_text(f"MASTER_PORT={port}\nREDIS_URL={TEST_REDIS_URL}\n")
    env = {**os.environ, **master_env(llm), "PYTHONPATH": str(ROOT)}
    env.pop("MASTER_BASE_URL", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "openagent", "master"],
        env=env,
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, "openagent master exited"
            assert time.monotonic() < deadline, f"nothing answered /health on port {port}"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(timeout=15)


async def test_ask_attach_sends_each_file_as_an_attachment(fake_master: FakeMaster, workdir: Path) -> None:
    (workdir / "notes.txt").write_text("The launch is on Tuesday.")
    (workdir / "data.bin").write_bytes(b"\x00\x01")
    assert await run_cli("ask", "--attach", "notes.txt", "--attach", "data.bin", "When is the launch?") == 0
    assert fake_master.queries[0]["attachments"] == [
        {
            "filename": "notes.txt",
            "mime_type": "text/plain",
            "content_base64": "VGhlIGxhdW5jaCBpcyBvbiBUdWVzZGF5Lg==",
        },
        {"filename": "data.bin", "mime_type": "application/octet-stream", "content_base64": "AAE="},
    ]


async def test_ask_attach_a_missing_file_names_it(
    fake_master: FakeMaster, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run_cli("ask", "--attach", "nowhere.pdf", "hi") == 1
    assert "cannot attach 'nowhere.pdf'" in capsys.readouterr().err
    assert fake_master.queries == []


async def test_ask_attach_stores_the_file_in_the_session_of_a_real_master(
    master: MasterProcess, llm: ScriptedOpenAIServer, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    llm.add_text("Noted.")
    (workdir / ".env").write_text(f"MASTER_PORT={master.port}\n")
    (workdir / "notes.txt").write_text("The launch is on Tuesday.")
    assert await run_cli("ask", "--attach", "notes.txt", "Remember this file") == 0
    session = capsys.readouterr().out.split("session: ")[1].split()[0]
    async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
        context = (await http.get("/query/session-rag-context", params={"session_id": session})).json()
    assert [(item["filename"], item["size"]) for item in context["attachments"]] == [("notes.txt", 25)], (
        context
    )
