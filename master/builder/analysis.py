"""Static analysis of an agent module's source: what agent it defines, without importing it.

The module is parsed with :mod:`ast` and never executed. It is first decoded as Python decodes
it when it imports the file (:func:`python_text`): a coding cookie such as ``# coding: utf-7``
changes what the bytes mean, so analysing the text as written would check other code than runs. An agent definition is a call to
``OrchestratorActionAgent``, ``OrchestratorWebSocketActionAgent`` or ``InvocationActionAgent``
(or a subclass defined in the module, or its ``super().__init__``); its ``agent_id`` and
``tools`` must be literals, or names of module-level literals (``TOOLS = [ToolSchema(...)]``),
so that the evaluator below can read them. Anything computed at run time is reported as
unresolvable rather than guessed.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from protocol import ToolSchema

Transport = Literal["websocket", "invocation"]

AGENT_CLASSES: dict[str, Transport] = {
    "OrchestratorActionAgent": "websocket",
    "OrchestratorWebSocketActionAgent": "websocket",
    "InvocationActionAgent": "invocation",
}
"""SDK classes whose construction defines an agent, and the transport each one uses."""

_MAX_DEPTH = 30


class Unresolvable(Exception):
    """A value the static evaluator cannot read (computed at run time)."""


@dataclass
class AgentDefinition:
    """One agent a module defines, as read from its source."""

    line: int
    transport: Transport
    agent_id: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_handler: str | None = None
    """Name of the tool handler when it is a plain name (``handle_tool``)."""
    collaboration_handler: str | None = None
    problems: list[str] = field(default_factory=list)
    """Why the id or tools could not be read."""


@dataclass
class ModuleAnalysis:
    """What :func:`analyse` found in one source text."""

    tree: ast.Module
    agents: list[AgentDefinition]
    imports: list[tuple[str, int, int]]
    """``(module, line, level)`` of every import; ``level`` > 0 for relative imports."""
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
    """Module-level functions by name."""


def _callee(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


class _Evaluator:
    """Reads literal values, following module-level names."""

    def __init__(self, constants: dict[str, ast.expr]) -> None:
        self.constants = constants

    def value(self, node: ast.expr, depth: int = 0) -> Any:
        if depth > _MAX_DEPTH:
            raise Unresolvable(f"line {node.lineno}: value nests too deeply")
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.List | ast.Tuple):
            return [self.value(item, depth + 1) for item in node.elts]
        if isinstance(node, ast.Dict):
            result: dict[str, Any] = {}
            for key, item in zip(node.keys, node.values, strict=True):
                if key is None:
                    raise Unresolvable(f"line {node.lineno}: '**' in a dict literal")
                name = self.value(key, depth + 1)
                if not isinstance(name, str):
                    raise Unresolvable(f"line {key.lineno}: dict keys must be strings")
                result[name] = self.value(item, depth + 1)
            return result
        if isinstance(node, ast.Name):
            if node.id in self.constants:
                return self.value(self.constants[node.id], depth + 1)
            raise Unresolvable(f"line {node.lineno}: {node.id!r} is not a module-level literal")
        if isinstance(node, ast.Call) and _callee(node.func) in ("ToolSchema", "dict") and not node.args:
            kwargs: dict[str, Any] = {}
            for keyword in node.keywords:
                if keyword.arg is None:
                    raise Unresolvable(f"line {node.lineno}: '**' in {_callee(node.func)}()")
                kwargs[keyword.arg] = self.value(keyword.value, depth + 1)
            return kwargs
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.value(node.left, depth + 1), self.value(node.right, depth + 1)
            if isinstance(left, list) and isinstance(right, list):
                return left + right
            if isinstance(left, str) and isinstance(right, str):
                return left + right
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            operand = self.value(node.operand, depth + 1)
            if isinstance(operand, int | float):
                return -operand
        raise Unresolvable(f"line {node.lineno}: {ast.unparse(node)[:60]!r} is computed at run time")


def _constants(tree: ast.Module) -> dict[str, ast.expr]:
    found: dict[str, ast.expr] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, ast.Name):
                found[target.id] = statement.value
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            if statement.value is not None:
                found[statement.target.id] = statement.value
    return found


def _subclasses(tree: ast.Module) -> dict[str, tuple[Transport, ast.ClassDef]]:
    classes: dict[str, tuple[Transport, ast.ClassDef]] = {}
    for statement in tree.body:
        if isinstance(statement, ast.ClassDef):
            for base in statement.bases:
                name = _callee(base)
                if name in AGENT_CLASSES:
                    classes[statement.name] = (AGENT_CLASSES[name], statement)
                elif name in classes:
                    classes[statement.name] = (classes[name][0], statement)
    return classes


def _argument(call: ast.Call, position: int, name: str) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    if position < len(call.args) and not any(
        isinstance(arg, ast.Starred) for arg in call.args[: position + 1]
    ):
        return call.args[position]
    return None


def _definition(call: ast.Call, transport: Transport, evaluator: _Evaluator) -> AgentDefinition:
    definition = AgentDefinition(line=call.lineno, transport=transport)
    id_node = _argument(call, 0, "agent_id")
    tools_node = _argument(call, 1, "tools")
    handler_node = _argument(call, 2 if transport == "websocket" else 3, "tool_handler")
    collab_node = _argument(call, 99, "collaboration_handler")
    if isinstance(handler_node, ast.Name):
        definition.tool_handler = handler_node.id
    if isinstance(collab_node, ast.Name):
        definition.collaboration_handler = collab_node.id
    if id_node is None:
        definition.problems.append(f"line {call.lineno}: no agent_id argument")
    else:
        try:
            agent_id = evaluator.value(id_node)
            if isinstance(agent_id, str):
                definition.agent_id = agent_id
            else:
                definition.problems.append(f"line {call.lineno}: agent_id is not a string")
        except Unresolvable as exc:
            definition.problems.append(f"agent_id: {exc}")
    if tools_node is None:
        definition.problems.append(f"line {call.lineno}: no tools argument")
        return definition
    try:
        tools = evaluator.value(tools_node)
    except Unresolvable as exc:
        definition.problems.append(f"tools: {exc}")
        return definition
    if not isinstance(tools, list):
        definition.problems.append(f"line {call.lineno}: tools is not a list")
        return definition
    for index, tool in enumerate(tools):
        try:
            definition.tools.append(ToolSchema.model_validate(tool).model_dump(exclude_none=True))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            definition.problems.append(f"tool #{index}: {where}: {first['msg']}")
    return definition


def _statements_to_walk(tree: ast.Module, source: str, names: Iterable[str]) -> list[ast.stmt]:
    """Top-level statements whose lines mention one of ``names``: only these can build an agent."""
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(name) for name in names) + r")\b")
    lines = {source.count("\n", 0, match.start()) + 1 for match in pattern.finditer(source)}
    if not lines:
        return []
    return [
        statement
        for statement in tree.body
        if any(statement.lineno <= line <= (statement.end_lineno or statement.lineno) for line in lines)
    ]


def python_text(source: str) -> str:
    """``source`` as Python reads it from a UTF-8 file: decoded with the encoding its coding
    cookie declares (UTF-8 without one). Raises ``SyntaxError`` when that fails."""
    try:
        return importlib.util.decode_source(source.encode("utf-8", "surrogateescape"))
    except (SyntaxError, LookupError, UnicodeDecodeError) as exc:
        raise SyntaxError(f"cannot be decoded as Python reads the file: {exc}") from exc


def analyse(source: str, filename: str = "<agent>", *, full: bool = True) -> ModuleAnalysis:
    """Decode ``source`` as Python would (:func:`python_text`), parse it and find its agent
    definitions. Raises ``SyntaxError``.

    ``full`` walks every node (imports anywhere, for the code checks); without it (discovery)
    only the top-level statements that mention an agent class are walked, and only top-level
    imports are listed.
    """
    source = python_text(source)
    tree = ast.parse(source, filename=filename)
    evaluator = _Evaluator(_constants(tree))
    subclasses = _subclasses(tree)
    kinds: dict[str, Transport] = {**AGENT_CLASSES, **{name: kind for name, (kind, _) in subclasses.items()}}
    agents: list[AgentDefinition] = []
    imports: list[tuple[str, int, int]] = []
    if full:
        nodes: Iterable[ast.AST] = ast.walk(tree)
    else:
        nodes = itertools.chain(
            (node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)),
            *(ast.walk(statement) for statement in _statements_to_walk(tree, source, kinds)),
        )
    for node in nodes:
        if isinstance(node, ast.Import):
            imports.extend((alias.name, node.lineno, 0) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imports.append((node.module or "", node.lineno, node.level))
        elif isinstance(node, ast.Call):
            name = _callee(node.func)
            if name is not None and name in kinds:
                agents.append(_definition(node, kinds[name], evaluator))
    for kind, cls in subclasses.values():
        for node in ast.walk(cls):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "__init__"
                and isinstance(node.func.value, ast.Call)
                and _callee(node.func.value.func) == "super"
            ):
                agents.append(_definition(node, kind, evaluator))
    # A subclass constructed without literal arguments is defined by its super().__init__ call.
    resolved = [agent for agent in agents if agent.agent_id is not None]
    if resolved:
        agents = resolved + [a for a in agents if a.agent_id is None and a.problems and not _is_forwarding(a)]
    agents.sort(key=lambda agent: agent.line)
    functions = {
        statement.name: statement
        for statement in tree.body
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    return ModuleAnalysis(tree, agents, imports, functions)


def _is_forwarding(agent: AgentDefinition) -> bool:
    """A ``super().__init__(agent_id, tools)`` that forwards parameters: not a definition of its own."""
    return all("is not a module-level literal" in problem for problem in agent.problems)
