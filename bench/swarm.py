"""A process holding many idle WebSocket agents: raw ``websockets`` clients, register frames only.

``python -m bench.swarm '<json config>'`` with ``url``, ``count``, ``prefix``, ``parallel``
(connections opened at once) and ``tools`` (tools per agent). Commands on stdin:

- ``warmup N``: open, register and close N connections (so lazy imports and first-use
  allocations on the server happen before its memory is measured); answers ``warmed``.
- ``go``: open ``count`` connections and register each; answers ``registered`` with
  ``ok``, ``failed``, ``seconds``, ``first_error`` and ``errors`` (how many failed with each
  kind of error, and the first message of each: a refused or reset connection, a timeout, the
  server's ``error`` frame), so that a failed registration says why.
- ``close``: close them all; answers ``closed`` and exits.

The clients send no pings (``ping_interval=None``) and, like the SDK's agents, do not offer
permessage-deflate (``"deflate": true`` to offer it); they answer the server's pings.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from bench.child import emit, read_line, run
from bench.echo_tool import ECHO_TOOL

OPEN_TIMEOUT = 60.0


class Swarm:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.url: str = cfg["url"]
        self.count: int = cfg["count"]
        self.prefix: str = cfg["prefix"]
        self.tools: list[dict[str, Any]] = [ECHO_TOOL] * int(cfg.get("tools", 1))
        self.compression: str | None = "deflate" if cfg.get("deflate", True) else None
        self._gate = asyncio.Semaphore(int(cfg.get("parallel", 64)))
        self.connections: list[ClientConnection] = []

    async def _open(self, agent_id: str) -> ClientConnection:
        async with self._gate:
            ws = await connect(
                self.url,
                ping_interval=None,
                open_timeout=OPEN_TIMEOUT,
                close_timeout=5,
                compression=self.compression,
            )
            try:
                frame = {"type": "register", "agent_id": agent_id, "role": "action", "tools": self.tools}
                await ws.send(json.dumps(frame))
                async with asyncio.timeout(OPEN_TIMEOUT):
                    reply = json.loads(await ws.recv())
                if reply.get("type") != "registered":
                    raise RuntimeError(f"register of {agent_id!r} answered {reply}")
            except BaseException:
                await ws.close()
                raise
            return ws

    async def open_all(self, count: int, tag: str) -> tuple[list[ClientConnection], list[BaseException]]:
        outcomes = await asyncio.gather(
            *(self._open(f"{self.prefix}-{tag}{i}") for i in range(count)), return_exceptions=True
        )
        opened = [o for o in outcomes if isinstance(o, ClientConnection)]
        failed = [o for o in outcomes if isinstance(o, BaseException)]
        return opened, failed

    async def close_all(self, connections: list[ClientConnection]) -> None:
        async def close(ws: ClientConnection) -> None:
            async with self._gate:
                await ws.close()

        await asyncio.gather(*(close(ws) for ws in connections), return_exceptions=True)


def error_kinds(failed: list[BaseException]) -> dict[str, dict[str, Any]]:
    """``{kind: {"count": n, "first": message}}``, the kind being the exception's class and errno."""
    kinds: dict[str, dict[str, Any]] = {}
    for exc in failed:
        errno = getattr(exc, "errno", None)
        kind = type(exc).__name__ + (f"[errno {errno}]" if errno else "")
        entry = kinds.setdefault(kind, {"count": 0, "first": repr(exc)[:300]})
        entry["count"] += 1
    return kinds


async def main(cfg: dict[str, Any]) -> None:
    swarm = Swarm(cfg)
    emit("ready")
    for _ in range(4):  # warmup, go, close: a bounded conversation with the runner
        command = await read_line()
        if command.startswith("warmup"):
            opened, _ = await swarm.open_all(int(command.split()[1]), "warmup-")
            await swarm.close_all(opened)
            emit("warmed", ok=len(opened))
        elif command == "go":
            started = time.perf_counter()
            swarm.connections, failed = await swarm.open_all(swarm.count, "")
            emit(
                "registered",
                ok=len(swarm.connections),
                failed=len(failed),
                seconds=time.perf_counter() - started,
                first_error=repr(failed[0]) if failed else None,
                errors=error_kinds(failed),
            )
        else:  # "close", or the runner went away
            await swarm.close_all(swarm.connections)
            emit("closed")
            return


if __name__ == "__main__":
    run(main(json.loads(sys.argv[1])))
