"""Run an OpenAI-compatible server in the foreground: ``python -m openagent.testing``.

With no option, every chat completion answers ``"You said: <last user message>"``
(:func:`echo_handler`). With ``--demo`` it is the demo LLM (:func:`demo_handler`): it calls
the offered tool whose name, description and parameters share words with the question,
then answers from the tool's result. Both let the master be tried without an LLM::

    python -m openagent.testing --demo --port 8089
    OPENAI_BASE_URL=http://127.0.0.1:8089/v1 OPENAI_API_KEY=demo OPENAGENT_CHAT_MODELS=openagent-demo \
        <start the master>

Neither is a model: they understand nothing, and say so.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Sequence

from ._demo import DEMO_MODEL, demo_handler
from ._replies import echo_handler
from ._server import DEFAULT_MODELS, ScriptedOpenAIServer


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m openagent.testing",
        description=(
            "Serve an OpenAI-compatible API without a model: it echoes the last user message, "
            "or with --demo calls the tool whose words match the question (a demo, not a model)."
        ),
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help="be the demo LLM: pick a tool by matching words, fill its arguments, answer from its result",
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: %(default)s)")
    parser.add_argument(
        "--port", type=int, default=8089, help="port to bind, 0 for any (default: %(default)s)"
    )
    parser.add_argument(
        "--api-key", default=None, help="require 'Authorization: Bearer <key>' (default: none)"
    )
    return parser


def main(argv: Sequence[str] | None = None, *, stop: threading.Event | None = None) -> int:
    """Parse ``argv``, serve until Ctrl-C (or until ``stop`` is set), and return the exit status."""
    args = _parser().parse_args(argv)
    models = (DEMO_MODEL,) if args.demo else DEFAULT_MODELS
    server = ScriptedOpenAIServer(api_key=args.api_key, host=args.host, port=args.port, models=models)
    server.set_handler(demo_handler if args.demo else echo_handler)
    mode = "demo LLM mode: tools picked by matching words, not a model" if args.demo else "echo mode"
    with server:
        print(f"ScriptedOpenAIServer listening on {server.base_url} ({mode})", flush=True)  # noqa: T201
        print(f"  export OPENAI_BASE_URL={server.base_url}", flush=True)  # noqa: T201
        if args.demo:  # the master then names the demo for what it is
            print(f"  export OPENAGENT_CHAT_MODELS={DEMO_MODEL}", flush=True)  # noqa: T201
        try:
            (stop or threading.Event()).wait()
        except KeyboardInterrupt:
            print("stopped", flush=True)  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
