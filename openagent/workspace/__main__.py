"""``python -m openagent.workspace schema | check FILE | export FILE``, offline.

``schema`` prints the workspace's JSON Schema (``docs/workspace.schema.json``), ``check``
validates a file, ``export`` prints its stable, secret-free export. The commands that talk
to a master are ``openagent workspace ...`` (:mod:`openagent.workspace.cli`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from openagent.errors import WorkspaceError
from openagent.workspace.export import export_workspace
from openagent.workspace.loading import load_workspace
from openagent.workspace.schema import json_schema_text


def _main(argv: list[str]) -> int:
    """``python -m openagent.workspace schema|check FILE|export FILE``."""
    if argv[:1] == ["schema"]:
        sys.stdout.write(json_schema_text())
        return 0
    if len(argv) == 2 and argv[0] in ("check", "export"):
        try:
            workspace = load_workspace(Path(argv[1]).read_bytes())
        except WorkspaceError as exc:
            sys.stderr.write(f"{argv[1]}: {exc}\n")
            return 1
        sys.stdout.write(export_workspace(workspace) if argv[0] == "export" else "ok\n")
        return 0
    sys.stderr.write("usage: python -m openagent.workspace schema | check FILE | export FILE\n")
    return 2


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
