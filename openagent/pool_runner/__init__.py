"""The agent pool runner: many agents in one process tree, for the master's ``pool`` placement.

A small authenticated HTTP service (:mod:`.app`) that takes agent code (a module importable
here, or a script's source text), runs each agent as its own confined subprocess
(:mod:`.launch`: resource limits, no new privileges, root dropped), restarts crashed agents
with backoff and reports crash loops (:mod:`.supervisor`), and serves their log tails.

It lives in the SDK package because it is agent-side code: it needs only the SDK and the
``invocation`` extra (Starlette, uvicorn), never the master, and ships in the
``openagent/agent-pool-runner`` image (``deploy/docker/agent-pool-runner.Dockerfile``).
Run it locally with::

    POOL_RUNNER_PORT=8080 MASTER_WS=ws://127.0.0.1:8000/ws python -m openagent.pool_runner
"""

from __future__ import annotations

from openagent.pool_runner.app import create_app
from openagent.pool_runner.config import PoolRunnerConfig
from openagent.pool_runner.errors import InvalidAgentSpec, PoolFull, PoolRunnerError, UnknownAgent
from openagent.pool_runner.supervisor import AgentSpec, AgentStatus, ManagedAgent, Supervisor

__all__ = [
    "AgentSpec",
    "AgentStatus",
    "InvalidAgentSpec",
    "ManagedAgent",
    "PoolFull",
    "PoolRunnerConfig",
    "PoolRunnerError",
    "Supervisor",
    "UnknownAgent",
    "create_app",
]
