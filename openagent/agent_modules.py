"""Where agent code may live, and how to find and load it without leaving those folders.

Handler modules come from three folders under a root directory (the repository):
``agents/`` (generated and user modules), ``system_agents/`` and ``sample_agents/``.
A handler is named as a module path, ``agents.unit_converter``, optionally with a
function, ``agents.unit_converter:handle_tool``; the file form ``agents/unit_converter.py``
is accepted too. Anything else (an absolute path, ``..``, a percent sign, a folder that is
not one of the three, a symlink leading out of them) raises
:class:`~openagent.errors.AgentModuleError` before any file is opened.
"""

from __future__ import annotations

import importlib.util
import keyword
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from openagent.errors import AgentModuleError
from openagent.workspace.schema import ALLOWED_HANDLER_FOLDERS

__all__ = [
    "ALLOWED_HANDLER_FOLDERS",
    "MAX_SOURCE_BYTES",
    "ModuleRef",
    "is_module_name",
    "load_module",
    "module_file",
    "parse_handler",
    "read_source",
]

MAX_SOURCE_BYTES = 1024 * 1024
"""Agent modules larger than this are not read."""

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
_HANDLER_TEXT = re.compile(r"^[A-Za-z0-9_./:]{1,300}$")


def is_module_name(name: str) -> bool:
    """Whether ``name`` can be a module file name: a Python identifier, not a keyword, not dunder."""
    return bool(_IDENTIFIER.fullmatch(name)) and not keyword.iskeyword(name) and not name.startswith("__")


@dataclass(frozen=True, slots=True)
class ModuleRef:
    """A handler reference that passed :func:`parse_handler`."""

    folder: str
    """One of :data:`ALLOWED_HANDLER_FOLDERS`."""
    parts: tuple[str, ...]
    """Module path below the folder, e.g. ``("unit_converter",)``."""
    function: str | None = None
    """The function after ``:``, if any."""

    @property
    def module(self) -> str:
        """The dotted module path, e.g. ``agents.unit_converter``."""
        return ".".join((self.folder, *self.parts))

    @property
    def handler(self) -> str:
        """``module`` or ``module:function``."""
        return f"{self.module}:{self.function}" if self.function else self.module


def parse_handler(handler: str) -> ModuleRef:
    """Check a handler reference's text; nothing is read. Raises ``AgentModuleError('refused')``."""
    if not _HANDLER_TEXT.fullmatch(handler):
        raise AgentModuleError(
            "refused",
            f"handler {handler!r} refused: use a module path such as 'agents.my_agent' "
            "(letters, digits, '_', '.', one ':function')",
        )
    module, _, function = handler.partition(":")
    if function and not _IDENTIFIER.fullmatch(function):
        raise AgentModuleError("refused", f"handler {handler!r} refused: {function!r} is not a function name")
    if "/" in module:
        if not module.endswith(".py") or module.startswith("/"):
            raise AgentModuleError(
                "refused", f"handler {handler!r} refused: a file path must be relative and end in .py"
            )
        parts = module[: -len(".py")].split("/")
    else:
        parts = module.split(".")
    if not all(is_module_name(part) for part in parts):
        raise AgentModuleError(
            "refused", f"handler {handler!r} refused: every part of the module path must be an identifier"
        )
    if len(parts) < 2 or parts[0] not in ALLOWED_HANDLER_FOLDERS:
        raise AgentModuleError(
            "refused",
            f"handler {handler!r} refused: handler modules must be under "
            + ", ".join(f"{folder}/" for folder in ALLOWED_HANDLER_FOLDERS),
        )
    return ModuleRef(parts[0], tuple(parts[1:]), function or None)


def module_file(root: Path, ref: ModuleRef) -> Path:
    """The module's file under ``root``, resolved; it must stay inside its folder.

    Raises:
        AgentModuleError: ``refused`` for a symlink leading out of the folder (or a folder
            that is itself a symlink out of ``root``), ``not_found`` when there is no file.
    """
    root = root.resolve()
    folder = root / ref.folder
    try:
        real_folder = folder.resolve(strict=True)
    except OSError:
        raise AgentModuleError("not_found", f"no folder {ref.folder}/ on this master") from None
    if real_folder != folder:
        raise AgentModuleError("refused", f"{ref.folder}/ is a symlink out of the agents root; refused")
    candidate = folder.joinpath(*ref.parts[:-1], f"{ref.parts[-1]}.py")
    try:
        real = candidate.resolve(strict=True)
    except OSError:
        raise AgentModuleError("not_found", f"no module {ref.module!r} ({ref.folder}/... .py)") from None
    if not real.is_relative_to(real_folder):
        raise AgentModuleError("refused", f"module {ref.module!r} is a symlink out of {ref.folder}/; refused")
    if not real.is_file():
        raise AgentModuleError("not_found", f"module {ref.module!r} is not a file")
    return real


def read_source(root: Path, ref: ModuleRef) -> str:
    """The module's source text (at most :data:`MAX_SOURCE_BYTES`)."""
    path = module_file(root, ref)
    with path.open("rb") as handle:
        data = handle.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        raise AgentModuleError("refused", f"module {ref.module!r} is larger than {MAX_SOURCE_BYTES} bytes")
    return data.decode("utf-8", errors="replace")


def load_module(root: Path, ref: ModuleRef) -> ModuleType:
    """Import the module's file afresh (a later call sees edits) under its dotted name.

    Raises:
        AgentModuleError: ``refused``/``not_found`` as :func:`module_file`; ``import_failed``
            naming the exception the module raised while loading.
    """
    path = module_file(root, ref)
    spec = importlib.util.spec_from_file_location(ref.module, path)
    if spec is None or spec.loader is None:
        raise AgentModuleError("import_failed", f"cannot load {ref.module!r} from {path.name}")
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(ref.module)
    sys.modules[ref.module] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # a module calling sys.exit() must not stop the caller
        if previous is not None:
            sys.modules[ref.module] = previous
        else:
            sys.modules.pop(ref.module, None)
        raise AgentModuleError(
            "import_failed", f"importing {ref.module!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    return module
