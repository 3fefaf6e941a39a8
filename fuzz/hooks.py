"""Schemathesis hooks (loaded with ``SCHEMATHESIS_HOOKS=fuzz.hooks``).

- Every ``invocation_base_url`` a generated request carries is rewritten to a dead loopback
  port before it is sent: the master resolves and contacts the URLs agents give, so a fuzzer
  must never register one outside this machine.
- Every response's status is appended to ``$FUZZ_STATUS_LOG`` (``METHOD PATH STATUS`` a line),
  so the report can count 5xx responses exactly.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import schemathesis

DEAD_URL = "http://127.0.0.1:9"
"""Port 9 (discard) on loopback: nothing listens, a health check is refused at once."""

_lock = threading.Lock()


def _rewrite(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: DEAD_URL
            if key in ("invocation_base_url", "invocation_url") and isinstance(item, str)
            else _rewrite(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_rewrite(item) for item in value]
    return value


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    if isinstance(case.body, dict | list):
        case.body = _rewrite(case.body)
    if isinstance(kwargs.get("json"), dict | list):
        kwargs["json"] = _rewrite(kwargs["json"])


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    path = os.environ.get("FUZZ_STATUS_LOG")
    if not path:
        return
    with _lock, open(path, "a", encoding="utf-8") as log:
        log.write(f"{case.method} {case.operation.path} {response.status_code}\n")
