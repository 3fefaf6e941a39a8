"""Run a master, or the scripted OpenAI-compatible server, as a benchmark child process.

::

    python -m bench.launcher master --port 8123 --redis-url redis://127.0.0.1:6379/14
    python -m bench.launcher master --port 8123 --redis-url ... --openai-base-url http://127.0.0.1:8124/v1
    python -m bench.launcher scripted-llm --port 8124

The master is ``create_app(Settings(...), llm=FunctionChatModel(decide))`` served by
uvicorn with its defaults (uvloop, httptools, websockets, permessage-deflate, pings every
20 s), except that uvicorn's access log is off on every server of the benchmark. The
master's own logging is left as shipped (INFO). With ``--openai-base-url`` the master
uses its real OpenAI client against that server instead of the function model;
``--context-max-tokens`` sets ``ORCHESTRATOR_CONTEXT_MAX_TOKENS``, ``--cluster`` ``OPENAGENT_CLUSTER=1``,
``--session-ttl`` ``REDIS_SESSION_TTL_SECONDS`` (the soak bounds the stored sessions with it).
"""

from __future__ import annotations

import argparse
import signal

from bench.child import emit, raise_fd_limit


def _serve_master(args: argparse.Namespace) -> None:
    import uvicorn

    from bench.instant_llm import decide
    from master.app import create_app
    from master.llm.model import FunctionChatModel
    from master.settings import Settings

    scripted = args.openai_base_url is not None
    settings = Settings(
        _env_file=None,  # pydantic-settings: do not read a .env
        redis_url=args.redis_url,
        master_base_url=f"http://127.0.0.1:{args.port}",
        openagent_api_key=None,
        openai_api_key="bench-not-a-key" if scripted else None,
        openai_base_url=args.openai_base_url,
        openagent_llm_loopback_only=True,
        openagent_llm_max_retries=0,
        **({"orchestrator_context_max_tokens": args.context_max_tokens} if args.context_max_tokens else {}),
        openagent_cluster=args.cluster,
        **({"redis_session_ttl_seconds": args.session_ttl} if args.session_ttl else {}),
        **({"openagent_max_catalog_tools": args.max_catalog_tools} if args.max_catalog_tools else {}),
    )
    app = create_app(settings, llm=None if scripted else FunctionChatModel(decide))
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)
    uvicorn.Server(config).run()


def _serve_scripted_llm(args: argparse.Namespace) -> None:
    from bench.instant_llm import scripted_reply
    from openagent.testing import ScriptedOpenAIServer

    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)  # the server's threads inherit the mask
    with ScriptedOpenAIServer(port=args.port) as server:
        server.set_handler(scripted_reply)
        emit("ready", port=server.port)
        signal.sigwait(stop_signals)  # serve until the runner terminates the process


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.launcher")
    sub = parser.add_subparsers(dest="what", required=True)
    master = sub.add_parser("master")
    master.add_argument("--port", type=int, required=True)
    master.add_argument("--redis-url", required=True)
    master.add_argument("--openai-base-url")
    master.add_argument("--context-max-tokens", type=int, help="ORCHESTRATOR_CONTEXT_MAX_TOKENS")
    master.add_argument("--cluster", action="store_true", help="OPENAGENT_CLUSTER=1")
    master.add_argument("--session-ttl", type=int, help="REDIS_SESSION_TTL_SECONDS")
    master.add_argument("--max-catalog-tools", type=int, help="OPENAGENT_MAX_CATALOG_TOOLS")
    llm = sub.add_parser("scripted-llm")
    llm.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    raise_fd_limit()
    if args.what == "master":
        _serve_master(args)
    else:
        _serve_scripted_llm(args)


if __name__ == "__main__":
    main()
