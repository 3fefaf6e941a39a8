"""The user documentation stays short at the front and free of development history.

README.md is the front page (≤ 200 lines: what it is, the two commands, an agent, a query,
links); the rest lives in the site under ``docs/``. Issue numbers and branch names belong in
CHANGELOG.md and commit messages, not in what users read.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
USER_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
HISTORY = re.compile(r"\bissues? ?#?\d+|\(issue\b|\bbranch `|\bon branch\b", re.IGNORECASE)


def test_the_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move the detail into docs/"


def test_the_readme_keeps_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for command in ("./scripts/run.sh", "./scripts/test.sh"):
        assert command in readme
        assert (ROOT / command).is_file()


@pytest.mark.parametrize("page", USER_DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_development_history(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    hits = [line for line in text.splitlines() if HISTORY.search(line)]
    assert not hits, f"{page.relative_to(ROOT)} tells development history (move it to CHANGELOG.md): {hits}"


def test_every_page_is_in_the_nav() -> None:
    """A page left out of ``nav`` is built but unreachable; mkdocs only reports it as info."""

    def pages(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [page for item in nav for page in pages(item)]
        if isinstance(nav, dict):
            return [page for value in nav.values() for page in pages(value)]
        return []

    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    listed = set(pages(config["nav"]))
    on_disk = {str(path.relative_to(ROOT / "docs")) for path in (ROOT / "docs").rglob("*.md")}
    assert on_disk - listed == set(), "pages missing from mkdocs.yml's nav"
    assert listed - on_disk == set(), "nav entries without a page"
