"""The pool runner's settings, read from the environment.

========================================= ============================ ==================================
Variable                                  Default                      Meaning
========================================= ============================ ==================================
``POOL_RUNNER_HOST``                      ``127.0.0.1``                Where the HTTP API listens
``POOL_RUNNER_PORT``                      ``8080``                     Its port (``OPENAGENT_K8S_POOL_RUNNER_PORT``)
``POOL_RUNNER_TOKEN``                     ``OPENAGENT_API_KEY``        Bearer token the master must send
``POOL_RUNNER_WORKDIR``                   ``$TMPDIR/openagent-pool``   Agent code and home directories
``POOL_RUNNER_MAX_AGENTS``                ``50``                       Agents one runner accepts
``POOL_RUNNER_AGENT_MEMORY_MB``           ``1024``                     Address-space limit per agent (0: none)
``POOL_RUNNER_AGENT_CPU_SECONDS``         ``0``                        CPU-time limit per agent run (0: none)
``POOL_RUNNER_AGENT_NOFILE``              ``256``                      Open files per agent
``POOL_RUNNER_AGENT_UID`` / ``_GID``      ``65534``                    Identity agents run as when the runner is root (-1: keep root)
``POOL_RUNNER_LOG_LINES``                 ``1000``                     Log lines kept per agent
``POOL_RUNNER_BACKOFF_INITIAL`` / ``_MAX`` ``1`` / ``60``              Restart delay after a crash (doubles)
``POOL_RUNNER_CRASH_LOOP_THRESHOLD``      ``3``                        Consecutive short runs that make a crash loop
``POOL_RUNNER_STABLE_SECONDS``            ``60``                       A run this long resets the crash count
``MASTER_WS``                             ``ws://127.0.0.1:8000/ws``   The agents' master, unless a start names one
``OPENAGENT_API_KEY``                     unset                        Only the token's fallback: never handed to agents
========================================= ============================ ==================================
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from ipaddress import ip_address
from pathlib import Path

from openagent.config import DEFAULT_MASTER_WS
from openagent.errors import ConfigurationError

__all__ = ["PoolRunnerConfig"]


def _default_workdir() -> Path:
    return Path(tempfile.gettempdir()) / "openagent-pool"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class PoolRunnerConfig:
    """Everything the pool runner needs; immutable. :meth:`from_env` reads the table above."""

    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = field(default=None, repr=False)
    """Bearer token of the HTTP API. ``None`` is allowed only on a loopback address."""
    workdir: Path = field(default_factory=lambda: _default_workdir())
    max_agents: int = 50
    agent_memory_mb: int = 1024
    agent_cpu_seconds: int = 0
    agent_nofile: int = 256
    agent_uid: int = 65534
    """Used only when the runner runs as root; ``-1`` keeps root (not recommended)."""
    agent_gid: int = 65534
    agent_nproc: int = 0
    """``RLIMIT_NPROC`` of each agent: processes and threads of the user it runs as (0: none)."""
    agent_nice: int = 0
    """How much lower than the runner's the agents' scheduling priority is."""
    agent_uid_dedicated: bool = False
    """``agent_uid`` is this agent's alone: stopping it ends every process of that user, those it
    double-forked or moved to a session of their own included (the master's runner; not the pool
    runner's shared ``65534``)."""
    log_lines: int = 1000
    backoff_initial: float = 1.0
    backoff_max: float = 60.0
    crash_loop_threshold: int = 3
    stable_seconds: float = 60.0
    master_ws: str = DEFAULT_MASTER_WS

    def __post_init__(self) -> None:
        if not self.token and not _is_loopback(self.host):
            raise ConfigurationError(
                f"the pool runner listens on {self.host!r} without a token: set POOL_RUNNER_TOKEN "
                "(or OPENAGENT_API_KEY), or listen on 127.0.0.1"
            )
        for name in ("max_agents", "log_lines", "crash_loop_threshold"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be at least 1, got {getattr(self, name)!r}")
        for name in ("agent_memory_mb", "agent_cpu_seconds", "agent_nofile", "agent_nproc"):
            if getattr(self, name) < 0:
                raise ConfigurationError(
                    f"{name} must be 0 (no limit) or positive, got {getattr(self, name)!r}"
                )
        if not 0 < self.backoff_initial <= self.backoff_max:
            raise ConfigurationError(
                f"need 0 < backoff_initial ({self.backoff_initial!r}) <= backoff_max ({self.backoff_max!r})"
            )
        if not self.master_ws.startswith(("ws://", "wss://")):
            raise ConfigurationError(
                f"master_ws must be a ws:// or wss:// URL (env MASTER_WS), got {self.master_ws!r}"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PoolRunnerConfig:
        """Read the variables of the module docstring; an empty value counts as unset.

        Raises:
            ConfigurationError: A value is invalid; the message names the variable.
        """
        env = {key: value for key, value in (os.environ if environ is None else environ).items() if value}

        def number(name: str, default: float, kind: type[int] | type[float]) -> float:
            raw = env.get(name)
            if raw is None:
                return default
            try:
                return kind(raw)
            except ValueError:
                raise ConfigurationError(f"{name} must be a number, got {raw!r}") from None

        api_key = env.get("OPENAGENT_API_KEY")
        return cls(
            host=env.get("POOL_RUNNER_HOST", "127.0.0.1"),
            port=int(number("POOL_RUNNER_PORT", 8080, int)),
            token=env.get("POOL_RUNNER_TOKEN", api_key),
            workdir=Path(env.get("POOL_RUNNER_WORKDIR") or _default_workdir()),
            max_agents=int(number("POOL_RUNNER_MAX_AGENTS", 50, int)),
            agent_memory_mb=int(number("POOL_RUNNER_AGENT_MEMORY_MB", 1024, int)),
            agent_cpu_seconds=int(number("POOL_RUNNER_AGENT_CPU_SECONDS", 0, int)),
            agent_nofile=int(number("POOL_RUNNER_AGENT_NOFILE", 256, int)),
            agent_uid=int(number("POOL_RUNNER_AGENT_UID", 65534, int)),
            agent_gid=int(number("POOL_RUNNER_AGENT_GID", 65534, int)),
            log_lines=int(number("POOL_RUNNER_LOG_LINES", 1000, int)),
            backoff_initial=number("POOL_RUNNER_BACKOFF_INITIAL", 1.0, float),
            backoff_max=number("POOL_RUNNER_BACKOFF_MAX", 60.0, float),
            crash_loop_threshold=int(number("POOL_RUNNER_CRASH_LOOP_THRESHOLD", 3, int)),
            stable_seconds=number("POOL_RUNNER_STABLE_SECONDS", 60.0, float),
            master_ws=env.get("MASTER_WS", DEFAULT_MASTER_WS),
        )
