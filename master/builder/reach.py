"""What generated code can reach: imports and attribute paths checked by the module they resolve to.

A deny-list of module *names* is not enough: ``posix`` is ``os`` under another name,
``asyncio.create_subprocess_exec`` is :mod:`subprocess` reached through an allowed package,
``logging.os`` is :mod:`os` itself, and ``getattr(__builtins__, "__import__")`` is an import.
So every import and every attribute path rooted at an imported module is resolved to the
object it names (allowed standard-library modules are imported here to look; the denied ones
never are) and refused when that object is, or comes from, a denied module. Paths the checker
cannot follow statically (a method of a run-time object such as ``loop.subprocess_exec``) are
refused by the attribute's name.

What the walk resolves beyond names and paths: a built-in of :data:`DYNAMIC_CALLS` referred to
at all, not only called (``e = eval``, an ``@eval`` decorator, ``functools.partial(exec)``);
attribute names given as literal strings (``getattr(x, "...")``, ``operator.attrgetter`` and
``methodcaller``, the fields of ``str.format`` / ``string.Formatter`` strings such as
``"{0.__globals__}"``), and string annotations (which ``typing.get_type_hints`` and pydantic
evaluate), parsed and checked as code; ``typing.ForwardRef`` and ``get_type_hints`` themselves
are refused.

No well-kept analyser fits this job: linters such as bandit flag direct calls but follow no
alias and resolve no module path, RestrictedPython rewrites the code to run under its own guards
(the agents run unmodified, with the SDK), and type checkers answer other questions. So the walk
stays hand-written and small.

The checks make misuse hard to write by accident or to slip past a reviewer; they are a second
line, not a sandbox, and cannot be complete (Python reaches the same object in endless ways).
What an agent may do at run time is bounded by the process it runs in: its own user, key and
limits (the security page's "What agent code can reach").
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import string
import sys
import types
from collections.abc import Iterator
from typing import Any

ALLOWED_PACKAGES = frozenset({"openagent", "protocol", "httpx", "pydantic"})
"""Third-party packages generated code may import (besides the standard library)."""

DENIED_MODULES = frozenset(
    {
        # processes, and the OS interface under its other names
        "os",
        "posix",
        "nt",
        "posixpath",
        "ntpath",
        "subprocess",
        "asyncio.subprocess",
        "asyncio.unix_events",
        "asyncio.windows_events",
        "concurrent.futures.process",
        "multiprocessing",
        "pty",
        "pwd",
        "grp",
        "resource",
        "signal",
        "shutil",
        "platform",
        "pipes",
        "mailcap",
        # the interpreter, import machinery and code execution
        "sys",
        "builtins",
        "importlib",
        "pkgutil",
        "zipimport",
        "runpy",
        "code",
        "codeop",
        "pydoc",
        "inspect",
        "gc",
        "ctypes",
        "pickle",
        "marshal",
        "shelve",
        "timeit",
        "doctest",
        "pdb",
        "bdb",
        "trace",
        "site",
        "logging.config",
        # servers and mail
        "socketserver",
        "http.server",
        "telnetlib",
        "ftplib",
        "smtplib",
        "poplib",
        "imaplib",
        # side effects on import
        "webbrowser",
        "antigravity",
        "this",
        "tkinter",
        "turtle",
        "turtledemo",
        "idlelib",
    }
)
"""Modules generated agents do not get: they reach outside the tool's job (a dotted name denies a
submodule of an otherwise allowed package)."""

DYNAMIC_CALLS = frozenset(
    {
        "exec",
        "eval",
        "compile",
        "__import__",
        "globals",
        "locals",
        "vars",
        "setattr",
        "delattr",
        "open",
        "breakpoint",
    }
)
"""Built-ins that run code, import, or read and rewrite namespaces."""

DENIED_ATTRIBUTES = frozenset(
    {
        "system",
        "popen",
        "fork",
        "forkpty",
        "spawn",
        "posix_spawn",
        "posix_spawnp",
        "subprocess_exec",
        "subprocess_shell",
        "create_subprocess_exec",
        "create_subprocess_shell",
        "ProcessPoolExecutor",
        "modules",
        "_getframe",
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_back",
        "f_code",
        "gi_frame",
        "cr_frame",
        "ag_frame",
        "tb_frame",
        # evaluation of strings hidden in typing
        "ForwardRef",
        "get_type_hints",
        "_eval_type",
        "_evaluate",
        "evaluate_forward_ref",
    }
)
"""Attribute names refused on any object: process creation and interpreter internals reached from
run-time values the checker cannot resolve."""

ALLOWED_DUNDERS = frozenset({"__init__", "__name__"})
_DENIED_NAMES = frozenset({"__builtins__", "__import__", "__loader__", "__spec__"})
_ATTRIBUTE_STRINGS = frozenset({"attrgetter", "methodcaller"})
"""Callables whose string arguments name attributes (``operator.attrgetter("a.b")``)."""
_FORMAT_METHODS = frozenset({"format", "format_map", "vformat", "get_field", "get_value"})
"""Methods whose format string reaches attributes through its fields (``"{0.__globals__}"``)."""
_FORMATTER = string.Formatter()
_FIELD_HEAD = re.compile(r"[^.\[]*")
_FIELD_PARTS = re.compile(r"\.([^.\[]*)|\[([^\]]*)\]")
"""A replacement field's first name, then its ``.attribute`` and ``[index]`` parts."""
_MODULE_ATTRIBUTES = frozenset(
    {"os", "sys", "posix", "nt", "subprocess", "posixsubprocess", "builtins", "importlib", "ctypes"}
    | {"multiprocessing", "pty", "shutil", "runpy", "marshal", "pickle"}
)
"""Module names refused as an attribute of anything (``logging.os``, ``tempfile._os``)."""


