"""docs/operations/security.md holds the roles tables generated from the routes and frames."""

from __future__ import annotations

import pytest

from master.access.permissions import Permission
from scripts import roles_table


def test_the_security_page_matches_the_code() -> None:
    """Fails when a route's permission, a role or a frame changes without ``python -m scripts.roles_table``."""
    assert roles_table.main(["--check"]) == 0, "run: python -m scripts.roles_table"


def test_every_permission_is_described_and_the_key_routes_are_listed() -> None:
    table = roles_table.roles_table()
    for permission in Permission:
        assert roles_table._doc(permission), f"Permission.{permission.name} has no docstring"
    assert "| `admin` | `POST /internal/collaborations`" in table and "`POST /keys`" in table
    assert "`WebSocket /ws`" in table and "| `register` | `agent`" in table


def test_a_drifted_page_is_found() -> None:
    page = roles_table.render(roles_table.PAGE.read_text(encoding="utf-8"))
    assert "`POST /unregister`" in page
    assert roles_table.render(page.replace("`POST /unregister`", "`POST /unregistered`")) == page
    with pytest.raises(ValueError, match="markers"):
        roles_table.render("no markers")
