"""The OpenAgent master: WebSocket hub, HTTP API, registry, sessions and LLM orchestrator.

Run it with ``uvicorn master.app:app``.
"""
