"""Which chat models the orchestrator may use, by the spec's precedence rules."""

from __future__ import annotations

from typing import Any

from master.settings import Settings

DEFAULT_CHAT_MODELS = ("gpt-4o-mini", "gpt-4o", "gpt-4.1-mini", "gpt-4.1")
"""Offered when neither OPENAGENT_CHAT_MODELS nor the legacy allowlist is set."""
DEMO_MODEL = "openagent-demo"
"""The demo LLM's model id (``openagent.testing.DEMO_MODEL``): ``scripts/run.sh`` sets
``OPENAGENT_CHAT_MODELS`` to it when it starts the demo LLM, so that no one takes it for a model."""
MODEL_LABELS = {DEMO_MODEL: "demo LLM, not a model"}
"""How user interfaces name a model id, where the id alone would mislead."""


def _split(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


class ModelCatalog:
    """The models the orchestrator may use, by the spec's precedence rules.

    - ``OPENAGENT_CHAT_MODELS`` is the single global list; its first entry is the default.
    - When it is unset, the legacy ``ORCHESTRATOR_MODEL_ALLOWLIST`` (extras merged with
      ``ORCHESTRATOR_MODEL``) is used, else a built-in list (default ``gpt-4o-mini``).
    - ``ORCHESTRATOR_MODEL`` overrides the default; an id outside the list is prepended.
    - ``AGENT_GENERATOR_MODEL`` defaults to the orchestrator default; an id outside the list is prepended.
    """

    def __init__(self, settings: Settings) -> None:
        models = _split(settings.openagent_chat_models)
        if not models:
            legacy = _split(settings.orchestrator_model_allowlist)
            first = settings.orchestrator_model or DEFAULT_CHAT_MODELS[0]
            models = [first, *legacy] if legacy else list(DEFAULT_CHAT_MODELS)
        models = list(dict.fromkeys(models))
        default = settings.orchestrator_model or models[0]
        if default not in models:
            models.insert(0, default)
        generator = settings.agent_generator_model or default
        if generator not in models:
            models.insert(0, generator)
        self.allowed_models: list[str] = models
        self.default_model: str = default
        self.generator_model: str = generator
        self.summarizer_model: str = settings.summarizer_model or default

    def resolve(self, requested: str | None) -> str:
        """The model for a request; raises ``ValueError`` naming the allowed models."""
        if requested is None:
            return self.default_model
        if requested not in self.allowed_models:
            raise ValueError(
                f"model {requested!r} is not allowed; allowed models: {', '.join(self.allowed_models)}"
            )
        return requested

    @property
    def is_demo(self) -> bool:
        """Whether the orchestrator's default model is the demo LLM."""
        return self.default_model == DEMO_MODEL

    def label(self, model: str) -> str:
        """``model`` as a user should read it: ``openagent-demo (demo LLM, not a model)``."""
        return f"{model} ({MODEL_LABELS[model]})" if model in MODEL_LABELS else model

    def as_dict(self) -> dict[str, Any]:
        """``default_model``, ``allowed_models`` and, for ids that need one, ``model_labels``."""
        labels = {model: MODEL_LABELS[model] for model in self.allowed_models if model in MODEL_LABELS}
        return {
            "default_model": self.default_model,
            "allowed_models": list(self.allowed_models),
            **({"model_labels": labels} if labels else {}),
        }
