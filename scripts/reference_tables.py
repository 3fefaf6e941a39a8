"""Regenerate (or, with ``--check``, check) every reference table generated from the code.

    python -m scripts.reference_tables [--check]

The settings (:mod:`scripts.settings_table`), error codes (:mod:`scripts.error_codes_table`),
roles (:mod:`scripts.roles_table`), HTTP routes (:mod:`scripts.http_table`) and ``openagent``
commands (:mod:`scripts.cli_table`). Exit status 1 when a check found a stale page.
"""

from __future__ import annotations

import sys

from scripts import cli_table, error_codes_table, http_table, roles_table, settings_table


def main(argv: list[str]) -> int:
    status = 0
    for table in (settings_table, error_codes_table, roles_table, http_table, cli_table):
        status |= table.main(argv)
    return status


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
