"""The first code of every agent subprocess: confine the process, then run the agent.

The pool runner starts ``python -m openagent.pool_runner.launch [limits] (--module M | --path P)``.
Before any agent code is imported, this module

- sets resource limits on itself (address space, CPU time, open files, no core dumps);
- sets ``PR_SET_NO_NEW_PRIVS`` (Linux), so nothing the agent executes can gain privileges
  (set-uid binaries, file capabilities);
- when started as root, drops to an unprivileged uid/gid with no supplementary groups
  (unless ``--uid=-1``);

then runs the agent module (``runpy``, as ``__main__``). Doing this in the child itself,
rather than in a ``preexec_fn``, keeps the runner's event loop free of fork-time hooks.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import runpy
import sys

__all__ = ["confine", "main"]

_PR_SET_NO_NEW_PRIVS = 38


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


def confine(*, memory_mb: int, cpu_seconds: int, nofile: int, uid: int, gid: int) -> None:
    """Limit this process and drop root (``uid=-1`` keeps it); 0 leaves a limit as it is."""
    if memory_mb:
        _set_limit(resource.RLIMIT_AS, memory_mb * 1024 * 1024)
    if cpu_seconds:
        _set_limit(resource.RLIMIT_CPU, cpu_seconds)
    if nofile:
        _set_limit(resource.RLIMIT_NOFILE, nofile)
    _set_limit(resource.RLIMIT_CORE, 0)
    _no_new_privs()
    if os.geteuid() == 0 and uid >= 0:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m openagent.pool_runner.launch")
    parser.add_argument("--memory-mb", type=int, default=0)
    parser.add_argument("--cpu-seconds", type=int, default=0)
    parser.add_argument("--nofile", type=int, default=0)
    parser.add_argument("--uid", type=int, default=65534)
    parser.add_argument("--gid", type=int, default=65534)
    code = parser.add_mutually_exclusive_group(required=True)
    code.add_argument("--module")
    code.add_argument("--path")
    args = parser.parse_args(argv)
    confine(
        memory_mb=args.memory_mb, cpu_seconds=args.cpu_seconds, nofile=args.nofile, uid=args.uid, gid=args.gid
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
