"""``python -m master`` refuses to listen beyond loopback without a key (secure by default)."""

from __future__ import annotations

from typing import Any

import pytest

from master import __main__ as entry


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(entry.uvicorn, "run", lambda app, **kw: calls.append(kw))
    monkeypatch.delenv("OPENAGENT_API_KEY", raising=False)
    monkeypatch.delenv("OPENAGENT_ALLOW_NO_AUTH", raising=False)
    monkeypatch.delenv("MASTER_HOST", raising=False)
    monkeypatch.chdir("/")  # no .env file of a checkout
    return calls


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "master.example"])
def test_no_key_on_a_reachable_address_is_refused(
    served: list[dict[str, Any]], host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        entry.main(["--host", host])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"refusing to listen on {host} without OPENAGENT_API_KEY" in err
    assert "OPENAGENT_ALLOW_NO_AUTH" in err
    assert served == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_no_key_on_loopback_starts(served: list[dict[str, Any]], host: str) -> None:
    entry.main(["--host", host])
    assert served[0]["host"] == host


def test_a_key_or_the_explicit_opt_out_starts_on_any_address(
    served: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAGENT_API_KEY", "k" * 32)
    entry.main(["--host", "0.0.0.0"])
    monkeypatch.delenv("OPENAGENT_API_KEY")
    monkeypatch.setenv("OPENAGENT_ALLOW_NO_AUTH", "true")
    entry.main(["--host", "0.0.0.0"])
    assert [call["host"] for call in served] == ["0.0.0.0", "0.0.0.0"]


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("OPENAI_BASE_URL", "localhost:11434/v1", "is not an http:// or https:// URL with a host"),
        ("OPENAI_BASE_URL", "http://127.0.0.1:99999/v1", "is not a URL"),
        ("MASTER_PORT", "abc", "MASTER_PORT"),
    ],
)
def test_an_invalid_setting_is_named_without_a_traceback(
    served: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    value: str,
    said: str,
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SystemExit) as exited:
        entry.main([])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and f"  {variable}: " in err and said in err and "Traceback" not in err
    assert served == []
