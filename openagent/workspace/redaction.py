"""What an export leaves out: credentials in metadata and in URLs.

Exports never carry secrets: metadata keys that name a credential (``api_key``, ``token``,
``password``, ...), values that look like one (``sk-...``, ``Bearer ...``), and user names,
passwords and token parameters in URLs are dropped.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["is_secret_name", "redact", "scrub_url"]

_SECRET_SUFFIXES = (
    "apikey",
    "token",
    "secret",
    "password",
    "passwd",
    "credential",
    "credentials",
    "authorization",
    "privatekey",
    "accesskey",
    "secretkey",
    "cookie",
)
_SECRET_NAMES = frozenset({"auth", "key", "bearer", "pwd"})
_SECRET_VALUE = re.compile(
    r"^(sk-[A-Za-z0-9_-]{16,}|bearer\s+\S+|gh[pousr]_[A-Za-z0-9]{20,}|xox[abprs]-\S+|AKIA[0-9A-Z]{16})$",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    """Whether a metadata key or URL parameter names a credential (``max_tokens`` does not)."""
    flat = re.sub(r"[^a-z0-9]", "", name.lower())
    return flat in _SECRET_NAMES or flat.endswith(_SECRET_SUFFIXES)


def redact(value: Any) -> Any:
    """``value`` (an agent's metadata) without credential-named keys or credential-looking values;
    URLs in it lose their user name, password and credential parameters."""
    if isinstance(value, dict):
        return {
            str(key): redact(inner)
            for key, inner in value.items()
            if not is_secret_name(str(key)) and not _looks_secret(inner)
        }
    if isinstance(value, list):
        return [redact(inner) for inner in value if not _looks_secret(inner)]
    if isinstance(value, str) and re.match(r"^[a-z][a-z0-9+.-]*://", value, re.IGNORECASE):
        return scrub_url(value)
    return value


def _looks_secret(value: Any) -> bool:
    return isinstance(value, str) and bool(_SECRET_VALUE.fullmatch(value.strip()))


def scrub_url(url: str) -> str:
    """The URL without user name, password, or credential-named query parameters."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    query = urlencode(
        [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not is_secret_name(k)]
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
