"""The child process of the import smoke test (run by :mod:`master.builder.smoke`, never imported).

Usage: ``python -I -B _smoke_child.py SDK_ROOT MODULE_FILE MODULE_NAME``

It lowers its resource limits, imports the SDK, installs an audit hook that refuses
network access, new processes, native libraries and file writes, then imports the module
and builds its agent (without connecting it). The last stdout line starting with
``@@smoke@@`` is a JSON report: ``{"ok": true, "agent_id", "transport", "tools"}`` or
``{"ok": false, "error"}``. Only the standard library and the SDK are used here.
"""

import importlib.util
import inspect
import json
import resource
import sys
from typing import Any

MARKER = "@@smoke@@"
MEMORY_BYTES = 1536 * 1024 * 1024
CPU_SECONDS = 10
OUTPUT_BYTES = 1024 * 1024
OPEN_FILES = 128

_BLOCKED = (
    "socket.connect",
    "socket.bind",
    "socket.sendto",
    "socket.sendmsg",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "socket.gethostbyaddr",
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "pty.spawn",
    "ctypes.dlopen",
    "ctypes.dlsym",
)
_WRITE_FLAGS = 0o1 | 0o2 | 0o100 | 0o1000  # O_WRONLY | O_RDWR | O_CREAT | O_TRUNC


def _report(data: dict[str, Any]) -> None:
    sys.stdout.write(MARKER + json.dumps(data) + "\n")
    sys.stdout.flush()


def _limit() -> None:
    for which, value in (
        (resource.RLIMIT_AS, MEMORY_BYTES),
        (resource.RLIMIT_CPU, CPU_SECONDS),
        (resource.RLIMIT_FSIZE, OUTPUT_BYTES),
        (resource.RLIMIT_NOFILE, OPEN_FILES),
    ):
        soft, hard = resource.getrlimit(which)
        cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (cap, cap))


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event.startswith(_BLOCKED):
        raise PermissionError(f"smoke test: {event} is not allowed while importing an agent module")
    if event == "open" and len(args) >= 3:
        mode, flags = args[1], args[2]
        if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITE_FLAGS
        ):
            raise PermissionError(f"smoke test: writing {args[0]!r} is not allowed")


def _agent(module: Any, classes: tuple[type, ...], action_agent: type) -> Any:
    for name in ("build_agent", "make_agent", "create_agent"):
        factory = getattr(module, name, None)
        if callable(factory):
            parameters = inspect.signature(factory).parameters.values()
            required = [
                p
                for p in parameters
                if p.default is p.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            ]
            if required:
                raise TypeError(
                    f"{name}() must be callable without arguments (requires {required[0].name!r})"
                )
            return factory()
    instances = [value for value in vars(module).values() if isinstance(value, classes)]
    if instances:
        return instances[0]
    handler, tools, agent_id = (getattr(module, n, None) for n in ("handle_tool", "TOOLS", "AGENT_ID"))
    if callable(handler) and tools and isinstance(agent_id, str):
        collaboration = getattr(module, "handle_collaboration", None)
        return action_agent(agent_id, tools, handler, collaboration_handler=collaboration)
    raise LookupError("the module defines no build_agent() and no agent instance")


def main(sdk_root: str, path: str, name: str) -> None:
    _limit()
    sys.path.insert(0, sdk_root)
    from openagent.action import OrchestratorActionAgent, OrchestratorWebSocketActionAgent
    from openagent.invocation import InvocationActionAgent

    sys.addaudithook(_hook)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        agent = _agent(
            module, (OrchestratorWebSocketActionAgent, InvocationActionAgent), OrchestratorActionAgent
        )
        if isinstance(agent, InvocationActionAgent):
            transport = "invocation"
        elif isinstance(agent, OrchestratorWebSocketActionAgent):
            transport = "websocket"
        else:
            raise TypeError(f"the module built a {type(agent).__name__}, not an OpenAgent action agent")
        tools = [tool.model_dump(exclude_none=True) for tool in agent.tools]
        metadata = dict(agent.metadata if transport == "invocation" else agent._register.metadata)
    except BaseException as exc:  # report everything, SystemExit included
        _report({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        return
    _report(
        {
            "ok": True,
            "agent_id": agent.agent_id,
            "transport": transport,
            "tools": tools,
            "supports_collaboration": bool(metadata.get("supports_collaboration")),
        }
    )


if __name__ == "__main__":
    main(*sys.argv[1:4])
