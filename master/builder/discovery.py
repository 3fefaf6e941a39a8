"""``GET /agents/discover``: the agent modules in ``system_agents/`` then ``agents/``, read statically.

Files are analysed with :mod:`master.builder.analysis` and never imported, so a broken or
hostile module cannot run code in the master by being listed. Each analysis is cached by
the file's inode, size and modification time, so polling the endpoint re-reads only what
changed. A file that cannot be analysed is listed with its error; it never breaks the list.

A module that only launches agents defined elsewhere (``system_agents/rag_stack_ws.py`` runs the
extractor and the indexer in one process) says so with a line ``# openagent: launcher``; it is
skipped instead of being listed as "no agent defined".
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from master.builder.analysis import AGENT_CLASSES, analyse
from openagent.agent_modules import MAX_SOURCE_BYTES, is_module_name

LAUNCHER_MARKER = "# openagent: launcher"
"""A line of a module that defines no agent of its own: discovery skips it silently."""

DISCOVERY_FOLDERS = ("system_agents", "agents")
"""Listed in this order; the first definition of an agent id wins."""


@dataclass(frozen=True)
class DiscoveredAgent:
    """A row of the discovery list."""

    agent_id: str
    transport: str
    tools: list[dict[str, Any]]
    module: str
    handler: str
    file: str
    supports_collaboration: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "transport": self.transport,
            "tools": self.tools,
            "module": self.module,
            "handler": self.handler,
            "file": self.file,
            "supports_collaboration": self.supports_collaboration,
        }


@dataclass(frozen=True)
class DiscoveryProblem:
    """A file that could not be analysed, or a duplicate agent id."""

    file: str
    error: str
    module: str | None = None
    agent_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {"file": self.file, "error": self.error}
        if self.module:
            row["module"] = self.module
        if self.agent_id:
            row["agent_id"] = self.agent_id
        return row


@dataclass
class Discovery:
    """The discovered agents (deduplicated by agent id) and the files that failed."""

    agents: list[DiscoveredAgent] = field(default_factory=list)
    errors: list[DiscoveryProblem] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "agents": [agent.as_dict() for agent in self.agents],
            "errors": [error.as_dict() for error in self.errors],
        }


_FileResult = tuple[list[DiscoveredAgent], list[DiscoveryProblem]]


class AgentDiscovery:
    """Lists agent modules under ``root`` without importing them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[str, tuple[tuple[int, int, int], _FileResult]] = {}
        self._lock = threading.Lock()

    def discover(self) -> Discovery:
        """List the agents (safe to call from several threads)."""
        with self._lock:
            return self._discover()

    def _discover(self) -> Discovery:
        result = Discovery()
        seen: dict[str, str] = {}
        live: set[str] = set()
        for folder in DISCOVERY_FOLDERS:
            for agents, problems in self._folder(folder, live):
                result.errors.extend(problems)
                for agent in agents:
                    if agent.agent_id in seen:
                        result.errors.append(
                            DiscoveryProblem(
                                agent.file,
                                f"agent id {agent.agent_id!r} is already defined by {seen[agent.agent_id]}; "
                                "this definition is ignored",
                                agent.module,
                                agent.agent_id,
                            )
                        )
                        continue
                    seen[agent.agent_id] = agent.file
                    result.agents.append(agent)
        for stale in set(self._cache) - live:
            del self._cache[stale]
        return result

    def _folder(self, folder: str, live: set[str]) -> list[_FileResult]:
        base = self.root / folder
        if not base.is_dir():
            return []
        real_base = base.resolve()
        if real_base != self.root.resolve() / folder:
            return [([], [DiscoveryProblem(f"{folder}/", f"{folder}/ is a symlink out of the agents root")])]
        with os.scandir(base) as entries:
            names = sorted(entry.name for entry in entries if entry.name.endswith(".py"))
        results: list[_FileResult] = []
        for name in names:
            stem = name[: -len(".py")]
            if stem.startswith("_"):
                continue  # __init__.py and private helpers
            relative = f"{folder}/{name}"
            if not is_module_name(stem):
                results.append(([], [DiscoveryProblem(relative, f"{stem!r} is not a module name")]))
                continue
            live.add(relative)
            results.append(self._file(base / name, relative, f"{folder}.{stem}", real_base))
        return results

    def _file(self, path: Path, relative: str, module: str, real_base: Path) -> _FileResult:
        try:
            stat = path.stat()
            if path.is_symlink() and not path.resolve().is_relative_to(real_base):
                return [], [DiscoveryProblem(relative, "symlink out of its folder; not read", module)]
        except OSError as exc:
            return [], [DiscoveryProblem(relative, f"cannot read: {exc.strerror}", module)]
        key = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        cached = self._cache.get(relative)
        if cached is not None and cached[0] == key:
            return cached[1]
        result = self._analyse(path, relative, module, stat.st_size)
        self._cache[relative] = (key, result)
        return result

    def _analyse(self, path: Path, relative: str, module: str, size: int) -> _FileResult:
        def problem(error: str, agent_id: str | None = None) -> _FileResult:
            return [], [DiscoveryProblem(relative, error, module, agent_id)]

        if size > MAX_SOURCE_BYTES:
            return problem(f"larger than {MAX_SOURCE_BYTES} bytes; not read")
        try:
            source = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return problem(f"cannot read: {exc}")
        if not any(name in source for name in AGENT_CLASSES):
            if LAUNCHER_MARKER in source.splitlines():
                return [], []
            return problem("no agent defined (no OrchestratorActionAgent or InvocationActionAgent call)")
        try:
            analysis = analyse(source, relative, full=False)
        except SyntaxError as exc:
            return problem(f"line {exc.lineno}: {exc.msg}")
        except (ValueError, RecursionError) as exc:
            return problem(f"cannot parse: {exc}")
        if not analysis.agents:
            return problem("no agent defined (no OrchestratorActionAgent or InvocationActionAgent call)")
        agents: list[DiscoveredAgent] = []
        problems: list[DiscoveryProblem] = []
        for definition in analysis.agents:
            if definition.agent_id is None or definition.problems:
                problems.append(
                    DiscoveryProblem(relative, "; ".join(definition.problems), module, definition.agent_id)
                )
                continue
            agents.append(
                DiscoveredAgent(
                    agent_id=definition.agent_id,
                    transport=definition.transport,
                    tools=definition.tools,
                    module=module,
                    handler=module,
                    file=relative,
                    supports_collaboration=definition.collaboration_handler is not None,
                )
            )
        return agents, problems
