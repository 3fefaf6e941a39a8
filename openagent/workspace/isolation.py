"""Who agent processes run as, and within which limits: :class:`AgentUsers`.

Agent code is not trusted with the master's rights. When the master runs as root, every agent
process runs under a user of its own: a numeric uid from ``uid_base`` up (never root, never the
master's user), in the group of the system user ``user`` (``openagent-agent``, made with
``useradd --system`` when missing). Being alone under its uid, an agent

- cannot read the master's ``/proc/<pid>/environ`` nor files only the master's user may read;
- keeps its working folder (mode 0700, its own) from every other agent;
- is bounded as a whole by ``RLIMIT_NPROC`` (which counts a user's processes);
- ends entirely at stop: every process of its uid is killed, double-forked and ``setsid`` ones
  included (:func:`openagent.pool_runner.supervisor.sweep_user`).

A master that is not root cannot switch users: it refuses to start agent code, unless the
operator accepts the risk (``allow_unisolated``); then agents run as the master's own user and
could read its secrets. Either way the decision is logged once, at start.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass, field

from openagent.pool_runner.supervisor import uids_in_use

__all__ = ["AgentLimits", "AgentUsers", "Isolation"]

logger = logging.getLogger("openagent.workspace")


@dataclass(frozen=True)
class AgentLimits:
    """Resource limits of each agent (0: none)."""

    memory_mb: int = 1024
    """Address space of each process."""
    cpu_seconds: int = 3600
    """CPU time of each process; past it the process ends and is started again."""
    open_files: int = 256
    processes: int = 128
    """Processes and threads of the agent (``RLIMIT_NPROC`` of its own uid)."""
    nice: int = 10
    """How much lower than the master's the agents' scheduling priority is."""


@dataclass(frozen=True)
class Isolation:
    """How agent processes are isolated (module docstring)."""

    user: str = "openagent-agent"
    uid_base: int = 200_000
    uid_count: int = 10_000
    allow_unisolated: bool = False
    limits: AgentLimits = field(default_factory=AgentLimits)


class AgentUsers:
    """The identities agent processes get; decided once, when built (module docstring).

    :attr:`refusal` is why agent code may not start here (``None``: it may); :attr:`isolated`
    whether each agent has a uid of its own.
    """

    def __init__(self, isolation: Isolation) -> None:
        self.isolation = isolation
        self.gid = -1
        self.isolated = False
        self.refusal: str | None = None
        self._next = 0
        if os.geteuid() == 0:
            try:
                self.gid = _system_group(isolation.user)
                self.refusal = _user_in_range(isolation.uid_base, isolation.uid_count)
                self.isolated = self.refusal is None
            except OSError as exc:
                self.refusal = f"the agents' user {isolation.user!r} cannot be made: {exc}"
        else:
            self.refusal = (
                f"this master runs as uid {os.geteuid()}, not root, so it cannot run agent code as a "
                "user of its own"
            )
        if self.isolated:
            logger.info(
                "agent code runs as uids %d-%d (group of %r), one per agent",
                isolation.uid_base,
                isolation.uid_base + isolation.uid_count - 1,
                isolation.user,
            )
        elif isolation.allow_unisolated:
            logger.warning(
                "agent code runs as this master's own user and could read its secrets (%s; "
                "OPENAGENT_ALLOW_UNISOLATED_AGENTS=1 accepts that risk)",
                self.refusal,
            )
            self.refusal = None
        else:
            logger.warning(
                "agent code will not be started: %s (run the master as root, or set "
                "OPENAGENT_ALLOW_UNISOLATED_AGENTS=1 to accept the risk)",
                self.refusal,
            )

    async def next_uid(self, busy: set[int]) -> int:
        """A uid of the range that runs no process and is not in ``busy`` (``-1``: keep ours).

        ``/proc`` is scanned once, in a thread (the event loop goes on meanwhile)."""
        if not self.isolated:
            return -1
        in_use = busy | await asyncio.to_thread(uids_in_use)
        count = self.isolation.uid_count
        for _ in range(count):
            uid = self.isolation.uid_base + self._next
            self._next = (self._next + 1) % count
            if uid not in in_use:
                return uid
        raise OSError(f"every uid of {self.isolation.uid_base}+{count} is in use")


def _user_in_range(base: int, count: int) -> str | None:
    """Why the agents' uid range cannot be used: it holds an existing user's uid, whose files and
    processes an agent would own (``None``: no user has one)."""
    taken = sorted(
        (entry.pw_uid, entry.pw_name) for entry in pwd.getpwall() if base <= entry.pw_uid < base + count
    )
    if not taken:
        return None
    uid, name = taken[0]
    return (
        f"the agents' uid range {base}-{base + count - 1} holds the existing user {name!r} (uid {uid}); "
        "set OPENAGENT_AGENT_UID_BASE and OPENAGENT_AGENT_UID_COUNT to a range no user has"
    )


def _system_group(user: str) -> int:
    """The group id of system user ``user``, made with ``useradd`` if missing."""
    try:
        return pwd.getpwnam(user).pw_gid
    except KeyError:
        pass
    useradd = shutil.which("useradd")
    if useradd is None:
        raise OSError(f"no user {user!r} and no useradd to make it")
    nologin = shutil.which("nologin") or "/bin/false"
    done = subprocess.run(
        [
            useradd,
            "--system",
            "--user-group",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            nologin,
            user,
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if done.returncode != 0 and done.returncode != 9:  # 9: made meanwhile by another master
        raise OSError(f"useradd {user} failed: {done.stderr.strip() or done.returncode}")
    logger.info("made the system user %r for agent code", user)
    return pwd.getpwnam(user).pw_gid
