"""The code of a sandboxed agent: a module file from ``agents/`` or ``system_agents/``, or source text.

Either way the master sends the text itself (a ConfigMap for ``new_pod``, the request body
for ``pool``), so a Pod runs the master's current version of an agent, including one saved
after the images were built.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from master.errors import SandboxRejected

MODULE_PACKAGES = ("agents", "system_agents")
"""Top-level folders a deployable module may come from."""

MAX_SOURCE_BYTES = 512 * 1024
"""Well under a ConfigMap's 1 MiB."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class AgentCode:
    """An agent's source text and where it came from."""

    source: str
    module: str | None = None
    """``agents.weather_bot`` when it came from a module file, else ``None``."""

    @property
    def origin(self) -> str:
        return f"module:{self.module}" if self.module else "source"


def resolve_code(root: Path, *, module: str | None, source: str | None) -> AgentCode:
    """The code of a start request: exactly one of ``module`` and ``source``.

    Raises:
        SandboxRejected: ``invalid_request`` for a bad combination, name or size;
            ``unknown_module`` when the module has no file under ``root``.
    """
    if (module is None) == (source is None):
        raise SandboxRejected("invalid_request", "give exactly one of 'module' and 'source'")
    if source is not None:
        if not source.strip():
            raise SandboxRejected("invalid_request", "'source' is empty")
        return AgentCode(_checked_size(source, "source"))
    assert module is not None
    parts = module.split(".")
    if len(parts) < 2 or parts[0] not in MODULE_PACKAGES or not all(_IDENTIFIER.fullmatch(p) for p in parts):
        raise SandboxRejected(
            "invalid_request",
            f"module {module!r} is not a module of {' or '.join(p + '/' for p in MODULE_PACKAGES)} "
            "(e.g. 'agents.weather_bot')",
        )
    path = root.joinpath(*parts[:-1], f"{parts[-1]}.py")
    if not path.is_file():
        raise SandboxRejected("unknown_module", f"module {module!r} has no file {path.relative_to(root)}")
    return AgentCode(_checked_size(path.read_text(encoding="utf-8"), module), module)


def _checked_size(text: str, what: str) -> str:
    if len(text.encode()) > MAX_SOURCE_BYTES:
        raise SandboxRejected("invalid_request", f"{what} is larger than {MAX_SOURCE_BYTES} bytes")
    return text
