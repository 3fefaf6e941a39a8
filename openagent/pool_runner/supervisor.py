"""Agent subprocesses: one per agent, confined, restarted with backoff, logs kept in memory.

:class:`Supervisor` owns the agents of one pool runner. Each :class:`ManagedAgent` runs its
agent in its own process group through :mod:`.launch` (resource limits, no new privileges,
root dropped), with a minimal environment of its own: the runner's token and variables do
not leak into agent code. Whatever way a run ends that was not asked for, the agent is
started again after an exponential backoff, like a Pod with ``restartPolicy: Always``. A run
shorter than ``stable_seconds`` counts as a crash; ``crash_loop_threshold`` of them in a row
is reported as a crash loop until a run lasts.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from openagent._backoff import backoff_delays
from openagent.pool_runner.config import PoolRunnerConfig
from openagent.pool_runner.errors import InvalidAgentSpec, PoolFull, UnknownAgent

__all__ = ["AgentSpec", "AgentStatus", "ManagedAgent", "Supervisor"]

logger = logging.getLogger("openagent.pool_runner")

AgentStatus = Literal["running", "backoff", "crash_loop", "stopped"]

_MODULE_RE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MAX_SOURCE_BYTES = 1024 * 1024
_MAX_LINE = 4096
_STOP_GRACE_SECONDS = 5.0
_PASSED_THROUGH = ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR")
"""The runner's own variables an agent inherits; nothing else (in particular no token)."""


@dataclass(frozen=True)
class AgentSpec:
    """What to run: exactly one of ``module`` (importable here) and ``source`` (a script's text)."""

    agent_id: str
    module: str | None = None
    source: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    master_ws: str | None = None
    api_key: str | None = field(default=None, repr=False)
    """This agent's own key for the master (``OPENAGENT_API_KEY`` of its process), made for it
    by the master; without one, the agent gets no key."""

    def __post_init__(self) -> None:
        if not self.agent_id or len(self.agent_id) > 128 or not self.agent_id.isprintable():
            raise InvalidAgentSpec(f"agent_id must be 1-128 printable characters, got {self.agent_id!r}")
        if (self.module is None) == (self.source is None):
            raise InvalidAgentSpec(f"agent {self.agent_id!r}: give exactly one of 'module' and 'source'")
        if self.module is not None and not _MODULE_RE.fullmatch(self.module):
            raise InvalidAgentSpec(f"agent {self.agent_id!r}: {self.module!r} is not a dotted module name")
        if self.source is not None and len(self.source.encode()) > _MAX_SOURCE_BYTES:
            raise InvalidAgentSpec(
                f"agent {self.agent_id!r}: source is larger than {_MAX_SOURCE_BYTES} bytes"
            )
        for name in self.env:
            if not _ENV_NAME_RE.fullmatch(name):
                raise InvalidAgentSpec(
                    f"agent {self.agent_id!r}: {name!r} is not an environment variable name"
                )
        if self.master_ws is not None and not self.master_ws.startswith(("ws://", "wss://")):
            raise InvalidAgentSpec(
                f"agent {self.agent_id!r}: master_ws must be a ws:// URL, got {self.master_ws!r}"
            )

    @property
    def code(self) -> str:
        return f"module:{self.module}" if self.module else "source"


