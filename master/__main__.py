"""``python -m master [--host H] [--port P]``: the master under uvicorn, with the server's limits
taken from the settings.

Use it rather than ``uvicorn master.app:app``: uvicorn's own defaults would let a client make
the server buffer frames of up to 16 MiB (``--ws-max-size``), and 32 of them per connection
(``--ws-max-queue``), whatever ``OPENAGENT_WS_MAX_MESSAGE_BYTES`` says. Here

- ``ws_max_size`` is ``OPENAGENT_WS_MAX_MESSAGE_BYTES``: a larger frame closes the connection
  with 1009 (message too big) as soon as its header announces it, before it is read;
- ``ws_max_queue`` is :data:`WS_MAX_QUEUE` frames per connection;
- HTTP bodies over ``OPENAGENT_HTTP_MAX_BODY_BYTES`` get 413 while they stream in (the app's
  ``max_body_size``), whichever way the master is run;
- on SIGTERM the master drains (:mod:`master.gateway.drain`, ``OPENAGENT_DRAIN_SECONDS``), then uvicorn
  gives the HTTP requests still open :data:`~master.gateway.drain.ANSWER_GRACE_SECONDS` more
  (``timeout_graceful_shutdown``; uvicorn's default waits for them without end).
"""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Sequence

import uvicorn
from pydantic import ValidationError

from master.gateway.drain import ANSWER_GRACE_SECONDS
from master.settings import Settings

WS_MAX_QUEUE = 4
"""Frames uvicorn buffers per connection before it stops reading (the hub takes them in order)."""


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m master", description=__doc__.split("\n")[0])
    parser.add_argument("--host", help="interface to bind (default: MASTER_HOST, 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port to bind (default: MASTER_PORT, 8000)")
    parser.add_argument("--log-level", default="info", help="uvicorn log level (default info)")
    args = parser.parse_args(argv)
    try:
        settings = Settings()
    except ValidationError as exc:
        parser.exit(2, f"python -m master: error: invalid settings\n{_settings_errors(exc)}")
    host = args.host or settings.master_host
    if settings.api_key is None and not settings.openagent_allow_no_auth and not _loopback(host):
        parser.exit(
            2,
            f"python -m master: error: refusing to listen on {host} without OPENAGENT_API_KEY: everyone "
            "who reaches it would be an administrator (able to run code in the master). Set "
            "OPENAGENT_API_KEY (e.g. $(openssl rand -hex 32)), listen on 127.0.0.1, or set "
            "OPENAGENT_ALLOW_NO_AUTH=true to accept that.\n",
        )
    uvicorn.run(
        "master.app:app",
        host=host,
        port=args.port or settings.master_port,
        log_level=args.log_level,
        ws_max_size=settings.openagent_ws_max_message_bytes,
        ws_max_queue=WS_MAX_QUEUE,
        timeout_graceful_shutdown=int(ANSWER_GRACE_SECONDS),
    )


def _settings_errors(exc: ValidationError) -> str:
    """One line per invalid setting, by its variable's name: ``  OPENAI_BASE_URL: 'x' is not ...``."""
    lines = []
    for error in exc.errors():
        name = str(error["loc"][0]).upper() if error["loc"] else "settings"
        lines.append(f"  {name}: {error['msg'].removeprefix('Value error, ')}\n")
    return "".join(lines)


def _loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) is only reachable from this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name (or "0.0.0.0"-like wildcard spelled otherwise): assume reachable


if __name__ == "__main__":
    main()
