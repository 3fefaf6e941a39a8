"""The master's Prometheus series, served at ``GET /metrics`` (behind ``OPENAGENT_API_KEY`` like every route).

Counters and histograms are updated where things happen (:class:`Metrics` is handed to the
query service, the orchestrator and the LLM wrapper); the gauges of live state (connected
agents, calls in flight, collaboration sessions) are read from the master's objects at
scrape time, so they cannot drift. Each app has its own registry, so several masters in one
process (tests) do not mix their series.

Series (all prefixed ``openagent_``):

=============================================  =========  ===============================
name                                           type       labels
=============================================  =========  ===============================
``queries_total``                              counter    ``outcome`` (``completed``, ``stopped``, ``awaiting_approval``, or the error code)
``query_duration_seconds``                     histogram  ``outcome``
``approvals_total``                            counter    ``outcome`` (``approved``, ``edited``, ``rejected``, ``expired``)
``approval_decision_seconds``                  histogram  ``outcome`` (seconds from held to decided)
``tool_calls_total``                           counter    ``agent_id``, ``tool``, ``outcome`` (``success``, ``failed``, ``timeout``, ``unavailable``, ``disconnected``)
``tool_call_duration_seconds``                 histogram  ``agent_id``, ``tool``, ``outcome``
``llm_calls_total``                            counter    ``model``, ``outcome`` (``success`` or the error code)
``llm_tokens_total``                           counter    ``model``
``llm_request_tokens``                         histogram  ``model``, ``kind`` (``prompt``, ``completion``: per request, as reported or counted)
``llm_token_ratio``                            gauge      ``model`` (the model's tokens per token the master counts, where its server's tokenizer calibrated it)
``summaries_rejected_total``                   counter    ``reason`` (``lost_facts``: a summary that dropped what it covered, the turns kept)
``llm_call_duration_seconds``                  histogram  ``model``
``redis_errors_total``                         counter    ``error`` (the redis-py exception class)
``audit_events_total``                        counter    ``action`` (``key_created``, ``key_revoked``, ``module_saved``...: :mod:`master.access.audit`)
``collaborations_total``                       counter    ``reason`` (how each ended: ``completed``, ``timeout``...)
``connected_agents``                           gauge      ``transport`` (``websocket``, ``http``)
``tool_calls_in_flight``                       gauge
``collaboration_sessions_active``              gauge
=============================================  =========  ===============================
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import redis.asyncio as aioredis
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import NoScriptError, RedisError

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

_DECISION_SECONDS = (
    1.0,
    5.0,
    15.0,
    30.0,
    60.0,
    300.0,
    900.0,
    1800.0,
    3600.0,
    4 * 3600.0,
    86400.0,
    7 * 86400.0,
)
"""A person's time: seconds to a week."""

_TOKENS = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
"""Tokens of one request: a short answer to a full long-context window."""

CONTENT_TYPE = CONTENT_TYPE_LATEST


Reader = Callable[[], dict[tuple[str, ...], float]]


class _Live(Collector):
    """Series read from the master's objects when scraped."""

    def __init__(self) -> None:
        self.series: list[
            tuple[type[GaugeMetricFamily | CounterMetricFamily], str, str, list[str], Reader]
        ] = []

    def collect(self) -> Iterator[Metric]:
        for kind, name, documentation, labels, read in self.series:
            family = kind(name, documentation, labels=labels)
            for values, value in read().items():
                family.add_metric(list(values), value)
            yield family

    def describe(self) -> Iterator[Metric]:
        for kind, name, documentation, labels, _ in self.series:
            yield kind(name, documentation, labels=labels)


def _memoized(
    metric: Any, make: Callable[..., Any], values: tuple[object, ...], named: dict[str, object]
) -> Any:
    """``metric``'s child for positional label ``values``, kept in its ``_memo`` dict:
    prometheus_client's ``labels()`` checks, converts and locks on every call, and the master asks
    for the same few children per query. Keyword labels go to ``make`` (the real ``labels``) as
    they are. The subclasses' ``labels`` read ``_memo`` first themselves (one call less)."""
    if named:
        return make(*values, **named)
    memo: dict[tuple[object, ...], Any] = metric.__dict__.setdefault("_memo", {})
    child = memo.get(values)
    if child is None:
        child = memo[values] = make(*values)
    return child


class _Counter(Counter):
    """A counter whose children are memoized (:func:`_memoized`)."""

    _memo: dict[tuple[object, ...], _Counter]

    def labels(self, *values: object, **named: object) -> _Counter:
        if not named:
            try:
                return self._memo[values]
            except (AttributeError, KeyError):  # the first child, or a new one
                pass
        child: _Counter = _memoized(self, super().labels, values, named)
        return child


class _Histogram(Histogram):
    """A histogram whose children are memoized (:func:`_memoized`)."""

    _memo: dict[tuple[object, ...], _Histogram]

    def labels(self, *values: object, **named: object) -> _Histogram:
        if not named:
            try:
                return self._memo[values]
            except (AttributeError, KeyError):  # the first child, or a new one
                pass
        child: _Histogram = _memoized(self, super().labels, values, named)
        return child


