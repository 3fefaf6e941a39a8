"""The entry point of agent scripts: run an agent in a new event loop until Ctrl-C or SIGTERM.

Used by :func:`~openagent.action.run_action_agent` and
:func:`~openagent.invocation.run_invocation_agent`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import Protocol

__all__ = ["Runnable", "run_until_signalled"]


class Runnable(Protocol):
    """An agent that :func:`run_until_signalled` can run: ``run()`` serves until the agent
    stops, and stops the agent (closing what it opened) when it is cancelled."""

    @property
    def agent_id(self) -> str: ...

    async def run(self) -> None: ...


def run_until_signalled(agent: Runnable, *, kind: str, log: logging.Logger) -> None:
    """Run ``agent`` until Ctrl-C or SIGTERM, then return after a clean stop.

    Configures ``logging.basicConfig(level=INFO)`` when logging is not configured yet, then
    runs ``agent.run()`` in a new event loop. Ctrl-C and SIGTERM cancel it (``run`` stops the
    agent) and are logged on ``log`` as ``"<kind> <agent_id> ..."``; what else ends ``run``
    is raised. Must not be called from a running event loop.
    """
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(_run(agent, kind, log))
    except KeyboardInterrupt:
        log.info("%s %s interrupted", kind, agent.agent_id)


async def _run(agent: Runnable, kind: str, log: logging.Logger) -> None:
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    terminated = False

    def on_sigterm() -> None:
        nonlocal terminated
        terminated = True
        main.cancel()

    with contextlib.suppress(NotImplementedError):  # no signal handlers on Windows
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        await agent.run()
    except asyncio.CancelledError:
        if not terminated:
            raise
        main.uncancel()
        log.info("%s %s got SIGTERM", kind, agent.agent_id)
    finally:
        with contextlib.suppress(NotImplementedError):
            loop.remove_signal_handler(signal.SIGTERM)
