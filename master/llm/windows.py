"""How much context a model may be sent: its window, less its answer, with a margin.

A model's window is, in order: ``OPENAGENT_LLM_CONTEXT_WINDOWS`` (``model=tokens`` pairs), what
the server reports (llama.cpp's ``/props``, vLLM's ``max_model_len``: :mod:`master.llm.compat`),
or unknown. The master counts tokens with tiktoken's ``cl100k_base``, which runs up to 1.9x low
against a small model's own tokenizer (SmolLM2: 169 counted for 306 real on a short prompt, 1,299
for 1,927 with 20 tools), so the room left once the answer's bound
(``OPENAGENT_LLM_MAX_TOKENS``) and the chat template's framing are taken off is divided by
:data:`COUNT_MARGIN`. The context budget is that, never above ``ORCHESTRATOR_CONTEXT_MAX_TOKENS``;
with the window unknown it is ``ORCHESTRATOR_CONTEXT_MAX_TOKENS``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

logger = logging.getLogger("master.llm.windows")

COUNT_MARGIN = 1.5
"""How much larger a prompt may be in the model's tokens than in ``cl100k_base``'s."""

TEMPLATE_TOKENS = 256
"""Tokens a chat template adds around the messages and tools (special tokens, tool preamble)."""

MIN_BUDGET = 512
"""The smallest context budget given, however small the window (a query must fit somewhere)."""

Reported = Callable[[], Awaitable[int | None]]
"""Asks the server for its window (``None``: it does not say)."""


class ContextWindows:
    """The context budget per model (see the module docstring)."""

    def __init__(
        self,
        *,
        default_budget: int,
        output_tokens: int,
        configured: Mapping[str, int] | None = None,
        reported: Reported | None = None,
    ) -> None:
        self._default = default_budget
        self._output = output_tokens
        self._configured = dict(configured or {})
        self._reported = reported

    async def window(self, model: str) -> int | None:
        """The model's window in its own tokens, if known."""
        if model in self._configured:
            return self._configured[model]
        if self._reported is not None:
            return await self._reported()
        return None

    async def budget(self, model: str) -> int:
        """Tokens (as the master counts them) of system prompt, history, query and tools that
        ``model`` may be sent."""
        window = await self.window(model)
        if window is None:
            return self._default
        room = int((window - self._output - TEMPLATE_TOKENS) / COUNT_MARGIN)
        return max(MIN_BUDGET, min(self._default, room))
