"""Where a server's time goes: py-spy samples during one measured window, summarised.

``python -m bench --profile ws_c32`` records the hub process of that case with
``py-spy record --format raw`` (collapsed stacks) over its first window and adds the
functions with the most samples (self and inclusive) to the results. The raw file stays
in ``<results dir>/profiles/`` for flame graphs (e.g. speedscope or ``flamegraph.pl``).
py-spy samples from outside the process, so the server runs unmodified; without
py-spy (``pip install py-spy``) profiling is skipped with a note.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.procs import ROOT, results_dir

RATE = 200
"""Samples per second."""

_LINE = re.compile(r":\d+\)$")

CATEGORIES: dict[str, tuple[str, ...]] = {
    "sync code in the threadpool (anyio worker threads)": ("run_sync_in_worker_thread", "WorkerThread.run"),
    "token counting (tiktoken)": ("tiktoken/",),
    "JSON Schema (jsonschema)": ("jsonschema/",),
    "pydantic validation / serialisation": ("pydantic/", "pydantic_core/"),
    "logging": ("logging/__init__.py",),
    "Redis client (redis-py)": ("redis/",),
    "httpx / httpcore": ("httpx/", "httpcore/"),
    "openai client": ("openai/",),
    "WebSocket protocol (websockets)": ("websockets/",),
    "FastAPI dependencies (solve_dependencies)": ("solve_dependencies",),
    "session history / context (master)": (
        "master/history.py",
        "master/session_context.py",
        "master/sessions.py",
    ),
}
"""Inclusive shares worth naming: a stack counts for a category when any frame matches."""


def _frame(raw: str) -> str:
    """``fn (path/to/module.py:123)`` → ``fn (module.py)``: one entry per function."""
    raw = _LINE.sub(")", raw.strip())
    name, _, where = raw.partition(" (")
    if not where:
        return name
    path = where.rstrip(")")
    parts = Path(path).parts
    for anchor in ("site-packages", "master", "openagent", "protocol", "bench"):
        if anchor in parts:
            index = parts.index(anchor)
            start = index + 1 if anchor == "site-packages" else index
            path = "/".join(parts[start:])
            break
    else:
        if Path(path).is_absolute():  # the standard library: the module's file name
            path = Path(path).name
    return f"{name} ({path})"


def summarise(collapsed: str, top: int = 25) -> dict[str, Any]:
    """Top functions by self and inclusive samples, in percent of all samples."""
    self_counts: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    by_package: Counter[str] = Counter()
    categories: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        for category, needles in CATEGORIES.items():
            if any(needle in stack for needle in needles):
                categories[category] += count
        frames = [_frame(f) for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        total += count
        self_counts[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
        by_package[_package(frames[-1])] += count

    def pct(counter: Counter[str]) -> list[tuple[str, float]]:
        return [(name, round(100 * n / total, 1)) for name, n in counter.most_common(top)] if total else []

    return {
        "samples": total,
        "top_self": pct(self_counts),
        "top_inclusive": pct(inclusive),
        "self_by_package": pct(by_package),
        "categories": pct(categories),
    }


def _package(frame: str) -> str:
    """The top-level package a frame's code belongs to (``uvicorn``, ``master``...)."""
    where = frame.rpartition(" (")[2].rstrip(")")
    head = where.split("/", 1)[0]
    return head.removesuffix(".py") if head else frame


class Profiler:
    """One py-spy recording of a process."""

    def __init__(self, case: str, pid: int, seconds: float) -> None:
        self.case = case
        self.pid = pid
        self.limit = max(1, round(seconds)) + 30
        """py-spy's own time limit; :meth:`finish` normally stops it at the end of the window."""
        self.path = results_dir() / "profiles" / f"{case}.collapsed.txt"
        self._proc: asyncio.subprocess.Process | None = None
        self._started = 0.0
        self.note: str | None = None

    async def start(self) -> None:
        exe = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
        if exe is None:
            self.note = "py-spy not installed: pip install py-spy"
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._proc = await asyncio.create_subprocess_exec(
            exe,
            "record",
            "--pid",
            str(self.pid),
            "--duration",
            str(self.limit),
            "--rate",
            str(RATE),
            "--nonblocking",
            "--format",
            "raw",
            "--output",
            str(self.path),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        self._started = time.monotonic()

    async def finish(self) -> dict[str, Any]:
        if self._proc is None:
            return {"note": self.note or "not recorded"}
        seconds = time.monotonic() - self._started
        if self._proc.returncode is None:
            self._proc.send_signal(signal.SIGINT)  # py-spy writes what it has and exits
        try:
            _, err = await asyncio.wait_for(self._proc.communicate(), 60)
        except TimeoutError:
            self._proc.kill()
            await self._proc.wait()
            return {"note": "py-spy did not finish"}
        if self._proc.returncode != 0 or not self.path.exists():
            return {"note": f"py-spy failed: {err.decode(errors='replace')[-500:]}"}
        summary = summarise(self.path.read_text())
        busy = summary["samples"] / (RATE * seconds)
        return {
            "file": str(self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path),
            "seconds": round(seconds, 1),
            "busy_fraction": round(busy, 2),
            **summary,
        }