def _directory_name(agent_id: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", agent_id.lower()).strip("-")[:40] or "agent"
    return f"{slug}-{hashlib.sha256(agent_id.encode()).hexdigest()[:10]}"


class ManagedAgent:
    """One agent: its subprocess, restart loop, status and log tail.

    ``on_log``, when given, sees every line as it is kept: the agent's output and the
    supervisor's own ``[pool-runner] ...`` lines (started, exited with code N, stopped).
    """

    def __init__(
        self, spec: AgentSpec, config: PoolRunnerConfig, *, on_log: Callable[[str], None] | None = None
    ) -> None:
        self.spec = spec
        self._config = config
        self._on_log = on_log
        self.directory = config.workdir / _directory_name(spec.agent_id)
        self.logs: deque[str] = deque(maxlen=config.log_lines)
        self.status: AgentStatus = "running"
        self.restarts = 0
        self.consecutive_crashes = 0
        self.last_exit_code: int | None = None
        self.started_at: float | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def agent_id(self) -> str:
        return self.spec.agent_id

    @property
    def uid(self) -> int:
        """The user its processes run as (``-1``: the runner's)."""
        return self._config.agent_uid

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def crash_loop(self) -> bool:
        return self.consecutive_crashes >= self._config.crash_loop_threshold

    def describe(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "status": self.status,
            "healthy": self.status == "running" and not self.crash_loop,
            "crash_loop": self.crash_loop,
            "pid": self.pid,
            "restarts": self.restarts,
            "last_exit_code": self.last_exit_code,
            "started_at": self.started_at,
            "code": self.spec.code,
        }

    def tail(self, lines: int) -> list[str]:
        return list(self.logs)[-lines:] if lines > 0 else []

    # lifecycle ---------------------------------------------------------------------------

    def _prepare(self) -> list[str]:
        """Write the code and home directory; the command of one run."""
        config = self._config
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o755)
        home = self.directory / "home"
        home.mkdir(exist_ok=True, mode=0o700)
        if os.geteuid() == 0 and config.agent_uid >= 0:  # the agent runs as agent_uid: it needs its home
            os.chown(home, config.agent_uid, config.agent_gid)
            if config.agent_uid_dedicated:  # its folder is its own: no other agent can look in
                self.directory.chmod(0o700)
                os.chown(self.directory, config.agent_uid, config.agent_gid)
        command = [
            sys.executable,
            "-m",
            "openagent.pool_runner.launch",
            f"--memory-mb={config.agent_memory_mb}",
            f"--cpu-seconds={config.agent_cpu_seconds}",
            f"--nofile={config.agent_nofile}",
            f"--nproc={config.agent_nproc}",
            f"--nice={config.agent_nice}",
            f"--uid={config.agent_uid}",
            f"--gid={config.agent_gid}",
        ]
        if self.spec.module is not None:
            return [*command, f"--module={self.spec.module}"]
        assert self.spec.source is not None
        script = self.directory / "agent.py"
        script.write_text(self.spec.source, encoding="utf-8")
        script.chmod(0o644)
        return [*command, f"--path={script}"]

    def _environment(self) -> dict[str, str]:
        config = self._config
        home = str(self.directory / "home")
        env = {name: os.environ[name] for name in _PASSED_THROUGH if os.environ.get(name)}
        env.update(
            {
                "HOME": home,
                "TMPDIR": home,
                "PYTHONUNBUFFERED": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
                "MALLOC_ARENA_MAX": "2",  # keeps virtual memory (RLIMIT_AS) near what is used
                "MASTER_WS": self.spec.master_ws or config.master_ws,
                "OPENAGENT_AGENT_ID": self.agent_id,
            }
        )
        env.update(self.spec.env)
        if self.spec.api_key:
            env["OPENAGENT_API_KEY"] = self.spec.api_key
        return env

    def start(self) -> None:
        command = self._prepare()
        self._task = asyncio.create_task(self._supervise(command), name=f"pool-agent-{self.agent_id}")

    async def _supervise(self, command: list[str]) -> None:
        config = self._config
        loop = asyncio.get_running_loop()
        delays = backoff_delays(config.backoff_initial, config.backoff_max)
        env = self._environment()
        first = True
        while True:
            if not first:
                self.restarts += 1
            first = False
            self.status = "running"
            self.started_at = time.time()
            began = loop.time()
            try:
                self._process = await asyncio.create_subprocess_exec(
                    *command,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.STDOUT,
                    env=env,
                    cwd=self.directory,
                    start_new_session=True,  # its own process group: stop() ends its children too
                )
            except OSError as exc:
                self._log(f"[pool-runner] could not start: {exc}")
                code = -1
            else:
                self._log(f"[pool-runner] started pid {self._process.pid} ({self.spec.code})")
                assert self._process.stdout is not None
                await self._pump(self._process.stdout)
                code = await self._process.wait()
                self._process = None
                await self._sweep()  # what it left running (double forks) does not outlive the run
            self.last_exit_code = code
            if loop.time() - began >= config.stable_seconds:
                self.consecutive_crashes = 0
                delays = backoff_delays(config.backoff_initial, config.backoff_max)
            self.consecutive_crashes += 1
            delay = next(delays)
            self.status = "crash_loop" if self.crash_loop else "backoff"
            self._log(
                f"[pool-runner] exited with code {code}; restart in {delay:.1f} s"
                + (
                    f" (crash loop: {self.consecutive_crashes} short runs in a row)"
                    if self.crash_loop
                    else ""
                )
            )
            await asyncio.sleep(delay)

    async def _pump(self, stream: asyncio.StreamReader) -> None:
        pending = b""
        while chunk := await stream.read(65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self._log(line.decode(errors="replace"))
            if len(pending) > _MAX_LINE:
                self._log(pending.decode(errors="replace"))
                pending = b""
        if pending:
            self._log(pending.decode(errors="replace"))

    def _log(self, line: str) -> None:
        line = line.rstrip("\r")[:_MAX_LINE]
        self.logs.append(line)
        logger.info("[%s] %s", self.agent_id, line)
        if self._on_log is not None:
            self._on_log(line)

    async def stop(self) -> None:
        """End the agent (SIGTERM to its process group, SIGKILL after a grace period)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            for sig, wait in ((signal.SIGTERM, _STOP_GRACE_SECONDS), (signal.SIGKILL, _STOP_GRACE_SECONDS)):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, sig)
                try:
                    async with asyncio.timeout(wait):
                        await process.wait()
                    break
                except TimeoutError:
                    continue
            self.last_exit_code = process.returncode
        await self._sweep()
        self.status = "stopped"
        self._log("[pool-runner] stopped")

    async def _sweep(self) -> None:
        """End every process of the agent's dedicated user (nothing when it has none)."""
        uid = self._config.agent_uid
        if self._config.agent_uid_dedicated and uid > 0 and os.geteuid() == 0:
            left = await sweep_user(uid, self._config.agent_gid)
            if left:
                self._log(f"[pool-runner] {left} process(es) of uid {uid} would not end")


def processes_of(uid: int) -> list[int]:
    """The live (not zombie) processes whose real uid is ``uid`` (Linux ``/proc``)."""
    return [pid for pid, owner in _live_processes() if owner == uid]


def uids_in_use() -> set[int]:
    """The real uids of every live (not zombie) process, from one scan of ``/proc``."""
    return {owner for _pid, owner in _live_processes()}


def _live_processes() -> list[tuple[int, int]]:
    """(pid, real uid) of every live (not zombie) process (Linux ``/proc``)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", encoding="ascii", errors="replace") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
        except OSError:  # ended meanwhile
            continue
        if fields.get("State", "").strip().startswith(("Z", "X")):
            continue
        found.append((int(entry.name), int(fields.get("Uid", "-1").split()[0])))
    return found


_KILL_ALL = "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept ProcessLookupError:\n    pass\n"
"""Run as the agent's user: ``kill(-1)`` reaches every process that user may signal, which are
exactly its own, in one step the kernel takes atomically (a fork bomb cannot outrun it)."""


def _kill_all_as(uid: int, gid: int, within: float) -> None:
    subprocess.run(
        [sys.executable, "-I", "-S", "-c", _KILL_ALL],
        user=uid,
        group=gid,
        extra_groups=[],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={},
        timeout=within,
        check=False,
    )


async def sweep_user(uid: int, gid: int, within: float = _STOP_GRACE_SECONDS * 2) -> int:
    """SIGKILL every process of ``uid`` (as root); how many are left after ``within`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while pids := await asyncio.to_thread(processes_of, uid):
        if loop.time() > deadline:
            return len(pids)
        try:
            await asyncio.to_thread(_kill_all_as, uid, gid, max(deadline - loop.time(), 1.0))
        except (OSError, subprocess.SubprocessError):  # e.g. the user is at its process limit
            for pid in pids:  # one by one, as root
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.02)  # the killed processes leave /proc as their parents reap them
    return 0


class Supervisor:
    """The agents of one pool runner, by id."""

    def __init__(self, config: PoolRunnerConfig) -> None:
        self.config = config
        self._agents: dict[str, ManagedAgent] = {}
        self._lock = asyncio.Lock()

    def all(self) -> list[ManagedAgent]:
        return list(self._agents.values())

    def get(self, agent_id: str) -> ManagedAgent:
        try:
            return self._agents[agent_id]
        except KeyError:
            raise UnknownAgent(f"agent {agent_id!r} is not running in this pool runner") from None

    async def start(self, spec: AgentSpec) -> tuple[ManagedAgent, bool]:
        """Start ``spec``, replacing an agent of the same id; returns it and whether it replaced one."""
        async with self._lock:
            old = self._agents.pop(spec.agent_id, None)
            if old is None and len(self._agents) >= self.config.max_agents:
                raise PoolFull(
                    f"this pool runner already runs {len(self._agents)} agents (POOL_RUNNER_MAX_AGENTS)"
                )
            if old is not None:
                await old.stop()
            agent = ManagedAgent(spec, self.config)
            agent.start()
            self._agents[spec.agent_id] = agent
            return agent, old is not None

    async def stop(self, agent_id: str) -> ManagedAgent:
        async with self._lock:
            agent = self.get(agent_id)
            del self._agents[agent_id]
            await agent.stop()
            shutil.rmtree(agent.directory, ignore_errors=True)
            return agent

    async def aclose(self) -> None:
        async with self._lock:
            agents, self._agents = list(self._agents.values()), {}
        await asyncio.gather(*(agent.stop() for agent in agents))