def _denied(module: str) -> bool:
    """Whether a module name is denied: itself, a parent, or a private (``_x``) module."""
    parts = module.split(".")
    if any(part.startswith("_") and part != "__future__" for part in parts):
        return True
    return any(".".join(parts[: index + 1]) in DENIED_MODULES for index in range(len(parts)))


def _attribute_denied(name: str) -> bool:
    """An attribute refused whatever its receiver: a dunder, a module's name (``os``, ``_os``), an escape."""
    if name.startswith("__") and name.endswith("__"):
        return name not in ALLOWED_DUNDERS
    stripped = name.lstrip("_")
    return (
        name in DENIED_ATTRIBUTES
        or stripped in _MODULE_ATTRIBUTES
        or stripped.startswith(("spawnv", "spawnl", "execv", "execl"))
    )


def _load(module: str) -> types.ModuleType | None:
    """The module object to look into, imported only if it is standard library and allowed."""
    loaded = sys.modules.get(module)
    if loaded is not None:
        return loaded
    if _denied(module) or module.split(".")[0] not in sys.stdlib_module_names:
        return None
    try:
        if importlib.util.find_spec(module) is None:
            return None
        return importlib.import_module(module)
    except (ImportError, ValueError):
        return None


def _origin(value: Any) -> str | None:
    """The module a value is or comes from."""
    if isinstance(value, types.ModuleType):
        return value.__name__
    module = getattr(value, "__module__", None)
    return module if isinstance(module, str) else None


def _listed(module: str) -> bool:
    """Whether a module or one of its parents is in :data:`DENIED_MODULES` (no private-name rule)."""
    parts = module.split(".")
    return any(".".join(parts[: index + 1]) in DENIED_MODULES for index in range(len(parts)))


def _resolution_problem(value: Any, path: str) -> str | None:
    origin = _origin(value)
    if origin is None or origin.split(".")[0] in ALLOWED_PACKAGES:
        return None
    if isinstance(value, types.ModuleType):
        if _denied(origin):
            return f"{path!r} is the module {origin!r}, which is not allowed in generated agents"
    # A function or class: many harmless ones live in private C modules (functools.reduce in
    # _functools, io.StringIO in _io), so only the listed modules count here.
    elif _listed(origin.lstrip("_")) or _listed(origin):
        return f"{path!r} comes from {origin!r}, which is not allowed in generated agents"
    return None


