"""The import smoke test: load a generated module in a separate, limited process and build its agent.

The child (:mod:`master.builder._smoke_child`) runs with ``python -I -B`` in an empty
temporary directory, with an environment holding no secrets and no master address, under
resource limits (memory, CPU seconds, output size, open files) and a wall-clock timeout.
Network access is cut twice where the system allows it: the child runs in its own empty
network namespace (``unshare -rn``), and its audit hook refuses sockets, new processes,
native libraries and file writes. Passing shows that the module loads and builds the
agent it claims; it does not show that the code is safe to run.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openagent

logger = logging.getLogger("master.builder.smoke")

CHILD = Path(__file__).with_name("_smoke_child.py")
SDK_ROOT = Path(openagent.__file__).resolve().parent.parent
MARKER = "@@smoke@@"
DEFAULT_TIMEOUT = 20.0
_OUTPUT_CAP = 1024 * 1024


@dataclass(frozen=True)
class SmokeResult:
    """What the child reported."""

    ok: bool
    error: str = ""
    agent_id: str | None = None
    transport: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    supports_collaboration: bool = False
    isolation: str = ""
    """How the network was cut: ``network namespace + audit hook`` or ``audit hook``."""


@functools.cache
def _namespace_prefix() -> tuple[str, ...]:
    """``("unshare", "-rn")`` when this system lets us create an empty network namespace."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return ()
    try:
        probe = subprocess.run([unshare, "-rn", "true"], capture_output=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return ()
    if probe.returncode != 0:
        logger.info("unshare -rn is not permitted here; the smoke test relies on its audit hook alone")
        return ()
    return (unshare, "-rn")


def _child_env(home: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": home,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "MASTER_WS": "ws://127.0.0.1:9/ws",
        "MASTER_BASE_URL": "http://127.0.0.1:9",
    }


async def smoke_test(source: str, module_name: str, *, time_limit: float = DEFAULT_TIMEOUT) -> SmokeResult:
    """Import ``source`` as ``agents.<module_name>`` in a limited child process and build its agent."""
    prefix = await asyncio.to_thread(_namespace_prefix)
    isolation = "network namespace + audit hook" if prefix else "audit hook"
    with tempfile.TemporaryDirectory(prefix="openagent-smoke-") as tmp:
        module_file = Path(tmp) / f"{module_name}.py"
        module_file.write_text(source, encoding="utf-8")
        out_path = Path(tmp) / "stdout"
        with out_path.open("wb") as out:
            process = await asyncio.create_subprocess_exec(
                *prefix,
                sys.executable,
                "-I",
                "-B",
                str(CHILD),
                str(SDK_ROOT),
                str(module_file),
                f"agents.{module_name}",
                cwd=tmp,
                env=_child_env(tmp),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
            )
            try:
                async with asyncio.timeout(time_limit):
                    code = await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()
                return SmokeResult(
                    False, f"the import did not finish within {time_limit:g} s", isolation=isolation
                )
        with out_path.open("rb") as handle:
            output = handle.read(_OUTPUT_CAP).decode("utf-8", errors="replace")
    report = _last_report(output)
    if report is None:
        tail = output.strip().splitlines()[-3:]
        return SmokeResult(
            False,
            f"the import process exited with status {code} without a report"
            + (f": {' | '.join(tail)}" if tail else ""),
            isolation=isolation,
        )
    if not report.get("ok"):
        return SmokeResult(False, str(report.get("error", "unknown error")), isolation=isolation)
    return SmokeResult(
        True,
        agent_id=str(report.get("agent_id")),
        transport=str(report.get("transport")),
        tools=list(report.get("tools") or []),
        supports_collaboration=bool(report.get("supports_collaboration")),
        isolation=isolation,
    )


def _last_report(output: str) -> dict[str, Any] | None:
    for line in reversed(output.splitlines()):
        if line.startswith(MARKER):
            try:
                data = json.loads(line[len(MARKER) :])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None
