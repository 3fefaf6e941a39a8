"""The HTTP layer of the scripted server: a standard-library threading server and its handler.

Each connection is served on its own daemon thread (HTTP/1.1 keep-alive, as the
``openai`` client pools connections). The server tracks open connections so that
stopping it also ends idle keep-alive threads instead of leaving them blocked.
"""

from __future__ import annotations

import hmac
import json
import socket
import sys
import threading
from collections.abc import Iterable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from . import _wire
from ._quirks import Quirks
from ._replies import EmptyReply, ErrorReply, TextReply
from ._state import ScriptState, logger

NO_REPLY_MESSAGE = "ScriptedOpenAIServer: no scripted reply queued for this request"
_JOIN_TIMEOUT = 5.0


class ScriptedHTTPServer(ThreadingHTTPServer):
    """A ``ThreadingHTTPServer`` that serves one :class:`ScriptState` and can close its connections."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 256
    """Listen backlog: the default of 5 refuses connections when many clients call at once."""

    def __init__(
        self,
        address: tuple[str, int],
        state: ScriptState,
        api_key: str | None,
        models: Sequence[str],
        quirks: Quirks | None = None,
    ) -> None:
        self.state = state
        self.quirks = quirks or Quirks()
        self.api_key = api_key
        self.models = tuple(models)
        self.stopping = threading.Event()
        self._connections: dict[Any, threading.Thread] = {}
        self._connections_lock = threading.Lock()
        super().__init__(address, ScriptedRequestHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve ``request`` on a new daemon thread that :meth:`close_connections` can join."""
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name=f"scripted-openai-{client_address[1]}",
            daemon=True,
        )
        with self._connections_lock:
            self._connections[request] = thread
        thread.start()

    def shutdown_request(self, request: Any) -> None:
        """Close ``request`` and forget it."""
        with self._connections_lock:
            self._connections.pop(request, None)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Shut down every open connection and wait (briefly) for its thread to finish."""
        with self._connections_lock:
            connections = list(self._connections.items())
        for request, _ in connections:
            try:
                request.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the peer
        for _, thread in connections:
            thread.join(_JOIN_TIMEOUT)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Ignore clients that went away (timeouts, stop()); log anything else without printing."""
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError) or self.stopping.is_set():
            return
        logger.error("ScriptedOpenAIServer failed serving %s", client_address, exc_info=exc)


