"""Saving and reading agent modules, never outside ``agents/``, ``system_agents/`` and ``sample_agents/``.

``POST /save-agent`` writes only ``agents/<module>.py``, where ``module`` is a Python
identifier; ``GET /agent-source`` reads only modules of the three folders. Names are
checked as text before any path is built, and resolved paths must stay inside their
folder, so ``..``, absolute names, URL-encoded forms and symlinks leading out are refused
without opening anything outside. Saving never restarts the master: run uvicorn with
``--reload-dir master --reload-dir protocol --reload-dir openagent`` (or
``--reload-exclude "agents/**"``) if you use ``--reload``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from master.errors import AgentFileNotFound, AgentFileRefused
from openagent.agent_modules import MAX_SOURCE_BYTES, ModuleRef, is_module_name, parse_handler, read_source
from openagent.errors import AgentModuleError

SAVE_FOLDER = "agents"


class AgentFiles:
    """Agent module files under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def save(self, module: str, source: str, *, overwrite: bool = False) -> Path:
        """Write ``agents/<module>.py`` atomically; returns the path.

        Raises:
            AgentFileRefused: ``invalid_module``, ``path_refused``, ``file_exists`` or ``too_large``.
        """
        if not is_module_name(module):
            raise AgentFileRefused(
                "invalid_module",
                f"module name {module!r} refused: use a Python identifier such as 'unit_converter' "
                "(no paths, dots, '..' or leading underscores)",
            )
        data = source.encode("utf-8")
        if len(data) > MAX_SOURCE_BYTES:
            raise AgentFileRefused("too_large", f"source is larger than {MAX_SOURCE_BYTES} bytes")
        root = self.root.resolve()
        folder = root / SAVE_FOLDER
        if folder.is_symlink() or (folder.exists() and folder.resolve() != folder):
            raise AgentFileRefused(
                "path_refused", f"{SAVE_FOLDER}/ is a symlink; refusing to write through it"
            )
        folder.mkdir(exist_ok=True)
        target = folder / f"{module}.py"
        if target.is_symlink():
            raise AgentFileRefused(
                "path_refused", f"{SAVE_FOLDER}/{module}.py is a symlink; refusing to write through it"
            )
        if target.exists() and not overwrite:
            raise AgentFileRefused(
                "file_exists", f"{SAVE_FOLDER}/{module}.py exists; send overwrite: true to replace it"
            )
        if target.exists() and not target.is_file():
            raise AgentFileRefused("path_refused", f"{SAVE_FOLDER}/{module}.py is not a regular file")
        descriptor, temporary = tempfile.mkstemp(prefix=f".{module}.", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
            os.chmod(temporary, 0o644)
            if not overwrite:
                # link() fails if the name appeared meanwhile: no silent replacement
                try:
                    os.link(temporary, target)
                except FileExistsError:
                    raise AgentFileRefused(
                        "file_exists", f"{SAVE_FOLDER}/{module}.py exists; send overwrite: true to replace it"
                    ) from None
            else:
                os.replace(temporary, target)
        finally:
            if os.path.lexists(temporary):
                os.unlink(temporary)
        return target

    def ref(self, handler: str) -> ModuleRef:
        """Check a handler reference's text (raises ``AgentFileRefused``)."""
        try:
            return parse_handler(handler)
        except AgentModuleError as exc:
            raise AgentFileRefused("path_refused", str(exc)) from None

    def read(self, handler: str) -> tuple[ModuleRef, str]:
        """The source of a handler module.

        Raises:
            AgentFileRefused: ``path_refused`` for anything outside the allowed folders.
            AgentFileNotFound: No such module.
        """
        ref = self.ref(handler)
        try:
            return ref, read_source(self.root, ref)
        except AgentModuleError as exc:
            if exc.kind == "not_found":
                raise AgentFileNotFound("not_found", str(exc)) from None
            raise AgentFileRefused("path_refused", str(exc)) from None