class _Reach:
    """Walks one module's tree, binding names to the modules they hold."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.bindings: dict[str, str] = {}
        """Local name → dotted path of the module (or module attribute) it holds."""
        self.problems: list[str] = []

    def run(self) -> tuple[list[str], list[str]]:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                self._import(node)
            elif isinstance(node, ast.ImportFrom):
                self._import_from(node)
        imports, self.problems = list(dict.fromkeys(self.problems)), []
        # Follow plain re-bindings (``loop_module = asyncio``) until nothing new is bound.
        changed = True
        while changed:
            changed = False
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr) and node.value is not None:
                    path = self._path(node.value)
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        if path is not None and isinstance(target, ast.Name):
                            if self.bindings.get(target.id) != path:
                                self.bindings[target.id] = path
                                changed = True
        for node in ast.walk(self.tree):
            self._visit(node)
        for annotation in _string_annotations(self.tree):
            self._annotation(annotation)
        return imports, list(dict.fromkeys(self.problems))

    def _annotation(self, node: ast.Constant) -> None:
        """A string annotation is code that typing and pydantic evaluate: check it as code."""
        line = node.lineno
        try:
            expression = ast.parse(str(node.value).strip(), mode="eval")
        except SyntaxError:
            self.problems.append(f"line {line}: the string annotation {node.value!r} is not an expression")
            return
        for inner in ast.walk(expression):
            if hasattr(inner, "lineno"):
                inner.lineno = line
            self._visit(inner)

    def _attribute_names(self, names: list[str], line: int, what: str) -> None:
        """Attribute names given as text: each dotted part is checked like ``x.part``."""
        for name in names:
            for part in name.replace("[", ".").replace("]", "").split("."):
                if _attribute_denied(part) or part in DYNAMIC_CALLS or part in _DENIED_NAMES:
                    self.problems.append(f"line {line}: attribute {part!r} ({what}) is not allowed")

    def _strings(self, node: ast.Call, line: int) -> None:
        """Attribute access written as strings: attrgetter, methodcaller and format fields."""
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in _ATTRIBUTE_STRINGS:
            literals = [arg.value for arg in node.args if isinstance(arg, ast.Constant)]
            if name == "methodcaller":
                literals = literals[:1]
                dynamic = not node.args or not _is_text(node.args[0])
            else:
                dynamic = not all(_is_text(arg) for arg in node.args)
            if dynamic:
                self.problems.append(f"line {line}: {name}() needs literal attribute names; not allowed")
            self._attribute_names([str(text) for text in literals], line, name)
        elif name in _FORMAT_METHODS:
            receiver = func.value if isinstance(func, ast.Attribute) else None
            texts = [arg for arg in [receiver, *node.args] if arg is not None and _is_text(arg)]
            if name in ("vformat", "get_field") and not (node.args and _is_text(node.args[0])):
                self.problems.append(f"line {line}: {name}() needs a literal format string; not allowed")
            for text in texts:
                assert isinstance(text, ast.Constant)
                # get_field takes one field name ("0.__globals__"), the others a format string.
                value = str(text.value)
                parts = _field_parts(value) if name == "get_field" else _format_attributes(value)
                self._attribute_names(parts, line, f"in {text.value!r}")

    def _import(self, node: ast.Import) -> None:
        for alias in node.names:
            if self._refuse_module(alias.name, node.lineno):
                continue
            if alias.asname is not None:
                self.bindings[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.bindings[top] = top

    def _import_from(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.problems.append(f"line {node.lineno}: relative import refused")
            return
        module = node.module or ""
        if self._refuse_module(module, node.lineno):
            return
        for alias in node.names:
            if alias.name == "*":
                self.problems.append(f"line {node.lineno}: 'from {module} import *' is not allowed")
                continue
            path = f"{module}.{alias.name}"
            if _attribute_denied(alias.name):
                self.problems.append(f"line {node.lineno}: {path!r} is not allowed in generated agents")
                continue
            problem = self._resolve(path)
            if problem is not None:
                self.problems.append(f"line {node.lineno}: {problem}")
                continue
            self.bindings[alias.asname or alias.name] = path

    def _refuse_module(self, module: str, line: int) -> bool:
        top = module.split(".")[0]
        if top in ALLOWED_PACKAGES:
            return False
        if _denied(module):
            self.problems.append(f"line {line}: {module!r} is not allowed in generated agents")
            return True
        if top not in sys.stdlib_module_names:
            allowed = ", ".join(sorted(ALLOWED_PACKAGES))
            self.problems.append(
                f"line {line}: {module!r} is not the SDK, the standard library or one of {allowed}"
            )
            return True
        return False

    def _path(self, node: ast.expr) -> str | None:
        """The dotted path an expression names when it starts at a bound module name."""
        if isinstance(node, ast.Name):
            return self.bindings.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._path(node.value)
            return None if base is None else f"{base}.{node.attr}"
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            base = self._path(node.args[0])
            return None if base is None else f"{base}.{node.args[1].value}"
        return None

    def _resolve(self, path: str) -> str | None:
        """Why the object at ``path`` is refused, or None. Unresolvable paths are left to the name rules."""
        top = path.split(".")[0]
        if top in ALLOWED_PACKAGES:
            return None
        parts = path.split(".")
        for index in range(len(parts), 0, -1):
            prefix = ".".join(parts[:index])
            if _denied(prefix):
                return f"{path!r} reaches {prefix!r}, which is not allowed in generated agents"
        value: Any = _load(parts[0])
        if value is None:
            return None
        for index, part in enumerate(parts[1:], start=1):
            submodule = ".".join(parts[: index + 1])
            if submodule in sys.modules and isinstance(value, types.ModuleType):
                child: Any = getattr(value, part, sys.modules[submodule])
            else:
                child = getattr(value, part, None)
            if child is None and isinstance(value, types.ModuleType):
                child = _load(submodule)
            if child is None:
                return None
            value = child
            problem = _resolution_problem(value, ".".join(parts[: index + 1]))
            if problem is not None:
                return problem
        return None

    def _visit(self, node: ast.AST) -> None:
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Call):
            self._strings(node, line)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("getattr", "hasattr") and len(node.args) >= 2:
                name = node.args[1]
                if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                    self.problems.append(f"line {line}: {node.func.id}() needs a literal attribute name")
                elif _attribute_denied(name.value) or name.value in DYNAMIC_CALLS:
                    self.problems.append(f"line {line}: attribute {name.value!r} is not allowed")
        # A built-in that runs code is refused wherever it is named, not only where it is called:
        # ``e = eval``, ``@exec``, ``functools.partial(exec)`` and ``map(eval, ...)`` run it too.
        if isinstance(node, ast.Name) and node.id in DYNAMIC_CALLS:
            self.problems.append(f"line {line}: {node.id}() is not allowed")
        if isinstance(node, ast.Name) and node.id in _DENIED_NAMES:
            self.problems.append(f"line {line}: {node.id!r} is not allowed")
        elif isinstance(node, ast.Attribute) and _attribute_denied(node.attr):
            self.problems.append(f"line {line}: attribute {node.attr!r} is not allowed")
        if isinstance(node, ast.Attribute | ast.Call):
            path = self._path(node)
            if path is not None:
                problem = self._resolve(path)
                if problem is not None:
                    self.problems.append(f"line {line}: {problem}")


def _is_text(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _field_parts(field: str) -> list[str]:
    """The ``.attribute`` and ``[index]`` names of one replacement field (``0.a[b]``: a, b)."""
    start = len(_FIELD_HEAD.match(field)[0])  # type: ignore[index]
    return [part[0] or part[1] for part in _FIELD_PARTS.findall(field, start)]


def _format_attributes(text: str) -> list[str]:
    """The attribute and index names of every replacement field of a format string (nested
    fields in format specs included), split as ``str.format`` splits them."""
    names: list[str] = []
    try:
        for _, field, spec, _ in _FORMATTER.parse(text):
            if field is not None:
                names.extend(_field_parts(field))
            if spec and "{" in spec:
                names.extend(_format_attributes(spec))
    except ValueError:  # not a valid format string: str.format would refuse it too
        return names
    return names


def _string_annotations(tree: ast.Module) -> Iterator[ast.Constant]:
    """Annotations written as strings (of variables, arguments and return values)."""
    for node in ast.walk(tree):
        annotations: list[ast.expr | None] = []
        if isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        elif isinstance(node, ast.arg):
            annotations.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            annotations.append(node.returns)
        for annotation in annotations:
            if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
                yield annotation


def reach_problems(tree: ast.Module) -> tuple[list[str], list[str]]:
    """``(imports, uses)``: imports refused (relative, outside the standard library and the
    allow-list, or denied), then calls, names and attribute paths that reach a denied module or
    run code dynamically."""
    return _Reach(tree).run()
