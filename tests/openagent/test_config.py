"""ClientConfig and InvocationConfig: defaults, environment variables, .env loading and validation."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from openagent import ClientConfig, ConfigurationError
from openagent.config import InvocationConfig, RegistrationConfig

ENV_NAMES = [
    "MASTER_WS",
    "OPENAGENT_API_KEY",
    "WS_CONNECT_TIMEOUT",
    "WS_REGISTRATION_TIMEOUT",
    "WS_KEEPALIVE_INTERVAL",
    "QUERY_RESPONSE_TIMEOUT",
    "INVOCATION_HOST",
    "INVOCATION_PORT",
    "INVOCATION_BASE_URL",
    "MASTER_BASE_URL",
    "HTTP_REGISTER_TIMEOUT",
    "MASTER_PORT",
    "MASTER_HOST",
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


def test_defaults_match_the_spec_env_table(clean_env: Path) -> None:
    config = ClientConfig.from_env({})

    assert config == ClientConfig()
    assert config.master_ws == "ws://127.0.0.1:8000/ws"
    assert config.api_key == "" and config.auth_headers == {}  # no key
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


def test_explicit_fields_keep_the_key_of_the_environment_or_dotenv(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ClientConfig(master_ws=...)`` (the guides' agents) still sends the key ``run.sh`` wrote, read
    without loading ``.env`` into the environment; ``api_key=""`` sends none."""
    (clean_env / ".env").write_text("OPENAGENT_API_KEY=dotenv-key\n")

    assert ClientConfig(master_ws="ws://127.0.0.1:9/ws").api_key == "dotenv-key"
    assert "OPENAGENT_API_KEY" not in os.environ
    monkeypatch.setenv("OPENAGENT_API_KEY", "process-key")
    config = ClientConfig(master_ws="ws://127.0.0.1:9/ws")
    assert config.api_key == "process-key"
    assert config.auth_headers == {"Authorization": "Bearer process-key"}
    assert ClientConfig(master_ws="ws://127.0.0.1:9/ws", api_key="").auth_headers == {}
    assert ClientConfig(api_key="explicit").api_key == "explicit"


