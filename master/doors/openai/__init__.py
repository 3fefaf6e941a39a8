"""The OpenAI-compatible API (``/v1/models``, ``/v1/chat/completions``, ``/v1/responses``): any
OpenAI client, chat UI or agent framework can use the hub as a model (chat completions:
:mod:`~master.doors.openai.door`; the Responses API: :mod:`~master.doors.openai.responses`)."""

from master.doors.openai.door import OpenAIDoor, error_response
from master.doors.openai.wire import SESSION_HEADER

__all__ = ["SESSION_HEADER", "OpenAIDoor", "error_response"]
