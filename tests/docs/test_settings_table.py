"""The settings table of ``docs/reference/settings.md`` is the code's: every field of
``master.settings.Settings``, with its environment variable, type, default and description.

The table is written by ``python -m scripts.settings_table``; a new setting, a changed default
or a changed description makes the page stale, and this test says which command refreshes it.
"""

from __future__ import annotations

import re

import pytest

from master.settings import Settings
from scripts import settings_table


def test_the_page_matches_the_code() -> None:
    page = settings_table.PAGE.read_text(encoding="utf-8")
    assert settings_table.updated(page) == page, (
        "docs/reference/settings.md is stale: run python -m scripts.settings_table"
    )


@pytest.mark.parametrize("name", list(Settings.model_fields))
def test_every_setting_is_described_and_listed(name: str) -> None:
    field = Settings.model_fields[name]
    assert field.description, f"Settings.{name} has no docstring: add one (it is the docs' description)"
    rows = [line for line in settings_table.render().splitlines() if line.startswith(f"| `{name.upper()}` |")]
    assert len(rows) == 1, f"{name.upper()} should have exactly one row, got {rows}"
    env, kind, default, description = (cell.strip() for cell in rows[0].strip("|").split(" | "))
    assert env == f"`{name.upper()}`"
    assert kind and default and description


def test_the_rows_say_what_the_code_says() -> None:
    """Spot checks of the rendering: defaults, bounds, unset values, choices and booleans."""
    rows = {
        match.group(1): match.group(0)
        for match in re.finditer(r"^\| `([A-Z0-9_]+)` \|.*$", settings_table.render(), re.MULTILINE)
    }
    assert rows["MASTER_PORT"].startswith("| `MASTER_PORT` | integer (≥ 1, ≤ 65535) | `8000` |")
    assert rows["OPENAI_API_KEY"].startswith("| `OPENAI_API_KEY` | secret | unset |")
    assert rows["OPENAGENT_LOG_FORMAT"].startswith(
        "| `OPENAGENT_LOG_FORMAT` | one of `text`, `json` | `text` |"
    )
    assert rows["OPENAGENT_CLUSTER"].startswith("| `OPENAGENT_CLUSTER` | `0` or `1` | `0` |")
    assert rows["OPENAGENT_AGENTS_ROOT"].startswith("| `OPENAGENT_AGENTS_ROOT` | path | the repository |")
    assert set(rows) == {name.upper() for name in Settings.model_fields}


def test_check_mode_reports_a_stale_page(tmp_path, monkeypatch, capsys) -> None:
    stale = tmp_path / "settings.md"
    stale.write_text(
        f"# Settings\n\n{settings_table.BEGIN}\n| old |\n{settings_table.END}\n", encoding="utf-8"
    )
    monkeypatch.setattr(settings_table, "PAGE", stale)
    monkeypatch.setattr(settings_table, "ROOT", tmp_path)
    assert settings_table.main(["--check"]) == 1
    assert "python -m scripts.settings_table" in capsys.readouterr().out
    assert settings_table.main([]) == 0
    assert settings_table.main(["--check"]) == 0
    assert "| `REDIS_URL` |" in stale.read_text(encoding="utf-8")
