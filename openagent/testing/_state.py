"""The thread-safe script behind a :class:`~openagent.testing.ScriptedOpenAIServer`.

HTTP handler threads take replies and record requests here while the test thread
queues replies and reads recordings; one condition variable guards everything.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from ._replies import EmptyReply, ErrorReply, Handler, Reply, TextReply, ToolCallReply

logger = logging.getLogger("openagent.testing")


class ScriptState:
    """Queued replies, the fallback handler and the recorded requests, shared across threads."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: deque[Reply] = deque()
        self._handler: Handler | None = None
        self._requests: list[dict[str, Any]] = []
        self._embedding_requests: list[dict[str, Any]] = []

    def push(self, reply: Reply) -> None:
        """Queue ``reply`` after the ones already queued."""
        if not isinstance(reply, TextReply | ToolCallReply | ErrorReply | EmptyReply):
            raise TypeError(f"expected a TextReply, ToolCallReply, ErrorReply or EmptyReply, got {reply!r}")
        with self._cond:
            self._queue.append(reply)

    def set_handler(self, handler: Handler | None) -> None:
        """Use ``handler`` when the queue is empty (``None`` removes it)."""
        with self._cond:
            self._handler = handler

    def next_reply(self, body: dict[str, Any]) -> Reply | None:
        """Record a chat request and return its reply, or ``None`` when nothing is scripted.

        A queued reply wins over the handler. A handler that raises or returns something
        that is not a reply becomes a 500 :class:`ErrorReply` with ``retry=False``, so the
        failure reaches the test instead of being retried.
        """
        with self._cond:
            self._requests.append(body)
            self._cond.notify_all()
            if self._queue:
                return self._queue.popleft()
            handler = self._handler
        if handler is None:
            return None
        try:
            reply = handler(body)
        except Exception as exc:
            logger.exception("ScriptedOpenAIServer handler %r raised", handler)
            return ErrorReply(
                500, f"ScriptedOpenAIServer: handler raised {type(exc).__name__}: {exc}", retry=False
            )
        if isinstance(reply, str):
            return TextReply(reply)
        if isinstance(reply, TextReply | ToolCallReply | ErrorReply | EmptyReply):
            return reply
        message = f"ScriptedOpenAIServer: handler returned {reply!r}, expected a reply object or str"
        return ErrorReply(500, message, retry=False)

    def record_rejected(self, body: dict[str, Any]) -> None:
        """Record a chat request rejected before any reply was taken."""
        with self._cond:
            self._requests.append(body)
            self._cond.notify_all()

    def record_embedding(self, body: dict[str, Any]) -> None:
        """Record an embeddings request."""
        with self._cond:
            self._embedding_requests.append(body)
            self._cond.notify_all()

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A snapshot of the recorded chat-completion request bodies, oldest first."""
        with self._cond:
            return list(self._requests)

    @property
    def embedding_requests(self) -> list[dict[str, Any]]:
        """A snapshot of the recorded embeddings request bodies, oldest first."""
        with self._cond:
            return list(self._embedding_requests)

    @property
    def pending(self) -> int:
        """The number of queued replies not yet consumed."""
        with self._cond:
            return len(self._queue)

    def wait_for_requests(self, count: int, timeout: float) -> list[dict[str, Any]]:
        """Block until ``count`` chat requests were recorded; raise ``TimeoutError`` after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self._requests) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"ScriptedOpenAIServer: expected {count} chat request(s) within {timeout}s, "
                        f"got {len(self._requests)}"
                    )
                self._cond.wait(remaining)
            return list(self._requests)

    def reset(self) -> None:
        """Forget queued replies, the handler and every recorded request."""
        with self._cond:
            self._queue.clear()
            self._handler = None
            self._requests.clear()
            self._embedding_requests.clear()
