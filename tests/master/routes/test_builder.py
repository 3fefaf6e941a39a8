"""``master/routes/builder.py`` over HTTP: traversal attempts on /save-agent and /agent-source, the toggle."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from openagent.testing import ScriptedOpenAIServer
from tests.conftest import master_env
from tests.factories import MasterProcess, agents_root
from tests.master.builder.samples import UNIT_CONVERTER

SECRET = "TOP-SECRET-MARKER"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("builder-routes")
    (base / "secret.py").write_text(f"VALUE = {SECRET!r}\n")
    repo = agents_root(base / "repo")
    (repo / "agents" / "unit_converter.py").write_text(UNIT_CONVERTER)
    (repo / "agents" / "link.py").symlink_to(base / "secret.py")
    (repo / "sample_agents" / "outside").symlink_to(base, target_is_directory=True)
    return repo


@pytest.fixture(scope="module")
def builder_master(scripted_llm: ScriptedOpenAIServer, root: Path) -> Iterator[MasterProcess]:
    with MasterProcess(master_env(scripted_llm, OPENAGENT_AGENTS_ROOT=str(root))) as process:
        yield process


def listing(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root.parent)) for path in root.parent.rglob("*"))


@pytest.mark.parametrize(
    "module",
    [
        "../evil",
        "../../tmp/evil",
        "/tmp/evil",
        "agents/evil",
        "evil.py",
        "a.b",
        "%2e%2e%2fevil",
        "..%2Fevil",
        "ev il",
        "",
        "__init__",
        "link",
        "evil\n",
        "unit_converter\n",
    ],
)
async def test_save_agent_refuses_paths_and_writes_nothing(
    builder_master: MasterProcess, root: Path, module: str
) -> None:
    before = listing(root)
    async with httpx.AsyncClient(base_url=builder_master.base_url, timeout=30) as http:
        response = await http.post(
            "/save-agent", json={"module": module, "source": "x = 1\n", "overwrite": True}
        )
    assert response.status_code == 400, response.text
    assert response.json()["detail"]["code"] in ("invalid_module", "path_refused")
    assert listing(root) == before
    assert SECRET in (root.parent / "secret.py").read_text()


async def test_save_agent_needs_overwrite_for_an_existing_module(
    builder_master: MasterProcess, root: Path
) -> None:
    async with httpx.AsyncClient(base_url=builder_master.base_url, timeout=30) as http:
        existing = await http.post("/save-agent", json={"module": "unit_converter", "source": "x = 1\n"})
        assert existing.status_code == 400
        assert existing.json()["detail"]["code"] == "file_exists"
        assert "overwrite: true" in existing.json()["detail"]["message"]
        assert (root / "agents" / "unit_converter.py").read_text() == UNIT_CONVERTER
        new = await http.post("/save-agent", json={"module": "fresh_agent", "source": "x = 1\n"})
        assert new.status_code == 200
        assert (await http.get("/health")).status_code == 200  # saving did not restart anything
        # Audited: one master.audit line and a count (the refusals above are not saves).
        metrics = (await http.get("/metrics")).text
        assert re.search(r'openagent_audit_events_total\{action="module_saved"\} [1-9]', metrics), metrics[
            -2000:
        ]
    assert (root / "agents" / "fresh_agent.py").read_text() == "x = 1\n"


@pytest.mark.parametrize(
    "raw_query",
    [
        "handler=../secret",
        "handler=%2e%2e%2fsecret",
        "handler=%252e%252e%252fsecret",
        "handler=..%2Fsecret.py",
        "handler=/etc/passwd",
        "handler=%2Fetc%2Fpasswd",
        "handler=agents/../../secret.py",
        "handler=agents%2F..%2F..%2Fsecret.py",
        "handler=agents.link",
        "handler=agents/link.py",
        "handler=sample_agents.outside.secret",
        "handler=master.app",
        "handler=secret",
        "handler=agents.unit_converter%00.py",
    ],
)
async def test_agent_source_refuses_everything_outside_the_folders(
    builder_master: MasterProcess, raw_query: str
) -> None:
    async with httpx.AsyncClient(base_url=builder_master.base_url, timeout=30) as http:
        response = await http.get(f"/agent-source?{raw_query}")
    assert response.status_code in (400, 404), response.text
    assert SECRET not in response.text
    assert "passwd" not in response.text or response.status_code == 400


async def test_agent_source_reads_modules_of_the_allowed_folders(builder_master: MasterProcess) -> None:
    async with httpx.AsyncClient(base_url=builder_master.base_url, timeout=30) as http:
        for handler in (
            "agents.unit_converter",
            "agents.unit_converter:handle_tool",
            "agents/unit_converter.py",
        ):
            response = await http.get("/agent-source", params={"handler": handler})
            assert response.status_code == 200, response.text
            assert response.json()["source"] == UNIT_CONVERTER
            assert response.json()["file"] == "agents/unit_converter.py"
        missing = await http.get("/agent-source", params={"handler": "agents.nothing_here"})
        assert missing.status_code == 404


async def test_discover_lists_files_with_their_errors(builder_master: MasterProcess) -> None:
    async with httpx.AsyncClient(base_url=builder_master.base_url, timeout=30) as http:
        found = (await http.get("/agents/discover")).json()
    assert [agent["agent_id"] for agent in found["agents"]] == ["unit-converter"]
    errors = {error["file"]: error["error"] for error in found["errors"]}
    assert "symlink" in errors["agents/link.py"]
    assert SECRET not in str(found)


async def test_the_yaml_runner_switch_gives_403_naming_the_setting(
    scripted_llm: ScriptedOpenAIServer,
) -> None:
    env = master_env(scripted_llm, OPENAGENT_YAML_RUNNER="0")
    async with (
        MasterProcess(env) as process,
        httpx.AsyncClient(base_url=process.base_url, timeout=30) as http,
    ):
        calls = [
            ("POST", "/internal/yaml-agents/start", {"yaml": "version: 1\n"}, "OPENAGENT_YAML_RUNNER=0"),
            ("POST", "/internal/yaml-agents/stop", {}, "OPENAGENT_YAML_RUNNER=0"),
        ]
        for method, path, body, setting in calls:
            response = await http.request(method, path, json=body)
            assert response.status_code == 403, (path, response.text)
            assert setting in response.json()["detail"]
        assert scripted_llm.requests == []