def test_a_keyless_config_stays_keyless_when_copied(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``""`` means no key and stays so: a copy made with ``dataclasses.replace`` (as the CLI and the
    master's runner do) never picks up the key of the environment or of ``.env``."""
    (clean_env / ".env").write_text("OPENAGENT_API_KEY=dotenv-key\n")
    monkeypatch.setenv("OPENAGENT_API_KEY", "process-key")
    for keyless in (ClientConfig(api_key=""), ClientConfig.from_env({})):
        assert keyless.api_key == ""
        copy = dataclasses.replace(keyless, master_ws="ws://elsewhere:8000/ws")
        assert copy.api_key == "" and copy.auth_headers == {}
    with_key = ClientConfig()  # left out: the environment's, and the copy keeps it
    assert dataclasses.replace(with_key, query_timeout=5.0).api_key == "process-key"


def test_from_env_invalid_dotenv_value_names_the_variable(clean_env: Path) -> None:
    (clean_env / ".env").write_text("WS_KEEPALIVE_INTERVAL=often\n")

    with pytest.raises(ConfigurationError, match="WS_KEEPALIVE_INTERVAL"):
        ClientConfig.from_env()


# --------------------------------------------------------------------------- MASTER_PORT / MASTER_HOST


def test_master_urls_follow_master_port_in_dotenv(clean_env: Path) -> None:
    (clean_env / ".env").write_text("MASTER_PORT=18810\n")

    assert ClientConfig.from_env().master_ws == "ws://127.0.0.1:18810/ws"
    assert RegistrationConfig.from_env().master_base_url == "http://127.0.0.1:18810"


@pytest.mark.parametrize(
    ("host", "ws", "http"),
    [
        ("10.1.2.3", "ws://10.1.2.3:9100/ws", "http://10.1.2.3:9100"),
        ("0.0.0.0", "ws://127.0.0.1:9100/ws", "http://127.0.0.1:9100"),
        ("::", "ws://[::1]:9100/ws", "http://[::1]:9100"),
        ("::1", "ws://[::1]:9100/ws", "http://[::1]:9100"),
    ],
)
def test_master_urls_follow_master_host(host: str, ws: str, http: str) -> None:
    environ = {"MASTER_HOST": host, "MASTER_PORT": "9100"}
    assert ClientConfig.from_env(environ).master_ws == ws
    assert RegistrationConfig.from_env(environ).master_base_url == http


def test_explicit_master_urls_win_over_master_port() -> None:
    environ = {
        "MASTER_PORT": "9100",
        "MASTER_WS": "ws://hub:8000/ws",
        "MASTER_BASE_URL": "http://hub:8000",
    }
    assert ClientConfig.from_env(environ).master_ws == "ws://hub:8000/ws"
    assert RegistrationConfig.from_env(environ).master_base_url == "http://hub:8000"


def test_invalid_master_port_is_named() -> None:
    with pytest.raises(ConfigurationError, match="MASTER_PORT.*'eighty'"):
        ClientConfig.from_env({"MASTER_PORT": "eighty"})


# --------------------------------------------------------------------------- invocation agents


def test_invocation_defaults_match_the_spec_env_table() -> None:
    config = InvocationConfig.from_env({})

    assert config == InvocationConfig()
    assert (config.host, config.port, config.invocation_base_url) == ("127.0.0.1", 9000, None)
    assert config.registration == RegistrationConfig(master_base_url="http://127.0.0.1:8000", timeout=10.0)
    assert config.registration.api_key is None and config.registration.auth_headers == {}


def test_invocation_reads_every_variable() -> None:
    config = InvocationConfig.from_env(
        {
            "INVOCATION_HOST": "0.0.0.0",
            "INVOCATION_PORT": "9123",
            "INVOCATION_BASE_URL": "https://agents.example.com",
            "MASTER_BASE_URL": "https://hub.example.com/",
            "OPENAGENT_API_KEY": "s3cret",
            "HTTP_REGISTER_TIMEOUT": "3.5",
        }
    )

    assert (config.host, config.port, config.invocation_base_url) == (
        "0.0.0.0",
        9123,
        "https://agents.example.com",
    )
    assert config.registration.master_base_url == "https://hub.example.com"  # no trailing slash
    assert config.registration.auth_headers == {"Authorization": "Bearer s3cret"}
    assert config.registration.timeout == 3.5
    assert "s3cret" not in repr(config)


def test_invocation_arguments_win_and_their_variables_are_not_read() -> None:
    broken = {
        "INVOCATION_PORT": "ninety",
        "MASTER_BASE_URL": "ws://wrong",
        "OPENAGENT_API_KEY": "from-env",
        "HTTP_REGISTER_TIMEOUT": "never",
    }

    config = InvocationConfig.from_env(
        broken, port=0, master_base_url="http://127.0.0.1:1", api_key="", register_timeout=2
    )

    assert config.port == 0
    assert config.registration == RegistrationConfig(master_base_url="http://127.0.0.1:1", timeout=2)
    assert config.registration.api_key is None  # "" means no key, not the variable's


@pytest.mark.parametrize(
    ("environ", "match"),
    [
        ({"INVOCATION_PORT": "ninety"}, "INVOCATION_PORT must be a port number .*'ninety'"),
        ({"INVOCATION_PORT": "70000"}, "INVOCATION_PORT must be a port number .*'70000'"),
        ({"INVOCATION_BASE_URL": "agents:9000"}, "INVOCATION_BASE_URL.*'agents:9000'"),
        ({"MASTER_BASE_URL": "ws://127.0.0.1:8000"}, "MASTER_BASE_URL.*'ws://127.0.0.1:8000'"),
        ({"HTTP_REGISTER_TIMEOUT": "0"}, "HTTP_REGISTER_TIMEOUT must be greater than 0, got '0'"),
    ],
)
def test_invalid_invocation_variable_is_named(environ: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        InvocationConfig.from_env(environ)


def test_direct_invocation_construction_is_validated() -> None:
    with pytest.raises(ConfigurationError, match="port must be from 0 to 65535"):
        InvocationConfig(port=-1)
    with pytest.raises(ConfigurationError, match="register timeout must be greater than 0"):
        RegistrationConfig(timeout=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        InvocationConfig().host = "0.0.0.0"  # type: ignore[misc]


def test_invocation_from_env_loads_dotenv_without_overriding(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (clean_env / ".env").write_text("INVOCATION_PORT=9555\nMASTER_BASE_URL=http://from-dotenv:8000\n")
    monkeypatch.setenv("MASTER_BASE_URL", "http://from-process:8000")

    config = InvocationConfig.from_env()

    assert config.port == 9555
    assert config.registration.master_base_url == "http://from-process:8000"
