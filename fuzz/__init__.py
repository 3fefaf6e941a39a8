"""``python -m fuzz`` (``make fuzz``): fuzz a running master over HTTP and WebSocket, on loopback.

- :mod:`~fuzz.harness`: starts the master (``python -m master``, with an API key) and a scripted
  LLM on loopback, or targets a master given by URL and key.
- :mod:`~fuzz.http`: schemathesis over the master's OpenAPI document, with the key; a hook
  (:mod:`~fuzz.hooks`) rewrites every agent URL to a dead loopback port and records every status.
- :mod:`~fuzz.ws`: well-behaved agents run a query loop while a fuzzer sends malformed, oversized,
  deeply nested, wrong-typed and spoofed frames.
- :mod:`~fuzz.cli`: runs both at once for a bounded time and reports 5xx responses, crashes,
  dropped well-behaved connections and failed loop queries; exits 1 on any of them.
"""
