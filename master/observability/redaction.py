"""Safe log lines: no secrets, no forged lines, no flooding.

:class:`SafeLogFilter` is attached to every handler (the master's and uvicorn's, access
log included) when the app starts. On every record it

- redacts secrets: the values of ``token``/``key`` query parameters (``/ws?token=<API key>``,
  an invocation callback's ``?token=<per-call token>``), ``Bearer`` credentials, and the
  master's API key wherever it appears;
- escapes control characters in the arguments (``\\n`` becomes ``\\\\n``), so that text an agent
  supplied (a progress message, an error, a reason) can never start a new, forged line;
- caps each argument at :data:`LOG_ARG_MAX_CHARS` characters, so that one agent cannot flood
  the log (a 1 MiB progress message is logged as its first 500 characters and a count).

The record's arguments stay a tuple of the same length (uvicorn's access formatter unpacks
them); numbers are left alone.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

LOG_ARG_MAX_CHARS = 500
"""Characters of one log argument kept; the rest is replaced by a count."""

_SECRET_PARAMS = re.compile(r"(?i)([?&](?:token|api_key|apikey|key|access_token)=)[^&\s\"'#]+")
_BEARER = re.compile(r"(?i)(bearer\s+)[^\s\"',]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _ESCAPES:
        return _ESCAPES[char]
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def escape_control(text: str) -> str:
    """``text`` with every control character written as an escape (one log line stays one line)."""
    return _CONTROL.sub(_escape, text)


def cap(text: str, limit: int = LOG_ARG_MAX_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how many were cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...[{len(text) - limit} more characters]"


class SafeLogFilter(logging.Filter):
    """Redacts secrets, escapes control characters and caps arguments of every record."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets: set[str] = set()
        self.add_secrets(secrets)

    def add_secrets(self, secrets: Iterable[str | None]) -> None:
        self.secrets.update(secret for secret in secrets if secret and len(secret) >= 4)

    def redact(self, text: str) -> str:
        text = _SECRET_PARAMS.sub(r"\1***", text)
        text = _BEARER.sub(r"\1***", text)
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, "***")
        return text

    def _safe(self, value: Any) -> Any:
        if value is None or isinstance(value, bool | int | float):
            return value
        return cap(escape_control(self.redact(str(value))))

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            self._sanitize(record)
        except Exception:  # never break logging; a line that cannot be sanitized is replaced, not leaked
            record.args = None
            record.msg = "(log line dropped by SafeLogFilter: it could not be sanitized)"
        return True

    def _sanitize(self, record: logging.LogRecord) -> None:
        if isinstance(record.msg, str):
            record.msg = self.redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(self._safe(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: self._safe(value) for key, value in record.args.items()}


def install_log_filter(secrets: Iterable[str | None] = ()) -> SafeLogFilter:
    """Attach one :class:`SafeLogFilter` to every handler of the root logger and of every logger
    configured so far (uvicorn's ``default`` and ``access`` handlers); returns it."""
    loggers = [logging.getLogger()] + [
        logger for logger in logging.root.manager.loggerDict.values() if isinstance(logger, logging.Logger)
    ]
    installed: SafeLogFilter | None = None
    for logger in loggers:
        for handler in logger.handlers:
            existing = next((f for f in handler.filters if isinstance(f, SafeLogFilter)), None)
            if existing is None:
                installed = installed or SafeLogFilter()
                handler.addFilter(installed)
                existing = installed
            existing.add_secrets(secrets)
            installed = installed or existing
    installed = installed or SafeLogFilter()
    installed.add_secrets(secrets)
    return installed
