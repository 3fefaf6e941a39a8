"""Any :class:`~master.llm.model.ChatModel`, measured: calls, tokens and latency by model, a span per call."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from master.errors import LLMError
from master.llm.model import ChatMessage, ChatModel, ChatResult, LLMOptions, TokenSink
from master.observability import tracing
from master.observability.metrics import Metrics


class InstrumentedChatModel:
    """Wraps the master's model (the orchestrator's rounds and the summarizer alike)."""

    def __init__(self, inner: ChatModel, metrics: Metrics) -> None:
        self.inner = inner
        self._metrics = metrics

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        on_token: TokenSink | None = None,
        options: LLMOptions | None = None,
    ) -> ChatResult:
        metrics = self._metrics
        started = time.perf_counter()
        with tracing.span(f"llm {model}", {"gen_ai.request.model": model}) as span:
            try:
                result = await self.inner.complete(
                    model=model, messages=messages, tools=tools, on_token=on_token, options=options
                )
            except LLMError as exc:
                metrics.llm_calls.labels(model, exc.code).inc()
                tracing.set_attribute(span, "error.type", exc.code)
                raise
            finally:
                metrics.llm_seconds.labels(model).observe(time.perf_counter() - started)
            metrics.llm_calls.labels(model, "success").inc()
            if result.prompt_tokens or result.completion_tokens:
                metrics.llm_request_tokens.labels(model, "prompt").observe(result.prompt_tokens)
                metrics.llm_request_tokens.labels(model, "completion").observe(result.completion_tokens)
            if result.total_tokens:
                metrics.llm_tokens.labels(model).inc(result.total_tokens)
                tracing.set_attribute(span, "gen_ai.usage.total_tokens", result.total_tokens)
            return result
