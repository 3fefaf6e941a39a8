"""Helpers for the processes the runner starts: fd limit, events to the runner, the event loop.

Kept free of heavy imports: the master's launcher imports it too.
"""

from __future__ import annotations

import asyncio
import json
import resource
import signal
import sys
from collections.abc import Coroutine
from typing import Any


def raise_fd_limit() -> int:
    """Raise the soft limit of open files to the hard limit (10,000 sockets need it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


def emit(event: str, **fields: Any) -> None:
    """Tell the runner something: one JSON line on stdout."""
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


async def read_line() -> str:
    """The next line the runner writes on stdin ("" at end of file), without blocking the loop."""
    line: str = await asyncio.to_thread(sys.stdin.readline)
    return line.strip()


async def until_terminated() -> None:
    """Return on SIGTERM or SIGINT."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def run(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` on uvloop (what uvicorn picks for the servers too) after raising the fd limit."""
    raise_fd_limit()
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard]
        asyncio.run(main)
    else:
        uvloop.run(main)
