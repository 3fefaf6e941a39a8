"""The agent's span for a tool call, under the master's (when the master traces and OpenTelemetry is installed).

The master hands its tool-call span's W3C ``traceparent`` to the agent: in the ``tool_call``
frame (WebSocket) or the ``traceparent`` header (HTTP invocation). The SDK runs the handler
inside a span ``tool <name>`` that is a child of it, current while the handler runs, so the
handler's own spans (and instrumented libraries it uses) join the query's trace. Spans are
recorded by whatever tracer provider the agent's process configured
(``opentelemetry.trace.set_tracer_provider``, or ``opentelemetry-instrument``); without
one, or without the ``opentelemetry-api`` package (the ``tracing`` extra), nothing happens.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def tool_span(agent_id: str, tool_name: str, call_id: str, traceparent: str | None) -> Iterator[None]:
    if not traceparent:
        yield
        return
    try:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        yield
        return
    parent = TraceContextTextMapPropagator().extract({"traceparent": traceparent})
    tracer = trace.get_tracer("openagent.sdk")
    attributes = {"openagent.agent_id": agent_id, "openagent.tool": tool_name, "openagent.call_id": call_id}
    with tracer.start_as_current_span(
        f"tool {tool_name}", context=parent, kind=SpanKind.SERVER, attributes=attributes
    ):
        yield
