"""Running a workspace's agents in supervised child processes, so their code cannot take the host down.

:class:`ProcessAgentRunner` has the interface of :class:`~.runner.YamlAgentRunner`, but runs
each agent in a process of its own (:mod:`.child`), started by the pool runner's supervisor
(:class:`~openagent.pool_runner.supervisor.ManagedAgent`): resource limits (address space, CPU
time, open files, processes, no core dumps), no new privileges, a user of its own when this
process is root (:mod:`.isolation`; otherwise no agent code runs unless the operator accepts
the risk), and an environment with nothing of the host's but ``PATH``, the locale and the
master's address (and the agent's own key for the master, when it has one): no
``OPENAI_API_KEY``, no other secret. The agent connects over
loopback like any WebSocket agent. Whatever its code does (``sys.exit()``, ``KeyboardInterrupt``,
``os._exit()``, an import that never ends, unbounded allocation), only the child ends; a child
that ends after it started is started again with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from openagent.agent_modules import ModuleRef, module_file, parse_handler
from openagent.config import ClientConfig
from openagent.errors import AgentModuleError
from openagent.pool_runner.config import PoolRunnerConfig
from openagent.pool_runner.supervisor import AgentSpec as ProcessSpec
from openagent.pool_runner.supervisor import ManagedAgent
from openagent.workspace.child import AGENT_VARIABLE, FAILED, ROOT_VARIABLE, STARTED
from openagent.workspace.isolation import AgentUsers, Isolation
from openagent.workspace.runner import AgentOutcome, not_to_start, start_each
from openagent.workspace.schema import AgentSpec, Workspace

__all__ = ["AgentCredential", "IssueCredential", "ProcessAgentRunner"]

logger = logging.getLogger("openagent.workspace")

_EXITED = "[pool-runner] exited with code"
_TAIL = 5
"""Output lines quoted when a child ends before its agent connected."""


@dataclass(frozen=True)
class AgentCredential:
    """A key made for one agent alone: its process gets it as ``OPENAGENT_API_KEY``, and
    :attr:`revoke` is awaited when the agent stops (the master makes keys of role ``agent``,
    scoped to the agent's id and its starter's tenant)."""

    secret: str = field(repr=False)
    revoke: Callable[[], Awaitable[None]]


IssueCredential = Callable[[str], Awaitable[AgentCredential]]
"""Makes the credential of the agent id it is given; raises when it cannot."""


@dataclass
class _Child:
    process: ManagedAgent
    handler: str
    credential: AgentCredential


class ProcessAgentRunner:
    """Runs a workspace's WebSocket agents, each in a supervised child process.

    Args:
        config: How the agents reach the master: its ``master_ws`` is handed to the children
            (nothing else of this process's environment is; its ``api_key`` never: each agent
            gets the key made for it alone).
        root: The directory holding ``agents/``, ``system_agents/`` and ``sample_agents/``.
        is_connected: Tells whether an agent id is already connected to the master by
            someone else; such agents are skipped rather than replaced.
        start_timeout: Seconds a child has to import its module and register.
        isolation: Who the children run as and their limits (:class:`~.isolation.Isolation`).
        workdir: Where the children's home directories go (a temporary directory by default).

    Outcomes are those of :class:`~.runner.YamlAgentRunner`: ``started`` once the agent is
    registered, ``failed`` naming why (the reason the child printed, or its exit code and
    last output lines, or the start timeout), ``already_running``, ``skipped``.
    """

    def __init__(
        self,
        config: ClientConfig,
        *,
        root: Path,
        is_connected: Callable[[str], bool] | None = None,
        start_timeout: float = 30.0,
        isolation: Isolation | None = None,
        workdir: Path | None = None,
    ) -> None:
        self.config = config
        self.root = root
        self.start_timeout = start_timeout
        self._is_connected = is_connected or (lambda _agent_id: False)
        self._workdir = workdir or Path(tempfile.gettempdir()) / f"openagent-workspace-{os.getpid()}"
        self.users = AgentUsers(isolation or Isolation())
        self._children: dict[str, _Child] = {}
        self._lock = asyncio.Lock()

    def running(self) -> dict[str, str]:
        """Agent id → handler of every agent this runner runs."""
        return {agent_id: child.handler for agent_id, child in sorted(self._children.items())}

    def child(self, agent_id: str) -> ManagedAgent | None:
        """The supervised process of a running agent (status, restarts, log tail)."""
        found = self._children.get(agent_id)
        return found.process if found is not None else None

    async def start(self, workspace: Workspace, credentials: IssueCredential) -> list[AgentOutcome]:
        """Start every WebSocket action agent of the workspace that has a handler.

        Each agent gets a key of its own from ``credentials``, made before its process starts
        and revoked when it stops; an agent whose key cannot be made is not started (never a
        fallback to another key).
        """
        async with self._lock:
            return await start_each(workspace, lambda spec: self._start_one(spec, credentials))

    async def _start_one(self, spec: AgentSpec, credentials: IssueCredential) -> AgentOutcome:
        agent_id = spec.agent_id
        known = self._children.get(agent_id)
        refused = not_to_start(spec, known.handler if known else None, self._is_connected)
        if refused is not None:
            return refused
        assert spec.handler is not None  # not_to_start skips an agent without one
        if self.users.refusal is not None:
            return AgentOutcome(
                agent_id,
                "failed",
                f"agent code is not started here: {self.users.refusal} (run the master as root, or set "
                "OPENAGENT_ALLOW_UNISOLATED_AGENTS=1 to accept that agent code can read its secrets)",
                spec.handler,
            )
        try:
            ref = parse_handler(spec.handler)
            source = module_file(self.root, ref)  # refused or missing: no process at all
        except AgentModuleError as exc:
            return AgentOutcome(agent_id, "failed", str(exc), spec.handler)
        try:
            credential = await credentials(agent_id)
        except Exception as exc:  # any failure to make a key: no process without one
            logger.warning("YAML agent %s not started: no key for it (%s)", agent_id, exc)
            return AgentOutcome(agent_id, "failed", f"could not make its key: {exc}", spec.handler)
        try:  # from here on, whatever stops the start revokes the key
            process, reason = await self._spawn(spec, ref, source, credential.secret)
        except OSError as exc:  # no uid free, the module not copied: this agent fails, not the start
            shutil.rmtree(self._code_root(agent_id), ignore_errors=True)
            await _revoke(agent_id, credential)
            logger.warning("YAML agent %s not started: %s", agent_id, exc)
            return AgentOutcome(agent_id, "failed", f"its process could not be prepared: {exc}", spec.handler)
        except BaseException:
            shutil.rmtree(self._code_root(agent_id), ignore_errors=True)
            await _revoke(agent_id, credential)
            raise
        if reason is not None:
            await self._end(agent_id, _Child(process, spec.handler, credential))
            logger.warning("YAML agent %s not started: %s", agent_id, reason)
            return AgentOutcome(agent_id, "failed", reason, spec.handler)
        self._children[agent_id] = _Child(process, spec.handler, credential)
        logger.info("YAML agent %s started from %s in pid %s", agent_id, spec.handler, process.pid)
        return AgentOutcome(agent_id, "started", handler=spec.handler)

    async def _spawn(
        self, spec: AgentSpec, ref: ModuleRef, source: Path, key: str
    ) -> tuple[ManagedAgent, str | None]:
        """Start the child; wait until it registered (reason ``None``) or why it did not.

        The child gets a copy of its module in its own directory, readable by the user it
        runs as, and never sees the rest of the agents' tree.
        """
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[str | None] = loop.create_future()
        output: list[str] = []

        def watch(line: str) -> None:
            if outcome.done():
                return
            if line == STARTED:
                outcome.set_result(None)
            elif line.startswith(FAILED):
                outcome.set_result(line.removeprefix(FAILED))
            elif line.startswith(_EXITED):
                code = line.removeprefix(_EXITED).split(";")[0].strip()
                tail = " | ".join(output[-_TAIL:])
                outcome.set_result(
                    f"its process exited with code {code} before connecting: {tail or 'no output'}"
                )
            elif not line.startswith("[pool-runner]"):
                output.append(line)

        busy = {child.process.uid for child in self._children.values()}
        uid = await self.users.next_uid(busy)  # -1: this process's user (accepted by the operator)
        code = self._code_root(spec.agent_id)
        _copy_module(source, code, ref, uid, self.users.gid)
        limits = self.users.isolation.limits
        config = PoolRunnerConfig(
            workdir=self._workdir,
            agent_memory_mb=limits.memory_mb,
            agent_cpu_seconds=limits.cpu_seconds,
            agent_nofile=limits.open_files,
            agent_nproc=limits.processes,
            agent_nice=limits.nice,
            master_ws=self.config.master_ws,
            agent_uid=uid,
            agent_gid=self.users.gid,
            agent_uid_dedicated=self.users.isolated,
        )
        process = ManagedAgent(
            ProcessSpec(
                agent_id=spec.agent_id,
                module="openagent.workspace.child",
                env={AGENT_VARIABLE: spec.model_dump_json(), ROOT_VARIABLE: str(code)},
                api_key=key,
            ),
            config,
            on_log=watch,
        )
        process.start()
        try:
            async with asyncio.timeout(self.start_timeout):
                return process, await outcome
        except TimeoutError:
            return process, f"did not connect within {self.start_timeout:g} s (an import that never ends?)"

    def _code_root(self, agent_id: str) -> Path:
        return self._workdir / "code" / hashlib.sha256(agent_id.encode()).hexdigest()[:16]

    async def _end(self, agent_id: str, child: _Child) -> None:
        """Stop the agent's processes, remove its folders, revoke its key (a failure is logged)."""
        await child.process.stop()
        shutil.rmtree(child.process.directory, ignore_errors=True)
        shutil.rmtree(self._code_root(agent_id), ignore_errors=True)
        await _revoke(agent_id, child.credential)

    async def stop(self, agent_ids: Iterable[str] | None = None) -> list[AgentOutcome]:
        """Stop the given agents (every running one when ``None``): their processes end."""
        async with self._lock:
            wanted = sorted(self._children) if agent_ids is None else sorted(set(agent_ids))
            outcomes = []
            for agent_id in wanted:
                child = self._children.pop(agent_id, None)
                if child is None:
                    outcomes.append(AgentOutcome(agent_id, "not_running"))
                    continue
                await self._end(agent_id, child)
                outcomes.append(AgentOutcome(agent_id, "stopped", handler=child.handler))
        return outcomes

    async def aclose(self) -> None:
        """Stop everything (the master's shutdown)."""
        await self.stop()
        for folder in (self._workdir / "code", self._workdir):
            with contextlib.suppress(OSError):
                folder.rmdir()


async def _revoke(agent_id: str, credential: AgentCredential) -> None:
    """Revoke an agent's key; a failure is logged (the agent's processes have ended already)."""
    try:
        await credential.revoke()
    except Exception as exc:
        logger.warning("the key of YAML agent %s could not be revoked: %s", agent_id, exc)


def _copy_module(source: Path, root: Path, ref: ModuleRef, uid: int, gid: int) -> None:
    """``source`` as ``root/<folder>/.../<module>.py``; ``root`` and what it holds are the agent's
    own (``uid``, mode 0700) when it has a user of its own (``uid`` ≥ 0), so no other agent reads it."""
    target = root.joinpath(ref.folder, *ref.parts[:-1], f"{ref.parts[-1]}.py")
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    root.parent.chmod(0o755)  # the folder of every agent's code: only traversed
    shutil.copyfile(source, target)
    for folder in [target.parent, *target.parent.parents]:
        if folder == root.parent:
            break
        folder.chmod(0o700)
        if uid >= 0:
            os.chown(folder, uid, gid)
    target.chmod(0o600)
    if uid >= 0:
        os.chown(target, uid, gid)
