"""docs/reference/cli.md and http-api.md hold the tables generated from the code (the ``openagent``
parser, the master's routes), and no other."""

from __future__ import annotations

import argparse

import pytest

from scripts import cli_table, http_table, reference_tables


def test_the_cli_page_matches_the_parser() -> None:
    """Fails when a command or option changes without ``python -m scripts.cli_table``."""
    assert cli_table.main(["--check"]) == 0, "run: python -m scripts.cli_table"


def test_the_http_page_matches_the_app() -> None:
    """Fails when a route changes without ``python -m scripts.http_table``."""
    assert http_table.main(["--check"]) == 0, "run: python -m scripts.http_table"


def test_every_reference_table_is_current() -> None:
    assert reference_tables.main(["--check"]) == 0, "run: python -m scripts.reference_tables"


def test_the_pages_name_the_commands_and_routes_users_look_for() -> None:
    cli = cli_table.PAGE.read_text(encoding="utf-8")
    for command in ("openagent keys create", "openagent keys list", "openagent keys revoke", "--attach FILE"):
        assert command in cli, command
    http = http_table.PAGE.read_text(encoding="utf-8")
    for route in (
        "`GET /keys`",
        "`GET /whoami`",
        "/mcp`",
        "`/a2a`",
        "`GET /runs/{run_id}`",
        "`/ws` (WebSocket)",
    ):
        assert route in http, route


def test_a_new_command_is_a_new_row() -> None:
    parser = argparse.ArgumentParser(prog="openagent")
    commands = parser.add_subparsers()
    commands.add_parser("hello", help="say hello").add_argument("--loud", action="store_true")
    assert "| `openagent hello [--loud]` | say hello |" in cli_table.command_table(parser)


def test_a_route_outside_the_document_must_be_described() -> None:
    with pytest.raises(ValueError, match="'/new-door' is not in the OpenAPI document"):
        http_table._door("/new-door")
