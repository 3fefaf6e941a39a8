"""The first code of every agent subprocess: confine the process, then run the agent.

The pool runner starts ``python -m openagent.pool_runner.launch [limits] (--module M | --path P)``.
Before any agent code is imported, this module

- sets resource limits on itself (address space, CPU time, open files, processes of its user,
  no core dumps) and lowers its scheduling priority, so a busy agent leaves the CPU to the master;
- sets ``PR_SET_NO_NEW_PRIVS`` (Linux), so nothing the agent executes can gain privileges
  (set-uid binaries, file capabilities), and makes itself non-dumpable (:func:`not_dumpable`),
  so another agent of the same user cannot read its environment (its key) or memory;
- when started as root, drops to an unprivileged uid/gid with no supplementary groups
  (unless ``--uid=-1``); if Python or this package lies below a folder other users cannot
  enter (pyenv's ``/root/.pyenv``), it first takes a mount namespace of its own in which
  that folder is an empty ``tmpfs`` holding only the way to them (:func:`reach`): the agent
  can run Python, and sees nothing else of that folder;

then runs the agent module (``runpy``, as ``__main__``). Doing this in the child itself,
rather than in a ``preexec_fn``, keeps the runner's event loop free of fork-time hooks.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import runpy
import stat
import sys
import tempfile
from pathlib import Path

__all__ = ["confine", "main", "not_dumpable", "reach"]

_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38
_CLONE_NEWNS = 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_MOVE, _MS_REC, _MS_PRIVATE = 2, 4, 4096, 8192, 16384, 1 << 18


def _set_limit(which: int, value: int) -> None:
    soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def _no_new_privs() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):  # not Linux
        return False


def not_dumpable() -> bool:
    """``PR_SET_DUMPABLE`` 0 (Linux): this process's ``/proc/<pid>/environ``, ``mem`` and the
    like belong to root, and it cannot be traced, so processes of the same user (agent code in a
    runner that cannot switch users, as in a non-root Pod) cannot read its secrets. Whether it
    took effect."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):  # not Linux
        return False


def _blocked(path: Path) -> Path | None:
    """The highest folder on the way to ``path`` that other users cannot enter, if any."""
    for part in reversed([path, *path.parents]):
        try:
            mode = part.stat().st_mode
        except OSError:
            return None
        if not mode & stat.S_IXOTH:
            return part
    return None


def _mount(
    libc: ctypes.CDLL, source: str | None, target: str, kind: str | None, flags: int, data: str
) -> None:
    if libc.mount(
        source.encode() if source else None,
        target.encode(),
        kind.encode() if kind else None,
        flags,
        data.encode() if data else None,
    ):
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def reach(paths: list[Path]) -> None:
    """As root, make ``paths`` reachable by any user in a mount namespace of this process's own.

    Each folder on their way that others cannot enter is replaced, in this namespace only, by
    an empty ``tmpfs`` (mode 0755) into which the one sub-folder leading to the path is
    bind-mounted back. Nothing outside this process changes. Raises :class:`OSError` when the
    namespace cannot be made (no ``CAP_SYS_ADMIN``, not Linux)."""
    todo = [path for path in paths if _blocked(path) is not None]
    if not todo:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNS):
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNS): {os.strerror(err)}")
    _mount(libc, None, "/", None, _MS_REC | _MS_PRIVATE, "")
    for path in todo:
        while (blocked := _blocked(path)) is not None and blocked != path:
            child = blocked / path.relative_to(blocked).parts[0]
            staging = tempfile.mkdtemp(prefix="openagent-reach-")
            _mount(libc, str(child), staging, None, _MS_BIND | _MS_REC, "")
            _mount(libc, "tmpfs", str(blocked), "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=64k")
            child.mkdir(mode=0o755)
            _mount(libc, staging, str(child), None, _MS_MOVE, "")
            os.rmdir(staging)
        if blocked == path:
            raise OSError(f"{path} itself cannot be read by other users")


def confine(
    *, memory_mb: int, cpu_seconds: int, nofile: int, uid: int, gid: int, nproc: int = 0, nice: int = 0
) -> None:
    """Limit this process and drop root (``uid=-1`` keeps it); 0 leaves a limit as it is.

    ``nproc`` bounds the processes (and threads) of the user it runs as: per agent when each
    agent has a user of its own, as the master's runner arranges."""
    if nice:
        os.nice(nice)
    if nproc:
        _set_limit(resource.RLIMIT_NPROC, nproc)
    if memory_mb:
        _set_limit(resource.RLIMIT_AS, memory_mb * 1024 * 1024)
    if cpu_seconds:
        _set_limit(resource.RLIMIT_CPU, cpu_seconds)
    if nofile:
        _set_limit(resource.RLIMIT_NOFILE, nofile)
    _set_limit(resource.RLIMIT_CORE, 0)
    _no_new_privs()
    if os.geteuid() == 0 and uid >= 0:
        reach([Path(sys.base_prefix), Path(sys.prefix), Path(__file__).resolve().parents[2]])
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    not_dumpable()  # after setuid, which may reset it


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m openagent.pool_runner.launch")
    parser.add_argument("--memory-mb", type=int, default=0)
    parser.add_argument("--cpu-seconds", type=int, default=0)
    parser.add_argument("--nofile", type=int, default=0)
    parser.add_argument("--nproc", type=int, default=0)
    parser.add_argument("--nice", type=int, default=0)
    parser.add_argument("--uid", type=int, default=65534)
    parser.add_argument("--gid", type=int, default=65534)
    code = parser.add_mutually_exclusive_group(required=True)
    code.add_argument("--module")
    code.add_argument("--path")
    args = parser.parse_args(argv)
    confine(
        memory_mb=args.memory_mb,
        cpu_seconds=args.cpu_seconds,
        nofile=args.nofile,
        uid=args.uid,
        gid=args.gid,
        nproc=args.nproc,
        nice=args.nice,
    )
    if args.module:
        sys.argv = [args.module]
        runpy.run_module(args.module, run_name="__main__", alter_sys=True)
    else:
        sys.argv = [args.path]
        sys.path.insert(0, os.path.dirname(os.path.abspath(args.path)))
        runpy.run_path(args.path, run_name="__main__")


if __name__ == "__main__":
    main()
