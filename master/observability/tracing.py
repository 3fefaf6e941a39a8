"""Optional OpenTelemetry tracing: one trace per query, a span per LLM round and per tool call.

Off by default, and free when off (no OpenTelemetry import). It is on when the ``tracing``
extra is installed (``pip install 'openagent[master,tracing]'``) and the standard variables
ask for an exporter: ``OTEL_TRACES_EXPORTER=otlp`` (or ``console``), or an
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``; never when
``OTEL_SDK_DISABLED=true``. The OTLP exporter reads its own ``OTEL_EXPORTER_OTLP_*``
settings (endpoint, headers, protocol ``http/protobuf``); ``OTEL_SERVICE_NAME`` names the
service (default ``openagent-master``).

Spans: ``query`` (the whole query: ``openagent.query_id``, ``openagent.session_id``), under it
``llm <model>`` for each completion and ``tool <agent>.<tool>`` for each call
(``openagent.call_id``). The tool call's context goes to the agent: in the ``traceparent``
header of an HTTP invocation and in the ``traceparent`` field of a WebSocket ``tool_call``;
the SDK starts the agent's span under it, so the agent's work joins the query's trace.
With several masters, a call to an agent of another master carries the ``traceparent`` in its
cluster message; the master holding the agent runs it under a ``remote tool <agent>.<tool>``
span continuing that context (:func:`continued`), so the agent's span is in the caller's trace.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from master.settings import Settings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

logger = logging.getLogger("master.observability.tracing")

_tracer: Tracer | None = None
"""The master's tracer; ``None`` while tracing is off (the helpers below then do nothing)."""


def enabled(settings: Settings) -> bool:
    """Whether the ``OTEL_*`` settings ask for traces."""
    if settings.otel_sdk_disabled:
        return False
    exporter = (settings.otel_traces_exporter or "").strip().lower()
    if exporter == "none":
        return False
    return bool(
        exporter or settings.otel_exporter_otlp_endpoint or settings.otel_exporter_otlp_traces_endpoint
    )


def active() -> bool:
    """Whether this process traces now (a tracer is installed): lets a hot path skip building a
    span's name and attributes that :func:`continued` would drop."""
    return _tracer is not None


def install(provider: Any) -> None:
    """Trace with ``provider`` (an OpenTelemetry ``TracerProvider``), or stop tracing with ``None``."""
    global _tracer
    _tracer = None if provider is None else provider.get_tracer("openagent.master")


def setup(settings: Settings) -> TracerProvider | None:
    """Start tracing when the settings ask for it; the provider to shut down at exit, or ``None``."""
    if not enabled(settings):
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
    except ImportError:
        logger.warning(
            "OTEL_* variables ask for traces but OpenTelemetry is not installed: "
            "pip install 'openagent[master,tracing]'; tracing stays off"
        )
        return None
    kind = (settings.otel_traces_exporter or "otlp").strip().lower()
    exporter: SpanExporter
    if kind == "console":
        exporter = ConsoleSpanExporter()
    elif kind == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            logger.warning(
                "OTEL_TRACES_EXPORTER=otlp needs opentelemetry-exporter-otlp-proto-http: "
                "pip install 'openagent[master,tracing]'; tracing stays off"
            )
            return None
        exporter = OTLPSpanExporter()
    else:
        logger.warning(
            "OTEL_TRACES_EXPORTER=%r is not supported (otlp, console, none); tracing stays off", kind
        )
        return None
    from opentelemetry import trace

    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):  # the process set one up (opentelemetry-instrument): use it
        install(current)
        logger.info("tracing on, with the process's tracer provider")
        return None
    provider = TracerProvider(resource=Resource.create({"service.name": settings.otel_service_name}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # also FastAPI's request spans, which then root each trace
    install(provider)
    logger.info("tracing on: %s exporter, service %r", kind, settings.otel_service_name)
    return provider


_OFF: AbstractContextManager[None] = nullcontext()
"""What :func:`span` gives while tracing is off: reusable, so a query makes no generator per span."""


def span(
    name: str, attributes: Mapping[str, str | int | float | bool] | None = None
) -> AbstractContextManager[Span | None]:
    """A span around the block, current inside it; ``None`` while tracing is off."""
    if _tracer is None:
        return _OFF
    return _span(_tracer, name, attributes)


@contextmanager
def _span(
    tracer: Tracer, name: str, attributes: Mapping[str, str | int | float | bool] | None
) -> Iterator[Span | None]:
    with tracer.start_as_current_span(name, attributes=attributes) as current:
        yield current


@contextmanager
def continued(
    parent: str | None, name: str, attributes: Mapping[str, str | int | float | bool] | None = None
) -> Iterator[Span | None]:
    """A span under the remote ``parent`` (a W3C ``traceparent``, e.g. another master's tool-call
    span), current inside the block: the work it covers joins that trace. A new trace when
    ``parent`` is ``None`` or invalid; ``None`` while tracing is off."""
    if _tracer is None:
        yield None
        return
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    context = TraceContextTextMapPropagator().extract({"traceparent": parent}) if parent else None
    with _tracer.start_as_current_span(name, context=context, attributes=attributes) as current:
        yield current


def set_attribute(current: Span | None, key: str, value: str | int | float | bool) -> None:
    if current is not None:
        current.set_attribute(key, value)


def set_current_attribute(key: str, value: str | int | float | bool) -> None:
    """Set an attribute on the current span (when tracing)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    trace.get_current_span().set_attribute(key, value)


def traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span, to hand to an agent; ``None`` when not tracing."""
    if _tracer is None:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier.get("traceparent")


def current_trace_id() -> str | None:
    """The current trace's id in hex (for log lines), ``None`` when not tracing."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else None
