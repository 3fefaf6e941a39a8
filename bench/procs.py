"""Child processes of the benchmark: start, wait until ready, sample CPU and memory, stop.

Every process the benchmark starts (master, baselines, agents, load clients) is a
``python -m bench.<module>`` child with a clean environment (no developer ``.env``, no
API keys) and an empty working directory. A child that talks back to the runner prints
one JSON object per line on stdout (``{"event": "ready"}``...); everything else it says
goes to ``<results dir>/logs/<name>.log``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import psutil

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "bench" / "results"
"""Where results go unless ``--results-dir`` says otherwise."""
_results_dir = RESULTS_DIR

_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TERM", "SYSTEMROOT")
"""The only variables children inherit: no OPENAI_*, OPENAGENT_* or REDIS_URL leaks in."""


class ChildFailed(RuntimeError):
    """A child exited, or did not get ready in time."""


_taken: set[int] = set()


def free_port() -> int:
    """A free loopback port: any (the OS picks), or within ``OPENAGENT_BENCH_PORTS=<low>-<high>``
    when set (a machine shared with other work), never the same one twice in a run."""
    span = os.environ.get("OPENAGENT_BENCH_PORTS", "")
    candidates = [0]
    if span:
        low, _, high = span.partition("-")
        candidates = [port for port in range(int(low), int(high) + 1) if port not in _taken]
    for candidate in candidates:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            port = int(sock.getsockname()[1])
            _taken.add(port)
            return port
    raise RuntimeError(f"no free port in OPENAGENT_BENCH_PORTS={span}")


def set_results_dir(path: Path) -> None:
    global _results_dir
    _results_dir = path


def results_dir() -> Path:
    """This run's results directory: JSON here, children's logs in ``logs/``, profiles in ``profiles/``."""
    return _results_dir


def process_cpu_clock(pid: int) -> int:
    """The clock id of process ``pid``'s CPU time on Linux (``CPUCLOCK_SCHED`` of the whole
    process, as glibc's ``clock_getcpuclockid`` makes it)."""
    return (~pid << 3) | 2


def child_env() -> dict[str, str]:
    env = {key: os.environ[key] for key in _ENV_KEEP if key in os.environ}
    env["PYTHONPATH"] = str(ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Child:
    """``python -m <module> <args...>`` with its stdout read as events and its stderr logged."""

    def __init__(self, name: str, module: str, *args: str) -> None:
        self.name = name
        self.argv = [sys.executable, "-m", module, *args]
        self.log_path = _results_dir / "logs" / f"{name}.log"
        self.proc: asyncio.subprocess.Process | None = None
        self._ps: psutil.Process | None = None
        self._cpu_seen = 0.0

    @property
    def pid(self) -> int:
        assert self.proc is not None, f"{self.name} is not started"
        return self.proc.pid

    async def start(self) -> Child:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                cwd=tempfile.mkdtemp(prefix="openagent-bench-"),
                env=child_env(),
                limit=1 << 20,
            )
        self._ps = psutil.Process(self.proc.pid)
        return self

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def _failed(self, what: str) -> ChildFailed:
        return ChildFailed(f"{self.name}: {what}; log {self.log_path}:\n{self.log_tail()}")

    async def event(self, within: float) -> dict[str, Any]:
        """The next event line (skips anything that is not JSON)."""
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + within
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._failed(f"no event within {within:g} s")
            try:
                line = await asyncio.wait_for(self.proc.stdout.readline(), left)
            except TimeoutError:
                raise self._failed(f"no event within {within:g} s") from None
            if not line:
                await self.proc.wait()
                raise self._failed(f"exited with {self.proc.returncode}")
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and "event" in data:
                return data

    async def expect(self, name: str, within: float) -> dict[str, Any]:
        event = await self.event(within)
        if event["event"] != name:
            raise self._failed(f"expected event {name!r}, got {event}")
        return event

    async def send(self, line: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()

    async def wait_http(self, url: str, within: float = 30.0) -> None:
        """Poll ``url`` until it answers 200."""
        assert self.proc is not None
        deadline = time.monotonic() + within
        async with aiohttp.ClientSession() as http:
            while time.monotonic() < deadline:
                if self.proc.returncode is not None:
                    raise self._failed(f"exited with {self.proc.returncode}")
                with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                    async with http.get(url, timeout=aiohttp.ClientTimeout(total=1)) as response:
                        if response.status == 200:
                            return
                await asyncio.sleep(0.05)
        raise self._failed(f"{url} did not answer within {within:g} s")

    def cpu_seconds(self) -> float:
        """User + system CPU time of the process so far (all its threads, those that ended too).

        Read from the process's CPU-time clock (``clock_gettime`` of its process CPU clock id, in
        nanoseconds), not from ``/proc/PID/stat`` (psutil), which counts in ticks of 10 ms: a
        window of 60 one-tool queries takes some 100 ms of the master's CPU, so ticks alone moved
        its CPU per query by 10%. psutil where that clock is not there (not Linux)."""
        assert self._ps is not None
        try:
            self._cpu_seen = time.clock_gettime(process_cpu_clock(self._ps.pid))
            return self._cpu_seen
        except OSError:
            pass
        try:
            times = self._ps.cpu_times()
        except psutil.NoSuchProcess:
            # It exited and was reaped (a load client ends right after its last window, and a
            # busy machine may sample it later): its CPU time stopped at the last reading.
            return self._cpu_seen
        self._cpu_seen = float(times.user + times.system)
        return self._cpu_seen

    def rss_bytes(self) -> int:
        """Resident set size (VmRSS)."""
        assert self._ps is not None
        return int(self._ps.memory_info().rss)

    async def wait(self, within: float) -> int:
        assert self.proc is not None
        try:
            return await asyncio.wait_for(self.proc.wait(), within)
        except TimeoutError:
            raise self._failed(f"did not exit within {within:g} s") from None

    async def stop(self, within: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``within`` seconds. Safe to call twice."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), within)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.wait_for(proc.wait(), 5)


class Group:
    """Children started together and stopped together (an async context manager)."""

    def __init__(self) -> None:
        self.children: list[Child] = []

    async def start(self, child: Child) -> Child:
        self.children.append(child)
        return await child.start()

    async def __aenter__(self) -> Group:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.gather(*(child.stop() for child in self.children))
