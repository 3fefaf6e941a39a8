"""Log lines that say which query, session and tool call they are about; text or JSON.

The query service sets ``query_id`` and ``session_id`` for the whole of a query, and the
orchestrator ``call_id`` while a tool call runs, in context variables: every line logged
meanwhile, by any module, carries them (asyncio copies the context into the tasks a query
starts). :class:`ContextFilter` puts them on the records; the JSON format writes them as
fields, the text format appends them in brackets.

``OPENAGENT_LOG_FORMAT=json`` gives one JSON object per line: ``ts``, ``level``,
``logger``, ``message``, then ``query_id``, ``session_id``, ``call_id``, ``trace_id`` when
set, ``audit`` (an object: action, key id and name, target) on audit lines, and ``exc_info``
for exceptions. uvicorn's own loggers get the same format.
"""

from __future__ import annotations

import json
import logging
import time
from contextvars import ContextVar
from typing import Literal

LogFormat = Literal["text", "json"]

query_id_var: ContextVar[str | None] = ContextVar("openagent_query_id", default=None)
session_id_var: ContextVar[str | None] = ContextVar("openagent_session_id", default=None)
call_id_var: ContextVar[str | None] = ContextVar("openagent_call_id", default=None)

_FIELDS = ("query_id", "session_id", "call_id", "trace_id")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s%(context)s"


class query_context:
    """Lines logged inside are about query ``query_id`` (and session ``session_id``).

    A class, not a ``@contextmanager`` generator: every query enters it (measured: a generator's
    context manager costs several times as many instructions)."""

    __slots__ = ("_query", "_session", "_tokens")

    def __init__(self, query_id: str, session_id: str | None = None) -> None:
        self._query = query_id
        self._session = session_id

    def __enter__(self) -> None:
        self._tokens = (query_id_var.set(self._query), session_id_var.set(self._session))

    def __exit__(self, *_: object) -> None:
        query_id_var.reset(self._tokens[0])
        session_id_var.reset(self._tokens[1])


def set_session(session_id: str) -> None:
    """The running query's session, once known (a new session gets its id after loading)."""
    session_id_var.set(session_id)


class call_context:
    """Scope for :func:`set_call`: the call id is dropped when the block ends (a class, as
    :class:`query_context`)."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = call_id_var.set(None)

    def __exit__(self, *_: object) -> None:
        call_id_var.reset(self._token)


def set_call(call_id: str) -> None:
    """Lines logged from now on (in this task, inside :func:`call_context`) are about ``call_id``."""
    call_id_var.set(call_id)


class ContextFilter(logging.Filter):
    """Puts ``query_id``, ``session_id``, ``call_id`` (and ``trace_id``) on every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.query_id = getattr(record, "query_id", None) or query_id_var.get()
        record.session_id = getattr(record, "session_id", None) or session_id_var.get()
        record.call_id = getattr(record, "call_id", None) or call_id_var.get()
        if not hasattr(record, "trace_id"):
            from master.observability.tracing import current_trace_id

            record.trace_id = current_trace_id()
        parts = [f"{name}={value}" for name in _FIELDS if (value := getattr(record, name, None))]
        record.context = f" [{' '.join(parts)}]" if parts else ""
        return True


class JSONFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in _FIELDS:
            value = getattr(record, name, None)
            if value:
                line[name] = value
        audit = getattr(record, "audit", None)
        if isinstance(audit, dict):  # master.access.audit: the action's fields
            line["audit"] = audit
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure(log_format: LogFormat) -> None:
    """Log at INFO to stderr in ``log_format`` unless logging is already set up; context on every line.

    An application that configured the root logger keeps its handlers (they get the context
    filter; in JSON mode, the JSON formatter).
    """
    root = logging.getLogger()
    ours = not root.handlers
    if ours:
        logging.basicConfig(level=logging.INFO)
    formatter: logging.Formatter = JSONFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    handlers = list(root.handlers)
    if log_format == "json":
        for name in ("uvicorn", "uvicorn.access"):
            handlers.extend(logging.getLogger(name).handlers)
    for handler in handlers:
        if not any(isinstance(f, ContextFilter) for f in handler.filters):
            handler.addFilter(ContextFilter())
        if log_format == "json" or ours:
            handler.setFormatter(formatter)
