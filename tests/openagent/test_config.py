"""ClientConfig: defaults, environment variables, .env loading and validation."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from openagent import ClientConfig, ConfigurationError

ENV_NAMES = [
    "MASTER_WS",
    "OPENAGENT_API_KEY",
    "WS_CONNECT_TIMEOUT",
    "WS_REGISTRATION_TIMEOUT",
    "WS_KEEPALIVE_INTERVAL",
    "QUERY_RESPONSE_TIMEOUT",
]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No client variables set, cwd in an empty directory; os.environ restored afterwards
    (``load_dotenv`` writes to it behind monkeypatch's back)."""
    saved = dict(os.environ)
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    os.environ.clear()
    os.environ.update(saved)


def test_defaults_match_the_spec_env_table() -> None:
    config = ClientConfig.from_env({})

    assert config == ClientConfig()
    assert config.master_ws == "ws://127.0.0.1:8000/ws"
    assert config.api_key is None
    assert (config.connect_timeout, config.registration_timeout) == (10.0, 10.0)
    assert config.keepalive_interval == 30
    assert config.query_timeout == 180.0
    assert (config.reconnect_initial_delay, config.reconnect_max_delay) == (0.5, 10.0)


def test_reads_every_variable() -> None:
    config = ClientConfig.from_env(
        {
            "MASTER_WS": "wss://hub.example.com/ws",
            "OPENAGENT_API_KEY": "s3cret",
            "WS_CONNECT_TIMEOUT": "1.5",
            "WS_REGISTRATION_TIMEOUT": "2",
            "WS_KEEPALIVE_INTERVAL": "0",
            "QUERY_RESPONSE_TIMEOUT": "60",
        }
    )

    assert config.master_ws == "wss://hub.example.com/ws"
    assert config.api_key == "s3cret"
    assert config.connect_timeout == 1.5
    assert config.registration_timeout == 2.0
    assert config.keepalive_interval == 0  # disables keepalive
    assert config.query_timeout == 60.0


def test_empty_values_count_as_unset() -> None:
    assert ClientConfig.from_env({"MASTER_WS": "", "OPENAGENT_API_KEY": " ", "WS_CONNECT_TIMEOUT": ""}) == (
        ClientConfig()
    )


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("WS_CONNECT_TIMEOUT", "ten"),
        ("WS_REGISTRATION_TIMEOUT", "0"),
        ("WS_KEEPALIVE_INTERVAL", "-1"),
        ("QUERY_RESPONSE_TIMEOUT", "nan"),
    ],
)
def test_invalid_number_names_the_variable(name: str, raw: str) -> None:
    with pytest.raises(ConfigurationError, match=f"{name} must be .*'{raw}'"):
        ClientConfig.from_env({name: raw})


def test_master_ws_must_be_a_websocket_url() -> None:
    with pytest.raises(ConfigurationError, match="MASTER_WS.*'http://127.0.0.1:8000'"):
        ClientConfig.from_env({"MASTER_WS": "http://127.0.0.1:8000"})


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ConfigurationError, match="query_timeout must be greater than 0"):
        ClientConfig(query_timeout=0)
    with pytest.raises(ConfigurationError, match="reconnect_max_delay"):
        ClientConfig(reconnect_initial_delay=5, reconnect_max_delay=1)


def test_is_frozen_and_hides_the_api_key() -> None:
    config = ClientConfig(api_key="s3cret")

    with pytest.raises(dataclasses.FrozenInstanceError):
        config.api_key = "other"  # type: ignore[misc]
    assert "s3cret" not in repr(config)
    assert config.auth_headers == {"Authorization": "Bearer s3cret"}
    assert ClientConfig().auth_headers == {}


def test_from_env_reads_the_process_environment(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASTER_WS", "ws://10.0.0.1:8000/ws")
    monkeypatch.setenv("QUERY_RESPONSE_TIMEOUT", "5")

    config = ClientConfig.from_env()

    assert config.master_ws == "ws://10.0.0.1:8000/ws"
    assert config.query_timeout == 5.0


def test_from_env_loads_dotenv_without_overriding(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (clean_env / ".env").write_text(
        "MASTER_WS=ws://from-dotenv:8000/ws\nOPENAGENT_API_KEY=dotenv-key\nWS_CONNECT_TIMEOUT=3\n"
    )
    monkeypatch.setenv("OPENAGENT_API_KEY", "process-key")

    config = ClientConfig.from_env()

    assert config.master_ws == "ws://from-dotenv:8000/ws"
    assert config.connect_timeout == 3.0
    assert config.api_key == "process-key"  # the process environment wins


def test_from_env_invalid_dotenv_value_names_the_variable(clean_env: Path) -> None:
    (clean_env / ".env").write_text("WS_KEEPALIVE_INTERVAL=often\n")

    with pytest.raises(ConfigurationError, match="WS_KEEPALIVE_INTERVAL"):
        ClientConfig.from_env()
