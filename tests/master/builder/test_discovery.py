"""``master.builder.discovery``: system_agents then agents, deduplicated, per-file errors, no imports."""

from __future__ import annotations

from pathlib import Path

from master.builder.discovery import AgentDiscovery
from tests.master.builder.samples import UNIT_CONVERTER

TOUCHING = """
from pathlib import Path
Path(__file__).with_name("imported.marker").write_text("imported")
from openagent import OrchestratorActionAgent, ToolSchema
agent = OrchestratorActionAgent("toucher", [ToolSchema(name="t", description="d")], print)
"""


def make_root(tmp_path: Path) -> Path:
    (tmp_path / "system_agents").mkdir(parents=True)
    (tmp_path / "agents").mkdir()
    (tmp_path / "system_agents" / "__init__.py").write_text("")
    (tmp_path / "system_agents" / "converter.py").write_text(UNIT_CONVERTER)
    (tmp_path / "agents" / "unit_converter.py").write_text(UNIT_CONVERTER)  # same id: the system one wins
    (tmp_path / "agents" / "broken.py").write_text(
        "from openagent import OrchestratorActionAgent\ndef oops(:\n"
    )
    (tmp_path / "agents" / "helpers.py").write_text("def helper():\n    return 1\n")
    (tmp_path / "agents" / "toucher.py").write_text(TOUCHING)
    (tmp_path / "agents" / "notes.txt").write_text("not python")
    (tmp_path / "system_agents" / "stack.py").write_text(
        "# openagent: launcher\nfrom system_agents import converter\n"
    )
    return tmp_path


def test_discovery_lists_system_agents_first_and_dedupes_by_agent_id(tmp_path: Path) -> None:
    found = AgentDiscovery(make_root(tmp_path)).discover()
    rows = {agent.agent_id: agent for agent in found.agents}
    assert list(rows) == ["unit-converter", "toucher"]
    converter = rows["unit-converter"]
    assert (converter.module, converter.handler, converter.file) == (
        "system_agents.converter",
        "system_agents.converter",
        "system_agents/converter.py",
    )
    assert converter.transport == "websocket"
    assert [tool["name"] for tool in converter.tools] == ["convert"]
    errors = {error.file: error.error for error in found.errors}
    assert "already defined by system_agents/converter.py" in errors["agents/unit_converter.py"]
    assert errors["agents/broken.py"].startswith("line 2:")
    assert "no agent defined" in errors["agents/helpers.py"]
    assert "system_agents/__init__.py" not in errors
    assert "system_agents/stack.py" not in errors  # a launcher: skipped, not an error


def test_discovery_never_imports_a_module(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    found = AgentDiscovery(root).discover()
    assert "toucher" in {agent.agent_id for agent in found.agents}
    assert not (root / "agents" / "imported.marker").exists()


def test_a_symlink_out_of_the_folder_is_listed_as_an_error_and_not_read(tmp_path: Path) -> None:
    root = make_root(tmp_path / "repo")
    secret = tmp_path / "secret.py"
    secret.write_text(UNIT_CONVERTER.replace("unit-converter", "stolen"))
    (root / "agents" / "escape.py").symlink_to(secret)
    found = AgentDiscovery(root).discover()
    assert "stolen" not in {agent.agent_id for agent in found.agents}
    assert any(error.file == "agents/escape.py" and "symlink" in error.error for error in found.errors)


def test_changed_files_are_re_read_and_removed_ones_dropped(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    discovery = AgentDiscovery(root)
    discovery.discover()
    (root / "agents" / "toucher.py").unlink()
    (root / "agents" / "helpers.py").write_text(UNIT_CONVERTER.replace("unit-converter", "helper-agent"))
    ids = {agent.agent_id for agent in discovery.discover().agents}
    assert ids == {"unit-converter", "helper-agent"}


def test_the_repository_s_system_agents_list_no_errors() -> None:
    found = AgentDiscovery(Path(__file__).resolve().parents[3]).discover()
    assert [error for error in found.errors if error.file.startswith("system_agents/")] == []
