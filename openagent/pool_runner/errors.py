"""Errors of the pool runner; its HTTP layer (:mod:`.app`) maps them to statuses.

Hierarchy::

    PoolRunnerError
    ├── InvalidAgentSpec   the start request cannot be run as given (400)
    ├── UnknownAgent       no agent with that id runs here (404)
    └── PoolFull           POOL_RUNNER_MAX_AGENTS agents already run here (409)
"""

from __future__ import annotations

__all__ = ["InvalidAgentSpec", "PoolFull", "PoolRunnerError", "UnknownAgent"]


class PoolRunnerError(Exception):
    """Base class of the pool runner's errors; the message names the offending value."""


class InvalidAgentSpec(PoolRunnerError):
    """A bad agent id, module name, source or environment variable name."""


class UnknownAgent(PoolRunnerError):
    """The agent id is not running in this pool runner."""


class PoolFull(PoolRunnerError):
    """The runner already runs its maximum number of agents."""
