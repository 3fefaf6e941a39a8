"""Every Settings field, walked: read from its environment variable, and read by the master."""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from master.settings import REMOVED_SWITCHES, Settings
from tests.factories import ROOT

FIELDS = sorted(Settings.model_fields)


def sample(name: str) -> tuple[str, Any]:
    """An environment value for the field and the value Settings should read from it."""
    annotation = Settings.model_fields[name].annotation
    if typing.get_origin(annotation) is typing.Literal:
        choice = typing.get_args(annotation)[-1]
        return str(choice), choice
    kinds = set(typing.get_args(annotation)) or {annotation}
    if typing.get_origin(annotation) is typing.Literal:
        choice = typing.get_args(annotation)[0]
        return str(choice), choice
    if bool in kinds:
        default = Settings.model_fields[name].default
        return ("0", False) if default else ("1", True)
    if int in kinds:
        return "7", 7
    if float in kinds:
        return "7.5", 7.5
    if SecretStr in kinds:
        return "s3cret", "s3cret"
    if Path in kinds:
        return "/tmp/openagent-root", Path("/tmp/openagent-root")
    if name.endswith("_url"):
        return "http://127.0.0.1:19001", "http://127.0.0.1:19001"
    if name.endswith("_windows"):
        return "gpt-4o-mini=8192", "gpt-4o-mini=8192"
    return "gpt-4o-mini", "gpt-4o-mini"


@pytest.mark.parametrize("name", FIELDS)
def test_each_field_is_read_from_its_variable(
    name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env
    raw, expected = sample(name)
    monkeypatch.setenv(name.upper(), raw)
    value = getattr(Settings(), name)
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    assert value == expected


@pytest.mark.parametrize("name", FIELDS)
def test_each_field_is_read_by_the_master(name: str) -> None:
    """A setting nothing reads is a promise the master does not keep (``settings.x`` or, in a
    validator of settings.py, ``self.x``)."""
    used = re.compile(rf"\.{name}\b")
    readers = [p for p in (ROOT / "master").rglob("*.py") if used.search(p.read_text())]
    assert readers, f"nothing in master/ reads Settings.{name}"


def test_env_file_is_read_and_the_environment_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("TOOL_CALL_TIMEOUT=12\nORCHESTRATOR_RECENT_TURNS=3\n")
    monkeypatch.delenv("TOOL_CALL_TIMEOUT", raising=False)
    monkeypatch.setenv("ORCHESTRATOR_RECENT_TURNS", "5")
    settings = Settings()
    assert settings.tool_call_timeout == 12 and settings.orchestrator_recent_turns == 5


@pytest.mark.parametrize(
    ("variable", "value"),
    [("TOOL_CALL_TIMEOUT", "0"), ("ORCHESTRATOR_RECENT_TURNS", "-1"), ("OPENAGENT_YAML_RUNNER", "maybe")],
)
def test_invalid_values_are_refused_naming_the_field(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=variable.lower()):
        Settings()


@pytest.mark.parametrize("variable", sorted(REMOVED_SWITCHES))
def test_a_removed_route_switch_left_off_refuses_the_start_naming_it(
    variable: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(variable, "0")
    with pytest.raises(ValueError, match=f"{variable} was removed: a key's role now decides"):
        Settings()
    monkeypatch.setenv(variable, "1")  # on, it closed nothing: ignored like any unknown variable
    Settings()


def test_derived_properties() -> None:
    def make(**values: Any) -> Settings:
        return Settings(_env_file=None, **values)  # type: ignore[arg-type]

    assert not make(openai_api_key="", openai_base_url=None).llm_configured
    assert (
        make(openai_api_key="sk").llm_configured
        and make(openai_base_url="http://localhost:11434/v1").llm_configured
    )
    assert make(openagent_api_key="").api_key is None and make(openagent_api_key="k").api_key == "k"
    assert make(openai_base_url="http://127.0.0.1:8080/v1").llm_endpoint_is_loopback
    assert make(openai_base_url="http://localhost:8080/v1").llm_endpoint_is_loopback
    assert not make(openai_base_url=None).llm_endpoint_is_loopback  # the default is api.openai.com
    assert not make(openai_base_url="http://10.0.0.5/v1").llm_endpoint_is_loopback
    assert make(openai_base_url="  ").openai_base_url is None  # empty in .env: the default endpoint


@pytest.mark.parametrize(
    "url", ["not a url", "localhost:11434/v1", "ftp://llm.example/v1", "http://", "http://127.0.0.1:99999/v1"]
)
def test_an_llm_base_url_that_is_not_an_http_url_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="openai_base_url"):
        Settings(_env_file=None, openai_base_url=url)  # type: ignore[call-arg]