class ScriptedRequestHandler(BaseHTTPRequestHandler):
    """Answers the OpenAI endpoints: chat completions, embeddings and models."""

    disable_nagle_algorithm = True
    """Headers and body go out in separate writes; with Nagle on, a kept-alive client waits ~40 ms."""

    protocol_version = "HTTP/1.1"
    server_version = "ScriptedOpenAIServer/1.0"
    server: ScriptedHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: tests should not print a log line per request."""

    def do_GET(self) -> None:
        """``GET /v1/models`` (and ``/props`` or ``/api/version`` when the quirks say so)."""
        path = urlsplit(self.path).path.rstrip("/")
        if not self._authorized():
            return
        described = self.server.quirks.describe(path, self.server.models)
        if described is not None:
            self._send_json(200, described)
        else:
            self._send_error(404, f"ScriptedOpenAIServer: unknown path GET {path!r}")

    def do_POST(self) -> None:
        """``POST /v1/chat/completions`` and ``POST /v1/embeddings``."""
        path = urlsplit(self.path).path.rstrip("/")
        raw = self._read_body()
        if not self._authorized():
            return
        tokenizes = path in ("/tokenize", "/extras/tokenize")
        if path not in ("/v1/chat/completions", "/v1/embeddings") and not tokenizes:
            self._send_error(404, f"ScriptedOpenAIServer: unknown path POST {path!r}")
            return
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self._send_error(400, f"ScriptedOpenAIServer: request body is not valid JSON: {exc}")
            return
        if tokenizes:
            answer = self.server.quirks.tokenize(path, body) if isinstance(body, dict) else None
            if answer is None:
                self._send_error(404, f"ScriptedOpenAIServer: unknown path POST {path!r}")
            else:
                self._send_json(*answer)
        elif not isinstance(body, dict):
            self._send_error(
                400, f"ScriptedOpenAIServer: request body must be a JSON object, got {raw[:80]!r}"
            )
        elif path == "/v1/embeddings":
            self._embeddings(body)
        else:
            self._chat(body)

    def _chat(self, body: dict[str, Any]) -> None:
        try:
            _wire.check_function_names(body)
        except _wire.WireError as exc:
            # Recorded (tests may inspect it) but answered as the real API does; no reply is used.
            self.server.state.record_rejected(body)
            self._send_json(400, _wire.error_body(400, str(exc), code=exc.code, param=exc.param))
            return
        quirks = self.server.quirks
        refused = quirks.check(body)
        if refused is not None:
            self.server.state.record_rejected(body)
            self._send_error(refused[0], refused[1], headers={"x-should-retry": "false"})
            return
        if not quirks.single_slot:
            self._answer(body)
        elif quirks._busy.acquire(blocking=False):
            try:
                self._answer(body)
            finally:
                quirks._busy.release()
        else:
            self.server.state.record_rejected(body)
            self._send_error(
                503,
                "server is busy: all slots are taken",
                headers={"retry-after-ms": str(quirks.busy_retry_ms)},
            )

    def _answer(self, body: dict[str, Any]) -> None:
        reply = self.server.state.next_reply(body)
        if reply is None:
            self._send_error(400, NO_REPLY_MESSAGE, headers={"x-should-retry": "false"})
            return
        if reply.delay > 0 and self.server.stopping.wait(reply.delay):
            self.close_connection = True  # stopping: drop the request unanswered
            return
        if isinstance(reply, ErrorReply):
            headers = {} if reply.retry is None else {"x-should-retry": str(reply.retry).lower()}
            body_out = _wire.error_body(reply.status, reply.message, reply.type, reply.code)
            self._send_json(reply.status, body_out, headers)
            return
        requested = body.get("model")
        model = requested if isinstance(requested, str) else "scripted-model"
        prompt = _wire.prompt_tokens(body)
        if isinstance(reply, EmptyReply):
            if body.get("stream") is True:
                self._send_stream([b"data: [DONE]\n\n"])
            else:
                self._send_json(200, {"id": "chatcmpl-empty", "object": "chat.completion", "choices": []})
            return
        if body.get("stream") is True:
            options = body.get("stream_options")
            include_usage = (
                isinstance(options, dict)
                and options.get("include_usage") is True
                and self.server.quirks.stream_usage
            )
            events = _wire.stream_events(reply, model=model, prompt=prompt, include_usage=include_usage)
            self._send_stream(_paced(events, reply) if isinstance(reply, TextReply) else events)
        else:
            self._send_json(200, _wire.completion(reply, model=model, prompt=prompt))

    def _embeddings(self, body: dict[str, Any]) -> None:
        self.server.state.record_embedding(body)
        try:
            response = _wire.embeddings(body)
        except _wire.WireError as exc:
            self._send_error(400, f"ScriptedOpenAIServer: {exc}")
            return
        self._send_json(200, response)

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self.close_connection = True  # cannot find where the body ends; do not reuse the connection
            return b""
        return self.rfile.read(int(length))

    def _authorized(self) -> bool:
        expected = self.server.api_key
        if expected is None:
            return True
        header = self.headers.get("Authorization", "")
        if hmac.compare_digest(header.encode(), f"Bearer {expected}".encode()):
            return True
        if header:
            message = "ScriptedOpenAIServer: incorrect API key provided"
        else:
            message = "ScriptedOpenAIServer: missing 'Authorization: Bearer <api_key>' header"
        self._send_error(401, message)
        return False

    def _send_error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._send_json(status, _wire.error_body(status, message), headers)

    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, events: Iterable[bytes]) -> None:
        """Send ``events`` as a chunked ``text/event-stream``, flushing each so the client sees deltas."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in events:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def _paced(events: Iterable[bytes], reply: TextReply) -> Iterable[bytes]:
    """``events`` with :attr:`TextReply.token_delay` and :attr:`TextReply.before_token` applied
    before each word after the first (event 0 is the role chunk, event ``n + 1`` word ``n``)."""
    for index, event in enumerate(events):
        word = index - 1
        if word >= 1 and event.startswith(b"data: {") and b'"content"' in event:
            if reply.token_delay > 0:
                threading.Event().wait(reply.token_delay)
            if reply.before_token is not None:
                reply.before_token(word)
        yield event
