"""How much context a model may be sent: its window, less its answer, with a margin.

A model's window is, in order: ``OPENAGENT_LLM_CONTEXT_WINDOWS`` (``model=tokens`` pairs), what
the server reports (llama.cpp's ``/props``, vLLM's ``max_model_len``: :mod:`master.llm.compat`),
or unknown. The master counts tokens with tiktoken's ``cl100k_base``, which runs up to 1.9x low
against a small model's own tokenizer (SmolLM2: 169 counted for 306 real on a short prompt, 1,299
for 1,927 with 20 tools). So the room left once the answer's bound (``OPENAGENT_LLM_MAX_TOKENS``)
and the chat template's framing are taken off is divided by a factor:

- where the server offers its tokenizer (llama-server's and vLLM's ``POST /tokenize``,
  llama-cpp-python's ``POST /extras/tokenize``), the master calibrates once per model: the
  server tokenizes a fixed sample (the orchestrator's system prompt and :data:`SAMPLE_TOOLS`),
  the master counts the same text, and the factor is the server's count over the master's, plus
  :data:`CALIBRATED_MARGIN` (never below 1); the ratio is logged and kept (a server that could
  not be reached is asked again at the next query; one that has no tokenizer is not);
- else (Ollama, the OpenAI API, a tokenizer that does not answer) :data:`COUNT_MARGIN`.

The context budget is that, never above ``ORCHESTRATOR_CONTEXT_MAX_TOKENS``; with the window
unknown it is ``ORCHESTRATOR_CONTEXT_MAX_TOKENS``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping

from master.errors import LLMError
from master.llm.chat_endpoint import ChatEndpoint
from master.llm.compat import token_count, tokenize_request
from master.llm.tokens import count_text

logger = logging.getLogger("master.llm.windows")

COUNT_MARGIN = 1.5
"""How much larger a prompt may be in the model's tokens than in ``cl100k_base``'s, when the
server's tokenizer is not known."""

CALIBRATED_MARGIN = 0.1
"""The share added to a calibrated ratio (the sample is not the prompt: a prompt's mix of prose,
JSON and names may tokenize a little worse)."""

TEMPLATE_TOKENS = 256
"""Tokens a chat template adds around the messages and tools (special tokens, tool preamble)."""

MIN_BUDGET = 512
"""The smallest context budget given, however small the window (a query must fit somewhere)."""

SAMPLE_TOOLS = [
    {
        "name": "weather-agent__get_weather",
        "description": "The current weather of a city: temperature in degrees Celsius, sky, wind.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city, e.g. 'Paris'"}},
            "required": ["city"],
        },
    },
    {
        "name": "calculator__multiply",
        "description": "Multiply two numbers and return the product.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
]
"""Tool definitions in the calibration sample, as the master sends them (JSON weighs differently
from prose in most tokenizers)."""

Reported = Callable[[], Awaitable[int | None]]
"""Asks the server for its window (``None``: it does not say)."""

Tokenize = Callable[[str, str], Awaitable[int | None]]
"""``(model, text)``: the tokens of ``text`` in ``model``'s own tokenizer (``None``: not known)."""


def calibration_sample(system_prompt: str) -> str:
    """The text tokenized by both sides: the system prompt and :data:`SAMPLE_TOOLS`."""
    tools = "\n".join(json.dumps(tool, separators=(",", ":")) for tool in SAMPLE_TOOLS)
    return f"{system_prompt}\n{tools}"


def server_tokenizer(endpoint: ChatEndpoint) -> Tokenize:
    """Counts with the tokenize endpoint of ``endpoint``'s server (the first of its dialect's
    :attr:`~master.llm.compat.Compat.tokenizers` that answers); ``None`` when none does."""

    async def tokenize(model: str, text: str) -> int | None:
        unreachable: Exception | None = None
        for tokenizer in (await endpoint.compat()).tokenizers:
            url, body = tokenize_request(tokenizer, endpoint.base_url, model, text)
            try:
                count = token_count(await endpoint.post_json(url, body))
            except LLMError as exc:  # it answered, with an error status: not this endpoint
                logger.debug("tokenize at %s: %s", url, exc)
                continue
            except Exception as exc:  # not reached, or not JSON: asked again at the next query
                logger.debug("tokenize at %s: %s", url, exc)
                unreachable = exc
                continue
            if count is not None:
                return count
        if unreachable is not None:
            raise unreachable
        return None

    return tokenize


class ContextWindows:
    """The context budget per model (see the module docstring)."""

    def __init__(
        self,
        *,
        default_budget: int,
        output_tokens: int,
        configured: Mapping[str, int] | None = None,
        reported: Reported | None = None,
        tokenize: Tokenize | None = None,
        sample: str = "",
    ) -> None:
        self._default = default_budget
        self._output = output_tokens
        self._configured = dict(configured or {})
        self._reported = reported
        self._tokenize = tokenize if sample else None
        self._sample = sample
        self._ratios: dict[str, float | None] = {}
        self._calibrating = asyncio.Lock()

    async def window(self, model: str) -> int | None:
        """The model's window in its own tokens, if known."""
        if model in self._configured:
            return self._configured[model]
        if self._reported is not None:
            return await self._reported()
        return None

    async def ratio(self, model: str) -> float | None:
        """The model's tokens per ``cl100k_base`` token, as its server counted the sample (asked
        once per model; ``None``: the server offers no tokenizer, or could not be reached)."""
        if self._tokenize is None:
            return None
        if model in self._ratios:
            return self._ratios[model]
        async with self._calibrating:
            if model in self._ratios:
                return self._ratios[model]
            ours = count_text(self._sample)
            try:
                theirs = await self._tokenize(model, self._sample)
            except Exception as exc:  # not kept: the next query asks again
                logger.warning(
                    "tokenizer of %s failed (%s): counting with a margin of %g", model, exc, COUNT_MARGIN
                )
                return None
            self._ratios[model] = self._ratio(model, theirs, ours)
        return self._ratios[model]

    def ratios(self) -> dict[str, float]:
        """The calibrated ratios, by model (the models whose server has a tokenizer)."""
        return {model: ratio for model, ratio in self._ratios.items() if ratio is not None}

    def _ratio(self, model: str, theirs: int | None, ours: int) -> float | None:
        if not theirs or not ours:
            logger.info(
                "no tokenizer for %s on its server: counting with a margin of %g", model, COUNT_MARGIN
            )
            return None
        ratio = theirs / ours
        logger.info(
            "tokenizer of %s: %d tokens for the master's %d (ratio %.3f); counting with a factor of %.3f",
            model,
            theirs,
            ours,
            ratio,
            self._factor(ratio),
        )
        return ratio

    @staticmethod
    def _factor(ratio: float | None) -> float:
        return COUNT_MARGIN if ratio is None else max(1.0, ratio * (1 + CALIBRATED_MARGIN))

    async def budget(self, model: str) -> int:
        """Tokens (as the master counts them) of system prompt, history, query and tools that
        ``model`` may be sent."""
        room = await self._room(model)
        return self._default if room is None else max(MIN_BUDGET, min(self._default, room))

    async def window_bound(self, model: str) -> bool:
        """Whether ``model``'s budget is set by its window (a larger request would be refused),
        not by ``ORCHESTRATOR_CONTEXT_MAX_TOKENS``."""
        room = await self._room(model)
        return room is not None and room < self._default

    async def _room(self, model: str) -> int | None:
        window = await self.window(model)
        if window is None:
            return None
        factor = self._factor(await self.ratio(model))
        return int((window - self._output - TEMPLATE_TOKENS) / factor)
