"""The OpenAI-compatible ``POST {base_url}/chat/completions`` endpoint, spoken over pyreqwest.

Why not the ``openai`` package: per completion its typed-parameter transform, request
building and ``httpx`` stack cost the master more CPU than the rest of a one-tool query
(measured on 2 cores against ``ScriptedOpenAIServer`` in another process, 10 tools
offered: ``chat.completions.create`` 3.2 ms per call with 4 messages and 230 ms with 1,000;
the client's raw ``post`` with pre-serialized bytes 1.6 ms and 5 ms; this module on aiohttp
0.4 ms and 1.8 ms). Why pyreqwest (Rust's reqwest, its I/O on a thread of its own) rather than
aiohttp: 142K instructions per request against aiohttp's 370K, and at concurrency 32 the
master's CPU per query 1.37-1.61 ms against 1.50-1.81 ms (``bench/README.md``, "The real LLM
client, per request"). What the ``openai`` client gave is kept, with its rules:

- auth (``Authorization: Bearer``), base URL (``OPENAI_BASE_URL``, default OpenAI's);
- per-attempt timeouts (``OPENAGENT_LLM_TIMEOUT`` on connecting and on each read, like
  the client's ``httpx`` timeout) and retries (``OPENAGENT_LLM_MAX_RETRIES``) of
  timeouts, connection errors, 408, 409, 429 and 5xx, obeying ``x-should-retry``,
  ``retry-after-ms`` and ``retry-after`` (up to 60 s), else exponential backoff from
  0.5 s to 8 s with jitter;
- the proxy variables of the environment (``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``) and
  the certificates it names (``SSL_CERT_FILE``, ``SSL_CERT_DIR``), which reqwest reads itself;
- one :class:`master.errors.LLMError` per failure, its ``code`` naming the kind.

Bodies are sent as JSON bytes built by the caller (:mod:`master.llm.chat_body`, orjson), so that
parts which do not change between rounds can be reused, in pieces
(:func:`~master.llm.chat_body.chat_pieces`) joined once per request, so that a long session's kept
history is neither re-encoded nor walked; answers are
parsed with :func:`orjson.loads` into plain dicts, with no model classes.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import Any

import orjson
from pyreqwest.client import Client, ClientBuilder
from pyreqwest.exceptions import DetailedPyreqwestError, RequestError
from pyreqwest.request import StreamRequest
from pyreqwest.response import Response

from master.errors import LLMError
from master.llm.chat_body import encode
from master.llm.compat import GENERIC, PROFILES, Compat, CompatSetting, detect

logger = logging.getLogger("master.llm.chat_endpoint")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
MAX_RETRY_AFTER = 60.0
RETRIED_STATUSES = frozenset({408, 409, 429})
KEEPALIVE = timedelta(seconds=30)
"""How long an idle connection to the provider is kept for the next request."""


STREAM_READ_BUFFER = 0
"""Bytes pyreqwest reads ahead of a streamed answer before handing the response over: it waits
until that many have come (or the body ended). Its default (64 KiB) held a local model's whole
answer back until it was complete, and even 1 KiB holds the first few tokens; 0 hands over
each piece as it arrives."""

COMPAT_PROBE_TIMEOUT = 5.0
"""Seconds ``OPENAGENT_LLM_COMPAT=auto`` gives the server to say what it is, all probes together."""

BUSY_STATUSES = frozenset({503})
"""A busy or loading server (llama.cpp's one slot, a model still loading): retried until the
request's total timeout, not only ``OPENAGENT_LLM_MAX_RETRIES`` times."""


class ChatEndpoint:
    """POSTs chat-completion bodies, retrying like the ``openai`` client.

    Timeouts: ``connect_timeout`` for the connection, ``timeout`` for the first byte of the
    answer and for each later read (a live but slow stream keeps going), ``total_timeout`` for a
    whole request with its retries. ``compat`` is ``OPENAGENT_LLM_COMPAT``: a dialect
    (:mod:`master.llm.compat`), or ``auto`` to ask the server once (:meth:`compat`).

    ``client`` is owned by the caller when given (tests); otherwise one is made on first use
    and closed by :meth:`aclose`.
    """

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None,
        timeout: float,
        max_retries: int,
        client: Client | None = None,
        connect_timeout: float | None = None,
        total_timeout: float | None = None,
        compat: CompatSetting | Compat = "openai",
    ) -> None:
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self._headers = {
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "User-Agent": "OpenAgent-master",
        }
        self._timeout = timedelta(seconds=timeout)
        self._connect_timeout = timedelta(seconds=connect_timeout or timeout)
        self._total_timeout = total_timeout
        self._max_retries = max_retries
        self._http = client
        self._owns_client = client is None
        self._compat: Compat | None = compat if isinstance(compat, Compat) else PROFILES.get(compat)
        self._detecting: asyncio.Lock | None = None

    async def aclose(self) -> None:
        if self._owns_client and self._http is not None:
            await self._http.close()
            self._http = None

    def _client(self) -> Client:
        if self._http is None:
            self._http = (
                ClientBuilder()
                .default_headers(self._headers)
                .connect_timeout(self._connect_timeout)
                .read_timeout(self._timeout)
                .pool_idle_timeout(KEEPALIVE)
                .build()
            )
        return self._http

    async def compat(self) -> Compat:
        """The server's dialect: the one configured, or (``auto``) what the server says, asked once
        within :data:`COMPAT_PROBE_TIMEOUT` and logged; :data:`~master.llm.compat.GENERIC` when it
        says nothing."""
        if self._compat is not None:
            return self._compat
        if self._detecting is None:
            self._detecting = asyncio.Lock()
        async with self._detecting:
            if self._compat is None:
                try:
                    async with asyncio.timeout(COMPAT_PROBE_TIMEOUT):
                        found = await detect(self.base_url, self._get_json)
                except TimeoutError:
                    found = GENERIC
                logger.info(
                    "LLM server %s: speaking its %s dialect (OPENAGENT_LLM_COMPAT=auto)%s",
                    self.base_url,
                    found.name,
                    f", context window {found.context_size} tokens" if found.context_size else "",
                )
                self._compat = found
        return self._compat

    async def _get_json(self, url: str) -> Any:
        response = await (
            self._client().get(url).timeout(timedelta(seconds=COMPAT_PROBE_TIMEOUT)).build().send()
        )
        if response.status >= 400:
            raise LLMError(f"HTTP {response.status}", code="llm_error")
        return orjson.loads(memoryview(await response.bytes()))

    async def post_json(self, url: str, body: Any) -> Any:
        """POSTs ``body`` to one of the server's side endpoints (``/tokenize``) and returns its
        JSON, within :data:`COMPAT_PROBE_TIMEOUT`; raises on any failure or non-2xx status."""
        request = (
            self._client().post(url).body_bytes(encode(body)).timeout(timedelta(seconds=COMPAT_PROBE_TIMEOUT))
        )
        response = await request.build().send()
        if response.status >= 400:
            raise LLMError(f"HTTP {response.status}", code="llm_error")
        return orjson.loads(memoryview(await response.bytes()))

    async def complete(self, model: str, body: bytes | Sequence[bytes]) -> dict[str, Any]:
        """One completion: the answer's JSON object."""
        response, _ = await self._send(model, body)
        try:
            raw = await response.bytes()
        except RequestError as exc:
            raise self._transport_error(model, exc) from exc
        try:
            data = orjson.loads(memoryview(raw))
        except ValueError as exc:
            raise LLMError(
                f"model {model!r} at {self.base_url} answered with invalid JSON: {bytes(raw[:200])!r}",
                code="llm_bad_response",
            ) from exc
        if not isinstance(data, dict):
            raise LLMError(
                f"model {model!r} at {self.base_url} answered with {bytes(raw[:200])!r}",
                code="llm_bad_response",
            )
        return data

    async def stream(self, model: str, body: bytes | Sequence[bytes]) -> AsyncIterator[dict[str, Any]]:
        """A streamed completion: each server-sent event's JSON object, until ``[DONE]``."""
        response, request = await self._send(model, body, streamed=True)
        try:
            async for data in _sse_data(response):
                if data == b"[DONE]":
                    break
                try:
                    chunk = orjson.loads(data)
                except ValueError as exc:
                    raise LLMError(
                        f"model {model!r} at {self.base_url} streamed invalid JSON: {data[:200]!r}",
                        code="llm_bad_response",
                    ) from exc
                if isinstance(chunk, dict) and chunk.get("error") is not None:
                    raise LLMError(
                        f"the LLM server {self.base_url} failed while streaming: {_error_message(chunk, '')}",
                        code="llm_error",
                    )
                if isinstance(chunk, dict):
                    yield chunk
        except RequestError as exc:
            raise self._transport_error(model, exc) from exc
        finally:
            await _close(request)

    async def _send(
        self, model: str, body: bytes | Sequence[bytes], *, streamed: bool = False
    ) -> tuple[Response, StreamRequest | None]:
        """The first response with a success status, after the retries the rules allow (``body``:
        its bytes, or its pieces, :func:`chat_pieces`); when ``streamed``, with its request, which
        the caller closes (:func:`_close`) once it has read the body."""
        client = self._client()
        data = body if isinstance(body, bytes) else b"".join(body)
        deadline = None if self._total_timeout is None else time.monotonic() + self._total_timeout
        attempt = 0
        while True:
            retries_left = self._max_retries - attempt
            request: StreamRequest | None = None
            left = None if deadline is None else deadline - time.monotonic()
            try:
                builder = client.post(self.url).body_bytes(data)
                if left is not None:
                    builder = builder.timeout(timedelta(seconds=max(left, 0.001)))
                if streamed:
                    streaming = builder.streamed_read_buffer_limit(STREAM_READ_BUFFER).build_streamed()
                    response = await streaming.__aenter__()
                    request = streaming
                else:
                    response = await builder.build().send()
                if response.status < 400:
                    return response, request
                try:
                    raw = await _body(response)
                finally:
                    await _close(request)
            except RequestError as exc:
                if retries_left <= 0:
                    raise self._transport_error(model, exc) from exc
                delay = _backoff(attempt)
                logger.info(
                    "LLM request to %s failed (%s), retrying in %.2f s", self.base_url, _reason(exc), delay
                )
            else:
                delay = _retry_delay(response, attempt)
                if response.status in BUSY_STATUSES and deadline is not None and _should_retry(response):
                    if time.monotonic() + delay >= deadline:  # busy: wait while time is left
                        raise LLMError(
                            f"the LLM server {self.base_url} stayed busy (HTTP 503) for "
                            f"{self._total_timeout:g} s: {_error_message(_json(raw), '')}",
                            code="llm_busy",
                        )
                elif retries_left <= 0 or not _should_retry(response):
                    raise self._status_error(model, response.status, raw)
                logger.info(
                    "LLM server %s answered HTTP %d, retrying in %.2f s",
                    self.base_url,
                    response.status,
                    delay,
                )
            attempt += 1
            await asyncio.sleep(delay)

    def _transport_error(self, model: str, exc: BaseException) -> LLMError:
        where = f"the LLM server {self.base_url} (model {model!r})"
        if isinstance(exc, TimeoutError):
            return LLMError(f"{where} timed out after retries: {_reason(exc)}", code="llm_timeout")
        return LLMError(f"cannot reach {where}: {_reason(exc)}", code="llm_unavailable")

    def _status_error(self, model: str, status: int, raw: bytes) -> LLMError:
        return _status_error(model, status, raw, self.base_url)


