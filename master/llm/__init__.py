"""The language model the master talks to: the seam, its OpenAI-compatible client, token counts.

- :mod:`~master.llm.model`: the :class:`~master.llm.model.ChatModel` seam, its messages and
  results, and :class:`~master.llm.model.OpenAIChatModel`, the implementation every provider uses.
- :mod:`~master.llm.chat_endpoint`: the OpenAI-compatible chat API on pyreqwest (retries, streaming).
- :mod:`~master.llm.chat_body`: a request's body as JSON bytes, in pieces reused between rounds.
- :mod:`~master.llm.tokens`: offline token counting (``cl100k_base``).

It knows nothing of agents, sessions or queries: the orchestrator, the session context, the
builder and the metered wrapper in :mod:`master.observability.chat` all sit above it.
"""
