"""scripts/_common.sh helpers used by run.sh: MASTER_PORT moves the master's URLs; the demo LLM rule."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

COMMON = Path(__file__).resolve().parents[2] / "scripts" / "_common.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

_UNSET = ("MASTER_HOST", "MASTER_PORT", "MASTER_BASE_URL", "MASTER_WS", "OPENAI_API_KEY", "OPENAI_BASE_URL")


def bash(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` after sourcing _common.sh, with only ``env`` of the variables it reads set."""
    base = {name: value for name, value in os.environ.items() if name not in _UNSET}
    return subprocess.run(
        ["bash", "-c", f'. "{COMMON}"; {script}'],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


def urls(**env: str) -> dict[str, str]:
    done = bash('master_urls; printf "%s\\n" "$base_url" "$ws_url" "$MASTER_BASE_URL" "$MASTER_WS"', **env)
    assert done.returncode == 0, done.stderr
    base_url, ws_url, master_base_url, master_ws = done.stdout.splitlines()
    return {
        "base_url": base_url,
        "ws_url": ws_url,
        "MASTER_BASE_URL": master_base_url,
        "MASTER_WS": master_ws,
    }


def test_defaults() -> None:
    assert urls() == {
        "base_url": "http://127.0.0.1:8000",
        "ws_url": "ws://127.0.0.1:8000/ws",
        "MASTER_BASE_URL": "http://127.0.0.1:8000",
        "MASTER_WS": "ws://127.0.0.1:8000/ws",
    }


def test_master_port_alone_moves_every_url() -> None:
    assert urls(MASTER_PORT="18810") == {
        "base_url": "http://127.0.0.1:18810",
        "ws_url": "ws://127.0.0.1:18810/ws",
        "MASTER_BASE_URL": "http://127.0.0.1:18810",
        "MASTER_WS": "ws://127.0.0.1:18810/ws",
    }


def test_explicit_urls_win_and_local_ones_still_follow_the_port() -> None:
    got = urls(
        MASTER_PORT="18810", MASTER_BASE_URL="https://hub.example.com", MASTER_WS="wss://hub.example.com/ws"
    )
    assert got == {
        "base_url": "http://127.0.0.1:18810",
        "ws_url": "ws://127.0.0.1:18810/ws",
        "MASTER_BASE_URL": "https://hub.example.com",
        "MASTER_WS": "wss://hub.example.com/ws",
    }


@pytest.mark.parametrize(
    ("host", "base_url"),
    [("0.0.0.0", "http://127.0.0.1:9100"), ("::", "http://[::1]:9100"), ("::1", "http://[::1]:9100")],
)
def test_wildcard_and_ipv6_hosts(host: str, base_url: str) -> None:
    assert urls(MASTER_HOST=host, MASTER_PORT="9100")["MASTER_BASE_URL"] == base_url


@pytest.mark.parametrize("port", ["eighty", "0", "70000", "08000"])
def test_an_invalid_port_is_named(port: str) -> None:
    done = bash("master_urls", MASTER_PORT=port)
    assert done.returncode == 1
    assert f"MASTER_PORT must be a port number (1-65535), got '{port}'" in done.stderr


@pytest.mark.parametrize(
    ("env", "configured"),
    [
        ({}, False),
        ({"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}, False),
        ({"OPENAI_API_KEY": "sk-x"}, True),
        ({"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}, True),
    ],
)
def test_the_demo_llm_starts_only_without_an_llm(env: dict[str, str], configured: bool) -> None:
    assert (bash("llm_configured", **env).returncode == 0) is configured


def test_ensure_redis_starts_a_redis_that_keeps_its_data_across_a_restart() -> None:
    """The Redis that run.sh starts persists (AOF under .run/redis-PORT): a restart loses nothing."""
    import redis

    from tests.factories import free_port

    if shutil.which("redis-server") is None:
        pytest.skip("needs redis-server")
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    data_dir = COMMON.parents[1] / ".run" / f"redis-{port}"
    try:
        started = bash("ensure_redis", REDIS_URL=url)
        assert started.returncode == 0, started.stderr
        client = redis.Redis.from_url(url, decode_responses=True)
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("dir")["dir"] == str(data_dir)
        client.set("survives", "yes")
        client.shutdown(nosave=True)  # like a crash: no RDB snapshot, only the AOF
        client.close()
        restarted = bash("ensure_redis", REDIS_URL=url)
        assert restarted.returncode == 0, restarted.stderr
        client = redis.Redis.from_url(url, decode_responses=True)
        assert client.get("survives") == "yes"
    finally:
        try:
            redis.Redis.from_url(url).shutdown(nosave=True)
        except redis.RedisError:
            pass
        shutil.rmtree(data_dir, ignore_errors=True)


def test_ensure_redis_starts_a_redis_that_requires_the_urls_password() -> None:
    """With a password in REDIS_URL (run.sh writes one into .env), the Redis it starts refuses a
    client without it: agent code that reaches the port cannot use it."""
    import redis

    from tests.factories import free_port

    if shutil.which("redis-server") is None:
        pytest.skip("needs redis-server")
    port = free_port()
    url = f"redis://:s3cret-pw@127.0.0.1:{port}/0"
    data_dir = COMMON.parents[1] / ".run" / f"redis-{port}"
    try:
        started = bash("ensure_redis", REDIS_URL=url)
        assert started.returncode == 0, started.stderr
        assert "s3cret-pw" not in started.stderr
        assert oct(data_dir.stat().st_mode & 0o777) == "0o700"
        anonymous = redis.Redis(host="127.0.0.1", port=port)
        with pytest.raises(redis.AuthenticationError):
            anonymous.set("forged", "admin")
        anonymous.close()
        assert redis.Redis.from_url(url).ping()
    finally:
        try:
            redis.Redis.from_url(url).shutdown(nosave=True)
        except redis.RedisError:
            pass
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("A=1\nMASTER_PORT=8000\nB=2\n", "A=1\nMASTER_PORT=9123\nB=2\n"),
        ('A=1\nexport MASTER_PORT="8000"\n', "A=1\nMASTER_PORT=9123\n"),
        ("A=1", "A=1\nMASTER_PORT=9123\n"),
        ("A=1\nMASTER_PORT=9123\n", "A=1\nMASTER_PORT=9123\n"),
    ],
)
def test_a_port_from_the_environment_is_written_into_env_for_the_cli(
    before: str, after: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run.sh started with ``MASTER_PORT=9123`` in the environment only: ``openagent ask`` (which
    reads ``.env``) finds that master afterwards."""
    from openagent.config import RegistrationConfig

    env_file = tmp_path / ".env"
    env_file.write_text(before)
    done = bash(f'save_master_port "{env_file}"', MASTER_PORT="9123")
    assert done.returncode == 0, done.stderr
    assert env_file.read_text() == after
    assert ("wrote MASTER_PORT=9123" in done.stderr) == (before != after)

    # The CLI loads .env into the process environment: a copy of it, for this test only.
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items() if k not in _UNSET})
    monkeypatch.chdir(tmp_path)
    assert RegistrationConfig.from_env().master_base_url == "http://127.0.0.1:9123"