async def _close(request: StreamRequest | None) -> None:
    """Closes a streamed request's response, if there is one."""
    if request is not None:
        await request.__aexit__(None, None, None)


async def _body(response: Response) -> bytes:
    """A failed response's body, or nothing if it cannot be read."""
    try:
        return bytes(await response.bytes())
    except RequestError:
        return b""


async def _sse_data(response: Response) -> AsyncIterator[bytes]:
    """The payload of each ``data:`` line of a server-sent event stream (lines of any length)."""
    reader = response.body_reader
    pending = b""
    while (piece := await reader.read_chunk()) is not None:
        pending += bytes(piece)
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.startswith(b"data:"):
                yield line[5:].strip()
    if pending.startswith(b"data:"):
        yield pending[5:].strip()


def _should_retry(response: Response) -> bool:
    forced = response.get_header("x-should-retry")
    if forced == "true":
        return True
    if forced == "false":
        return False
    return response.status in RETRIED_STATUSES or response.status >= 500


def _backoff(attempt: int) -> float:
    delay = min(INITIAL_RETRY_DELAY * 2.0**attempt, MAX_RETRY_DELAY)
    return delay * (1 - 0.25 * random.random())


def _retry_delay(response: Response, attempt: int) -> float:
    """``retry-after-ms`` / ``retry-after`` when sensible (0-60 s), else the backoff."""
    wait: float | None = None
    millis = response.get_header("retry-after-ms")
    if millis is not None:
        try:
            wait = float(millis) / 1000
        except ValueError:
            wait = None
    after = response.get_header("retry-after")
    if wait is None and after is not None:
        try:
            wait = float(after)
        except ValueError:
            parsed = email.utils.parsedate_tz(after)
            if parsed is not None:
                wait = email.utils.mktime_tz(parsed) - time.time()
    if wait is not None and 0 < wait <= MAX_RETRY_AFTER:
        return wait
    return _backoff(attempt)


