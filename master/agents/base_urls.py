"""The base URLs of an HTTP invocation agent served by several copies (``replica_urls``), and
which one a call goes to.

A call goes to the URL with the fewest calls in flight (a call is in flight from its POST to
its result), ties taken in turn (round-robin). A URL that refused a connection is passed over
for :data:`REFUSED_SECONDS`, unless every URL did; the dispatcher sends a call to another URL
only when the connection itself was refused (the call is known not to have been sent).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import yarl

REFUSED_SECONDS = 5.0
"""How long a URL that refused a connection is passed over (its health check clears it sooner)."""
MAX_REPLICA_URLS = 16
"""Further base URLs an invocation agent may register."""

URL_PATH = re.compile(r"^[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$")
"""Characters of a URL path (RFC 3986 ``pchar`` and ``/``): ASCII only, no spaces or controls."""


_PORT = r"(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
URL_PATTERN = (
    r"^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)"
    rf"(:{_PORT})?(/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*)?$"
)
"""The URL in the schema: ``http(s)://host[:port][/path]``, ASCII, no user info, query or fragment."""


def check_base_url(url: str) -> str:
    """An ``http(s)://host[:port][/path]`` URL the HTTP client can use, or ``ValueError`` naming why.

    Checked before anything is stored: a URL the client cannot encode (non-ASCII, user info,
    a bad port) would otherwise fail every health check, every query and the next start-up.
    """
    if not url.isascii() or any(not " " < char < "\x7f" for char in url):
        raise ValueError("must be ASCII without spaces or control characters")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"must be an http or https URL, not {parts.scheme or 'schemeless'!r}")
    if "@" in parts.netloc:
        raise ValueError("must not carry user info (user:password@)")
    if not parts.hostname:
        raise ValueError("must name a host")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range
        parsed = yarl.URL(url)
    except ValueError as exc:
        raise ValueError(f"is not a usable URL: {exc}") from None
    if parsed.host is None or parts.query or parts.fragment or not URL_PATH.fullmatch(parts.path):
        raise ValueError("must be scheme://host[:port][/path], without query or fragment")
    return url


def checked_base_url(url: str) -> str:
    """An invocation agent's base URL, checked (``ValueError`` naming the problem)."""
    check_base_url(url)
    if not re.fullmatch(URL_PATTERN, url):
        raise ValueError("must be http(s)://host[:port][/path], e.g. http://127.0.0.1:9000")
    return url


@dataclass(eq=False)
class BaseUrls:
    """An agent's base URLs (the first is its ``invocation_base_url``), with each one's calls in flight."""

    urls: list[str]
    in_flight: list[int] = field(default_factory=list)
    refused_until: list[float] = field(default_factory=list)
    clock: Callable[[], float] = time.monotonic
    _turn: int = 0

    def __post_init__(self) -> None:
        self.in_flight = [0] * len(self.urls)
        self.refused_until = [float("-inf")] * len(self.urls)

    def pick(self, tried: Collection[int] = ()) -> int | None:
        """The index of the URL for the next call (it counts as in flight until :meth:`done`), or
        ``None`` when every URL was ``tried``. URLs that refused a connection lately come last."""
        now = self.clock()
        count = len(self.urls)
        order = [(self._turn + step) % count for step in range(count)]
        left = [index for index in order if index not in tried]
        if not left:
            return None
        ready = [index for index in left if self.refused_until[index] <= now] or left
        chosen = min(ready, key=lambda index: self.in_flight[index])  # the first of the least busy
        self._turn = (chosen + 1) % count
        self.in_flight[chosen] += 1
        return chosen

    def done(self, index: int) -> None:
        """A call picked with :meth:`pick` ended (or moved to another URL)."""
        self.in_flight[index] = max(0, self.in_flight[index] - 1)

    def refused(self, index: int) -> None:
        """The URL refused a connection: passed over for a while."""
        self.refused_until[index] = self.clock() + REFUSED_SECONDS

    def answered(self, index: int) -> None:
        """The URL answered (a call or a health check): no longer passed over."""
        self.refused_until[index] = float("-inf")

    def down(self, index: int) -> bool:
        return self.refused_until[index] > self.clock()
