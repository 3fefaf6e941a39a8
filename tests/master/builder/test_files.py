"""``master.builder.files``: save and read agent modules inside the allowed folders only."""

from __future__ import annotations

from pathlib import Path

import pytest

from master.builder.files import AgentFiles
from master.errors import AgentFileNotFound, AgentFileRefused


@pytest.fixture
def root(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    for folder in ("agents", "system_agents", "sample_agents"):
        (repo / folder).mkdir(parents=True)
    (tmp_path / "secret.py").write_text("TOP_SECRET = 1\n")
    return repo


@pytest.mark.parametrize(
    "module",
    [
        "../evil",
        "/tmp/evil",
        "agents/evil",
        "evil.py",
        "a.b",
        "%2e%2e%2fevil",
        "ev il",
        "",
        "__init__",
        "class",
        "é",
    ],
)
def test_save_refuses_anything_but_an_identifier(root: Path, module: str) -> None:
    with pytest.raises(AgentFileRefused) as caught:
        AgentFiles(root).save(module, "x = 1\n")
    assert caught.value.code == "invalid_module"
    assert sorted(p.name for p in root.parent.iterdir()) == ["repo", "secret.py"]
    assert list((root / "agents").iterdir()) == []


def test_save_writes_once_then_needs_overwrite(root: Path) -> None:
    files = AgentFiles(root)
    path = files.save("unit_converter", "x = 1\n")
    assert path == root.resolve() / "agents" / "unit_converter.py"
    with pytest.raises(AgentFileRefused) as caught:
        files.save("unit_converter", "x = 2\n")
    assert caught.value.code == "file_exists"
    files.save("unit_converter", "x = 2\n", overwrite=True)
    assert path.read_text() == "x = 2\n"
    assert sorted(p.name for p in (root / "agents").iterdir()) == ["unit_converter.py"]


def test_save_never_writes_through_a_symlink(root: Path) -> None:
    secret = root.parent / "secret.py"
    (root / "agents" / "link.py").symlink_to(secret)
    with pytest.raises(AgentFileRefused) as caught:
        AgentFiles(root).save("link", "pwned = 1\n", overwrite=True)
    assert caught.value.code == "path_refused"
    assert secret.read_text() == "TOP_SECRET = 1\n"


@pytest.mark.parametrize(
    "handler",
    [
        "../secret",
        "/etc/passwd",
        "agents/../../secret.py",
        "agents/../secret.py",
        "agents..secret",
        "%2e%2e%2fsecret",
        "%252e%252e%252fsecret",
        "master.app",
        "secret",
        "agents.link",
    ],
)
def test_read_refuses_everything_outside_the_folders(root: Path, handler: str) -> None:
    (root / "agents" / "link.py").symlink_to(root.parent / "secret.py")
    with pytest.raises(AgentFileRefused) as caught:
        AgentFiles(root).read(handler)
    assert "TOP_SECRET" not in caught.value.message


def test_read_accepts_module_paths_functions_and_files(root: Path) -> None:
    (root / "agents" / "unit_converter.py").write_text("CODE = 1\n")
    files = AgentFiles(root)
    for handler in ("agents.unit_converter", "agents.unit_converter:handle_tool", "agents/unit_converter.py"):
        ref, source = files.read(handler)
        assert (ref.module, source) == ("agents.unit_converter", "CODE = 1\n")
    with pytest.raises(AgentFileNotFound):
        files.read("sample_agents.nothing_here")
