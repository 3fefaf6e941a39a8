"""The OpenAgent master: WebSocket hub, HTTP API, registry, sessions and LLM orchestrator.

Run it with ``python -m master`` (uvicorn with the server limits of the settings).
"""
