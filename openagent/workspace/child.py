"""One workspace agent in a process of its own: the code :class:`~.processes.ProcessAgentRunner` starts.

Run by the pool runner's confined launcher (``python -m openagent.pool_runner.launch
--module openagent.workspace.child``), so resource limits, no new privileges and the dropped
root are in place before the handler module is imported. It reads what to run from its
environment, never from the parent's:

=============================== ============================================================
``OPENAGENT_WORKSPACE_AGENT``   the agent's :class:`~openagent.workspace.schema.AgentSpec` as JSON
``OPENAGENT_WORKSPACE_ROOT``    the directory holding ``agents/``, ``system_agents/``, ...
``MASTER_WS``                   the master (over loopback)
``OPENAGENT_API_KEY``           the agent's key for the master, when the master has one
=============================== ============================================================

It imports the handler module, builds the agent (:func:`~.runner.build_agent`), connects,
prints :data:`STARTED` and serves until the connection ends. A failure before that prints
:data:`FAILED` and the reason, and exits with status 3.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from openagent.agent_modules import load_module, parse_handler
from openagent.config import ClientConfig
from openagent.errors import AgentModuleError, OpenAgentError
from openagent.workspace.runner import build_agent
from openagent.workspace.schema import AgentSpec

__all__ = ["AGENT_VARIABLE", "FAILED", "ROOT_VARIABLE", "STARTED", "main"]

AGENT_VARIABLE = "OPENAGENT_WORKSPACE_AGENT"
ROOT_VARIABLE = "OPENAGENT_WORKSPACE_ROOT"
STARTED = "openagent-workspace: started"
"""The line printed once the agent is registered with the master."""
FAILED = "openagent-workspace: failed: "
"""The prefix of the line that says why the agent did not start."""


async def _serve(spec: AgentSpec, root: Path) -> int:
    if spec.handler is None:
        print(f"{FAILED}agent {spec.agent_id!r} has no handler module", flush=True)  # noqa: T201
        return 3
    try:
        ref = parse_handler(spec.handler)
        module = load_module(root, ref)
        agent = build_agent(spec, ref, module, ClientConfig.from_env(os.environ))
        await agent.start()
    except AgentModuleError as exc:
        print(f"{FAILED}{exc}", flush=True)  # noqa: T201
        return 3
    except OpenAgentError as exc:
        print(f"{FAILED}{type(exc).__name__}: {exc}", flush=True)  # noqa: T201
        return 3
    except KeyboardInterrupt:  # load_module turns the rest (SystemExit included) into AgentModuleError
        print(f"{FAILED}starting {spec.handler!r} raised KeyboardInterrupt", flush=True)  # noqa: T201
        return 3
    print(STARTED, flush=True)  # noqa: T201
    await agent.run()
    return 0


def main() -> int:
    """Run the agent named by the environment; the exit status says how it ended."""
    spec = AgentSpec.model_validate_json(os.environ[AGENT_VARIABLE])
    root = Path(os.environ[ROOT_VARIABLE])
    sys.path.insert(0, str(root))  # handler modules may import their neighbours
    return asyncio.run(_serve(spec, root))


if __name__ == "__main__":
    raise SystemExit(main())
