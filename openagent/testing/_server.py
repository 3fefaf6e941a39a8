"""``ScriptedOpenAIServer``: an OpenAI-compatible HTTP server that plays back scripted replies."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from ._http import ScriptedHTTPServer
from ._quirks import Quirks
from ._replies import ErrorReply, Handler, Reply, TextReply, ToolCall, ToolCallReply, new_call_id
from ._state import ScriptState

DEFAULT_MODELS = ("gpt-4o-mini", "gpt-4o", "text-embedding-3-small")
"""The model ids ``GET /v1/models`` lists unless told otherwise."""

_STOP_TIMEOUT = 5.0


class ScriptedOpenAIServer:
    """A scripted OpenAI-compatible server on loopback, for testing LLM code offline.

    Point any OpenAI client at :attr:`base_url`; each ``POST /v1/chat/completions``
    consumes the next queued reply (FIFO), or asks the handler set with
    :meth:`set_handler` when the queue is empty. With neither, the request fails with
    HTTP 400 ``"ScriptedOpenAIServer: no scripted reply queued for this request"``
    (400, so the ``openai`` client raises ``BadRequestError`` at once instead of retrying).

    As the real API does, a request offering (or recalling) a function whose name does not
    match ``^[a-zA-Z0-9_-]{1,64}$`` is refused with HTTP 400, ``error.param`` naming it
    (e.g. ``tools[0].function.name``) and ``error.code`` ``invalid_value`` or
    ``string_above_max_length``; it is recorded in :attr:`requests` but consumes no reply.

    Both streaming (``stream=True``, server-sent ``chat.completion.chunk`` events) and
    non-streaming completions are served from the same replies. ``POST /v1/embeddings``
    returns deterministic unit-length vectors and ``GET /v1/models`` lists :attr:`models`.
    Only the standard library is used; requests are served on daemon threads and every
    method is thread-safe, so the code under test may run in another thread or process::

        with ScriptedOpenAIServer() as llm:
            llm.add_tool_call("weather-agent__get_weather", {"city": "Paris"})
            llm.add_text("Sunny in Paris")
            client = openai.OpenAI(base_url=llm.base_url, api_key="test")
            ...
            assert llm.requests[1]["messages"][-1]["role"] == "tool"

    Args:
        api_key: When given, every request must send ``Authorization: Bearer <api_key>``
            or it gets HTTP 401 (``openai.AuthenticationError``).
        host: The interface to bind; loopback by default.
        port: The port to bind; ``0`` picks a free one (read it back from :attr:`port`).
        models: The model ids ``GET /v1/models`` lists.
        quirks: How it departs from the OpenAI API, to imitate llama.cpp, Ollama or vLLM
            (:class:`Quirks`): refusing null content, long tool-call ids or prompts beyond a
            small window, streams without usage, one slot at a time.
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        models: Sequence[str] = DEFAULT_MODELS,
        quirks: Quirks | None = None,
    ) -> None:
        self.api_key = api_key
        self.quirks = quirks or Quirks()
        self.models = tuple(models)
        self._host = host
        self._port = port
        self._state = ScriptState()
        self._lifecycle = threading.Lock()
        self._http: ScriptedHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        """Bind the socket and serve on a daemon thread; return ``self``.

        Raises:
            RuntimeError: if the server is already running.
            OSError: if the address cannot be bound (e.g. the port is taken).
        """
        with self._lifecycle:
            if self._http is not None:
                raise RuntimeError("ScriptedOpenAIServer is already running; call stop() first")
            http = ScriptedHTTPServer(
                (self._host, self._port), self._state, self.api_key, self.models, self.quirks
            )
            thread = threading.Thread(
                target=http.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-openai", daemon=True
            )
            thread.start()
            self._http, self._thread = http, thread
        return self

    def stop(self) -> None:
        """Stop serving, close the socket and every open connection. Safe to call twice.

        Requests still sleeping through a reply's ``delay`` are dropped unanswered.
        Queued replies and recorded requests are kept (see :meth:`reset`).
        """
        with self._lifecycle:
            http, thread = self._http, self._thread
            self._http = self._thread = None
        if http is None or thread is None:
            return
        http.stopping.set()
        http.shutdown()
        thread.join(_STOP_TIMEOUT)
        http.server_close()
        http.close_connections()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """Whether the server is currently serving."""
        return self._http is not None

    @property
    def port(self) -> int:
        """The bound port (the free one picked when constructed with ``port=0``)."""
        return self._running_http().server_address[1]

    @property
    def url(self) -> str:
        """The server's root URL, e.g. ``"http://127.0.0.1:54321"``."""
        return f"http://{self._host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, e.g. ``"http://127.0.0.1:54321/v1"``; give it to ``OPENAI_BASE_URL``."""
        return f"{self.url}/v1"

    def _running_http(self) -> ScriptedHTTPServer:
        http = self._http
        if http is None:
            raise RuntimeError(
                "ScriptedOpenAIServer is not running; call start() or use it as a context manager"
            )
        return http

    # -- scripting -----------------------------------------------------------------------------

    def add(self, reply: Reply) -> Reply:
        """Queue any reply object (:class:`TextReply`, :class:`ToolCallReply`, :class:`ErrorReply`)."""
        self._state.push(reply)
        return reply

    def add_text(self, text: str, *, delay: float = 0.0) -> TextReply:
        """Queue a reply whose assistant message is ``text``; return it."""
        reply = TextReply(text, delay=delay)
        self._state.push(reply)
        return reply

    def add_tool_call(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | None = None,
        *,
        call_id: str | None = None,
        delay: float = 0.0,
    ) -> ToolCallReply:
        """Queue a reply asking for one call of tool ``name``; return it.

        Args:
            name: The function name.
            arguments: A mapping (sent as JSON) or a raw string sent verbatim, e.g.
                ``'{"city": '`` to script malformed arguments. ``None`` means ``{}``.
            call_id: The tool-call id; a fresh ``call_<hex>`` when omitted. Read it back
                from the returned reply's ``calls[0].call_id``.
            delay: Seconds to wait before answering.
        """
        call = ToolCall(name, {} if arguments is None else arguments, call_id or new_call_id())
        reply = ToolCallReply((call,), delay=delay)
        self._state.push(reply)
        return reply

    def add_tool_calls(
        self, calls: Iterable[ToolCall | tuple[str, Mapping[str, Any] | str]], *, delay: float = 0.0
    ) -> ToolCallReply:
        """Queue one reply asking for several tool calls in parallel; return it.

        Args:
            calls: :class:`ToolCall` objects or ``(name, arguments)`` pairs, in order.
            delay: Seconds to wait before answering.
        """
        built = tuple(call if isinstance(call, ToolCall) else ToolCall(call[0], call[1]) for call in calls)
        reply = ToolCallReply(built, delay=delay)
        self._state.push(reply)
        return reply

    def add_error(
        self,
        status: int,
        message: str,
        *,
        type: str | None = None,
        code: str | None = None,
        retry: bool | None = None,
        delay: float = 0.0,
    ) -> ErrorReply:
        """Queue a failure: the next chat request gets HTTP ``status`` and an OpenAI error body.

        See :class:`ErrorReply` for ``type``, ``code`` and ``retry``. Remember that the
        ``openai`` client retries 429 and 5xx unless ``max_retries=0`` or ``retry=False``.
        """
        reply = ErrorReply(status, message, type=type, code=code, retry=retry, delay=delay)
        self._state.push(reply)
        return reply

    def set_handler(self, handler: Handler | None) -> None:
        """Answer requests with ``handler(request_body)`` whenever the queue is empty.

        The handler runs on a server thread and returns a reply object or a ``str``
        (shorthand for :class:`TextReply`). If it raises, the request fails with HTTP 500
        naming the exception, without client retries. ``None`` removes the handler.
        """
        self._state.set_handler(handler)

    def reset(self) -> None:
        """Drop queued replies and the handler, and forget every recorded request."""
        self._state.reset()

    # -- inspection ----------------------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The chat-completion request bodies received so far, oldest first (a snapshot)."""
        return self._state.requests

    @property
    def embedding_requests(self) -> list[dict[str, Any]]:
        """The embeddings request bodies received so far, oldest first (a snapshot)."""
        return self._state.embedding_requests

    @property
    def pending(self) -> int:
        """The number of queued replies not yet consumed."""
        return self._state.pending

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Block until at least ``count`` chat requests arrived and return them.

        Raises:
            TimeoutError: if fewer than ``count`` arrived within ``timeout`` seconds.
        """
        return self._state.wait_for_requests(count, timeout)

    def __repr__(self) -> str:
        where = self.base_url if self.running else "stopped"
        return f"<ScriptedOpenAIServer {where} pending={self.pending}>"
