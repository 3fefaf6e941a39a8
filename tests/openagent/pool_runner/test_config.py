"""openagent/pool_runner/config.py: the environment, and the refusals that keep it safe."""

from __future__ import annotations

from pathlib import Path

import pytest

from openagent.errors import ConfigurationError
from openagent.pool_runner import PoolRunnerConfig


def test_from_env_reads_the_variables_and_the_token_falls_back_to_the_api_key() -> None:
    config = PoolRunnerConfig.from_env(
        {
            "POOL_RUNNER_HOST": "0.0.0.0",
            "POOL_RUNNER_PORT": "18501",
            "OPENAGENT_API_KEY": "shared-key",
            "POOL_RUNNER_WORKDIR": "/tmp/pool-x",
            "POOL_RUNNER_MAX_AGENTS": "7",
            "POOL_RUNNER_AGENT_UID": "-1",
            "MASTER_WS": "ws://master:8000/ws",
        }
    )
    assert (config.host, config.port, config.max_agents) == ("0.0.0.0", 18501, 7)
    assert config.token == "shared-key"
    # The runner's key is never an agent's: each gets its own in its start request.
    assert not hasattr(config, "agent_api_key")
    assert config.workdir == Path("/tmp/pool-x")
    assert config.master_ws == "ws://master:8000/ws"
    assert "shared-key" not in repr(config)


def test_a_token_of_its_own_wins_over_the_api_key() -> None:
    config = PoolRunnerConfig.from_env(
        {"POOL_RUNNER_TOKEN": "runner", "OPENAGENT_API_KEY": "agents", "POOL_RUNNER_AGENT_UID": "-1"}
    )
    assert config.token == "runner"


def test_listening_beyond_loopback_needs_a_token() -> None:
    with pytest.raises(ConfigurationError, match="POOL_RUNNER_TOKEN"):
        PoolRunnerConfig.from_env({"POOL_RUNNER_HOST": "0.0.0.0", "POOL_RUNNER_AGENT_UID": "-1"})


def test_a_bad_number_names_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="POOL_RUNNER_PORT must be a number, got 'http'"):
        PoolRunnerConfig.from_env({"POOL_RUNNER_PORT": "http"})
