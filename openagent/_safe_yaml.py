"""Safe YAML parsing for workspaces: a size cap, a bound on alias expansion and nesting,
the safe constructor only, and the node tree kept so errors can name their line.

The parse runs in three passes over already size-capped text:

1. the event stream (no objects built) counts the nodes the document would expand to,
   following aliases by the size of their anchored node, and its nesting depth; an
   "alias bomb" (a few lines expanding to billions of nodes) is refused here, before
   anything is expanded;
2. the composer builds the node tree (aliases share nodes, so it stays small);
3. the safe constructor turns the tree into plain dicts, lists and scalars.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from openagent.errors import WorkspaceError, WorkspaceProblem

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_YAML_BYTES = 4 * 1024 * 1024
"""Default size cap of a workspace YAML."""
MAX_NODES = 200_000
"""Most nodes a document may expand to, aliases followed."""
MAX_DEPTH = 64
"""Deepest nesting of collections."""


def _refuse(code: Any, message: str, line: int | None = None) -> WorkspaceError:
    return WorkspaceError(code, [WorkspaceProblem(message, line=line)])


def _line(mark: Any) -> int | None:
    return int(mark.line) + 1 if mark is not None else None


def check_size(text: str | bytes, max_bytes: int) -> None:
    """Refuse text over ``max_bytes`` (UTF-8) before looking at it."""
    size = len(text) if isinstance(text, bytes) else len(text)
    if size > max_bytes or (isinstance(text, str) and len(text.encode("utf-8")) > max_bytes):
        raise _refuse(
            "too_large",
            f"workspace YAML is larger than the {max_bytes} byte limit ({size} characters); "
            "export only what the workspace needs",
        )


def _scan(text: str | bytes, max_nodes: int, max_depth: int) -> None:
    """Pass 1: count expanded nodes and depth from the event stream alone."""
    anchored: dict[str, int] = {}
    stack: list[tuple[str | None, int]] = []
    total = 0
    documents = 0

    def add(count: int, mark: Any) -> None:
        nonlocal total
        total += count
        if total > max_nodes:
            raise _refuse(
                "yaml_bomb",
                f"YAML expands to more than {max_nodes} nodes (aliases followed); "
                "refused as a possible alias bomb",
                _line(mark),
            )
        if stack:
            anchor, inner = stack[-1]
            stack[-1] = (anchor, inner + count)

    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > 1:
                raise _refuse(
                    "yaml_syntax", "a workspace is one YAML document; found a second", _line(event.start_mark)
                )
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor:
                anchored[event.anchor] = 1
            add(1, event.start_mark)
        elif isinstance(event, yaml.AliasEvent):
            size = anchored.get(event.anchor or "")
            if size is None:
                raise _refuse("yaml_syntax", f"unknown alias *{event.anchor}", _line(event.start_mark))
            add(size, event.start_mark)
        elif isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
            stack.append((event.anchor, 0))
            if len(stack) > max_depth:
                raise _refuse(
                    "too_deep", f"YAML nests deeper than {max_depth} levels", _line(event.start_mark)
                )
        elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
            anchor, inner = stack.pop()
            if anchor:
                anchored[anchor] = inner + 1
            add(1, event.start_mark)
            # the collection's own count was added to its parent by add(); add its children too
            if stack:
                parent_anchor, parent_inner = stack[-1]
                stack[-1] = (parent_anchor, parent_inner + inner)


def parse(
    text: str | bytes,
    *,
    max_bytes: int = MAX_YAML_BYTES,
    max_nodes: int = MAX_NODES,
    max_depth: int = MAX_DEPTH,
) -> tuple[Any, yaml.Node | None]:
    """Parse one YAML document safely; returns the data and its node tree (for line numbers).

    Raises:
        WorkspaceError: ``too_large``, ``yaml_bomb``, ``too_deep`` or ``yaml_syntax``.
    """
    check_size(text, max_bytes)
    try:
        _scan(text, max_nodes, max_depth)
        node = yaml.compose(text, Loader=_Loader)
        if node is None:
            return None, None
        loader = yaml.SafeLoader("")
        try:
            data = loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(part for part in (exc.context, exc.problem) if part) or "invalid YAML"
        raise _refuse("yaml_syntax", f"not valid YAML: {problem}", _line(mark)) from None
    except yaml.YAMLError as exc:
        raise _refuse("yaml_syntax", f"not valid YAML: {exc}") from None
    except RecursionError:
        raise _refuse("too_deep", "YAML nests too deeply") from None
    return data, node


def field_path(loc: Sequence[int | str]) -> str:
    """``("agents", 0, "toolz")`` → ``agents[0].toolz``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def line_of(node: yaml.Node | None, loc: Sequence[int | str], *, key: bool = False) -> int | None:
    """The 1-based line of the value (or, with ``key``, the key) that ``loc`` leads to.

    Walks the node tree as far as ``loc`` matches it; parts it cannot follow (pydantic's
    union or validator tags) stop the walk at the nearest node.
    """
    if node is None:
        return None
    current: yaml.Node = node
    for index, part in enumerate(loc):
        last = index == len(loc) - 1
        if isinstance(current, yaml.MappingNode) and isinstance(part, str):
            pair = next((pair for pair in current.value if getattr(pair[0], "value", None) == part), None)
            if pair is None:
                break
            if last and key:
                return _line(pair[0].start_mark)
            current = pair[1]
        elif isinstance(current, yaml.SequenceNode) and isinstance(part, int) and part < len(current.value):
            current = current.value[part]
        else:
            break
    return _line(current.start_mark)