def _reason(exc: BaseException) -> str:
    """What went wrong, innermost cause last: ``connection error (error sending request for url
    (...): tcp connect error: Connection refused (os error 111))``."""
    if not isinstance(exc, DetailedPyreqwestError):
        return str(exc) or type(exc).__name__
    causes = [cause["message"] for cause in exc.details.get("causes") or ()]
    return f"{exc.message} ({': '.join(causes)})" if causes else exc.message


def _status_error(model: str, status: int, raw: bytes, server: str = DEFAULT_BASE_URL) -> LLMError:
    try:
        body: Any = orjson.loads(raw) if raw else None
    except ValueError:
        body = None
    message = _error_message(body, raw.decode("utf-8", "replace")[:500])
    if status == 401:
        return LLMError(
            f"the LLM server {server} rejected the API key; check OPENAI_API_KEY", code="llm_auth_failed"
        )
    if status == 429:
        return LLMError(
            f"the LLM server {server} is rate-limiting requests (429) after retries: {message}",
            code="llm_rate_limited",
        )
    if status == 404:
        return LLMError(
            f"the LLM server {server} does not know model {model!r}: {message}", code="llm_model_not_found"
        )
    if status == 400 and _overflow(message):
        return LLMError(
            f"the prompt does not fit the context window of model {model!r} at {server}: {message}",
            code="llm_context_overflow",
        )
    return LLMError(f"the LLM server {server} answered HTTP {status}: {message}", code="llm_error")


def _overflow(message: str) -> bool:
    """A refusal for a prompt longer than the model's window (the words of llama.cpp, vLLM, OpenAI)."""
    lowered = message.lower()
    return "context" in lowered and any(
        word in lowered
        for word in ("exceed", "too long", "maximum context", "context length", "context size")
    )


def _json(raw: bytes) -> Any:
    try:
        return orjson.loads(raw) if raw else None
    except ValueError:
        return None


def _error_message(body: Any, fallback: str) -> str:
    """``error.message`` of an OpenAI error body, else ``fallback``."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return fallback
