"""What a team running the master sees: metrics, logs and traces.

- :mod:`~master.observability.metrics`: the Prometheus series served at ``GET /metrics``.
- :mod:`~master.observability.logs`: the log format switch (``OPENAGENT_LOG_FORMAT``) and the
  per-query / per-call context every log line carries.
- :mod:`~master.observability.redaction`: the filter on every handler that keeps secrets,
  forged lines and floods out of the logs.
- :mod:`~master.observability.tracing`: optional OpenTelemetry spans (off unless the ``OTEL_*``
  variables ask for an exporter) and the ``traceparent`` handed to agents.

Nothing here changes what the master does; each part is cheap when unused.
"""