class Metrics:
    """Every series of one master."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.queries = _Counter("openagent_queries", "Queries by outcome.", ["outcome"], registry=r)
        self.approvals = _Counter(
            "openagent_approvals",
            "Decided tool-call approvals by outcome (approved, edited, rejected, expired).",
            ["outcome"],
            registry=r,
        )
        self.approval_seconds = _Histogram(
            "openagent_approval_decision_seconds",
            "Seconds from a tool call held for approval to its decision, by outcome (an expired one: its TTL).",
            ["outcome"],
            buckets=_DECISION_SECONDS,
            registry=r,
        )
        self.query_seconds = _Histogram(
            "openagent_query_duration_seconds",
            "Query duration by outcome.",
            ["outcome"],
            buckets=_SECONDS,
            registry=r,
        )
        self.tool_calls = _Counter(
            "openagent_tool_calls",
            "Tool calls by agent, tool and outcome.",
            ["agent_id", "tool", "outcome"],
            registry=r,
        )
        self.tool_call_seconds = _Histogram(
            "openagent_tool_call_duration_seconds",
            "Tool call duration by agent, tool and outcome.",
            ["agent_id", "tool", "outcome"],
            buckets=_SECONDS,
            registry=r,
        )
        self.llm_calls = _Counter(
            "openagent_llm_calls", "LLM completions by model and outcome.", ["model", "outcome"], registry=r
        )
        self.llm_tokens = _Counter(
            "openagent_llm_tokens", "Tokens the LLM reported, by model.", ["model"], registry=r
        )
        self.llm_request_tokens = _Histogram(
            "openagent_llm_request_tokens",
            "Tokens of each LLM request, by model and kind (prompt, completion).",
            ["model", "kind"],
            buckets=_TOKENS,
            registry=r,
        )
        self.summaries_rejected = _Counter(
            "openagent_summaries_rejected",
            "Summaries not stored because they lost facts of the turns they cover (the turns stay), by reason.",
            ["reason"],
            registry=r,
        )
        self.tool_call_repairs = _Counter(
            "openagent_llm_tool_call_repairs",
            "Tool calls of the model that needed a repair, by kind (text_call, bad_json, unknown_tool, "
            "bad_arguments).",
            ["kind"],
            registry=r,
        )
        self.llm_seconds = _Histogram(
            "openagent_llm_call_duration_seconds",
            "LLM completion latency by model.",
            ["model"],
            buckets=_SECONDS,
            registry=r,
        )
        self.redis_errors = _Counter(
            "openagent_redis_errors", "Failed Redis operations by error.", ["error"], registry=r
        )
        self.audit_events = _Counter(
            "openagent_audit_events",
            "Administrative actions (keys, saved modules, YAML agents, workspaces, Pods) by action.",
            ["action"],
            registry=r,
        )
        self._live = _Live()
        r.register(self._live)

    def summary_rejected(self, reason: str) -> None:
        """A summary was not stored (:mod:`master.conversation.context`)."""
        self.summaries_rejected.labels(reason).inc()

    def live(
        self,
        name: str,
        documentation: str,
        read: Callable[[], float | dict[tuple[str, ...], float]],
        labels: list[str] | None = None,
        *,
        counter: bool = False,
    ) -> None:
        """A gauge (or a counter kept elsewhere) read by ``read()`` at scrape time: a number, or
        ``{label values: number}``."""

        def values() -> dict[tuple[str, ...], float]:
            value = read()
            return value if isinstance(value, dict) else {(): float(value)}

        kind = CounterMetricFamily if counter else GaugeMetricFamily
        self._live.series.append((kind, name, documentation, labels or [], values))

    def render(self) -> bytes:
        """The exposition text of every series."""
        return generate_latest(self.registry)


def count_redis_errors(client: aioredis.Redis, errors: Counter) -> None:
    """Count every failed Redis operation of ``client`` in ``errors`` (label: the exception class).

    Its pool makes connections of a subclass of its connection class whose connect, send and
    read count what they raise (a script missing from Redis's cache is not counted: redis-py
    loads it and retries). Call before the client's first command.
    """
    pool = client.connection_pool
    base: type[AbstractConnection] = pool.connection_class

    def counted(method_name: str) -> Any:
        method = getattr(base, method_name)

        async def wrapper(self: AbstractConnection, *args: Any, **kwargs: Any) -> Any:
            if getattr(self, "_counting", False):  # inside connect(): the outer call counts
                return await method(self, *args, **kwargs)
            self._counting = True  # type: ignore[attr-defined]
            try:
                return await method(self, *args, **kwargs)
            except NoScriptError:
                raise
            except (RedisError, OSError) as exc:
                errors.labels(type(exc).__name__).inc()
                raise
            finally:
                self._counting = False  # type: ignore[attr-defined]

        return wrapper

    pool.connection_class = type(
        f"Counted{base.__name__}",
        (base,),
        {name: counted(name) for name in ("connect", "send_packed_command", "read_response")},
    )
