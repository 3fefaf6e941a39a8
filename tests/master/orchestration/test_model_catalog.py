"""The spec's model precedence rules, one test per rule."""

from __future__ import annotations

import pytest

from master.orchestration.model_catalog import DEFAULT_CHAT_MODELS, ModelCatalog
from master.settings import Settings


def catalog(**env: str) -> ModelCatalog:
    return ModelCatalog(Settings(_env_file=None, **env))  # type: ignore[arg-type]


def test_defaults() -> None:
    c = catalog()
    assert c.default_model == "gpt-4o-mini"
    assert c.allowed_models == list(DEFAULT_CHAT_MODELS)
    assert c.generator_model == c.summarizer_model == "gpt-4o-mini"


def test_chat_models_list_first_is_default() -> None:
    c = catalog(openagent_chat_models="llama3.1, qwen2.5 ,")
    assert c.allowed_models == ["llama3.1", "qwen2.5"]
    assert c.default_model == "llama3.1"


def test_orchestrator_model_in_list_is_default() -> None:
    c = catalog(openagent_chat_models="a,b", orchestrator_model="b")
    assert (c.default_model, c.allowed_models) == ("b", ["a", "b"])


def test_orchestrator_model_outside_list_is_prepended() -> None:
    c = catalog(openagent_chat_models="a,b", orchestrator_model="c")
    assert (c.default_model, c.allowed_models) == ("c", ["c", "a", "b"])


def test_generator_model_defaults_to_orchestrator_and_is_prepended_when_outside() -> None:
    assert catalog(openagent_chat_models="a,b", orchestrator_model="b").generator_model == "b"
    c = catalog(openagent_chat_models="a,b", agent_generator_model="g")
    assert c.generator_model == "g" and c.allowed_models == ["g", "a", "b"] and c.default_model == "a"


def test_legacy_allowlist_only_when_chat_models_unset() -> None:
    c = catalog(orchestrator_model="m", orchestrator_model_allowlist="x,y")
    assert (c.default_model, c.allowed_models) == ("m", ["m", "x", "y"])
    c = catalog(orchestrator_model_allowlist="x,y")
    assert (c.default_model, c.allowed_models) == ("gpt-4o-mini", ["gpt-4o-mini", "x", "y"])
    c = catalog(openagent_chat_models="a", orchestrator_model_allowlist="x,y")
    assert c.allowed_models == ["a"]


def test_summarizer_model() -> None:
    assert catalog(summarizer_model="s").summarizer_model == "s"


def test_resolve() -> None:
    c = catalog(openagent_chat_models="a,b")
    assert c.resolve(None) == "a" and c.resolve("b") == "b"
    with pytest.raises(ValueError, match="model 'z' is not allowed; allowed models: a, b"):
        c.resolve("z")
