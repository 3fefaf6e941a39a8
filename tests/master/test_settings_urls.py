"""master/settings.py: MASTER_PORT (and MASTER_HOST) move the master; MASTER_BASE_URL follows unless set."""

from __future__ import annotations

from pathlib import Path

import pytest

from master.settings import Settings


def settings(**env: str) -> Settings:
    return Settings(_env_file=None, **env)  # type: ignore[arg-type]


def test_defaults_are_the_spec_defaults() -> None:
    s = settings()
    assert (s.master_host, s.master_port, s.master_base_url) == ("127.0.0.1", 8000, "http://127.0.0.1:8000")


def test_master_port_alone_in_dotenv_moves_the_base_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("MASTER_PORT", "MASTER_HOST", "MASTER_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / ".env").write_text("MASTER_PORT=18810\n")
    monkeypatch.chdir(tmp_path)
    s = Settings()
    assert s.master_port == 18810
    assert s.master_base_url == "http://127.0.0.1:18810"


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("10.0.0.5", "http://10.0.0.5:9100"),
        ("0.0.0.0", "http://127.0.0.1:9100"),
        ("::", "http://[::1]:9100"),
        ("::1", "http://[::1]:9100"),
    ],
)
def test_base_url_follows_master_host(host: str, url: str) -> None:
    assert settings(master_host=host, master_port="9100").master_base_url == url


def test_an_explicit_base_url_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASTER_PORT", "9100")
    monkeypatch.setenv("MASTER_BASE_URL", "https://hub.example.com")
    assert Settings(_env_file=None).master_base_url == "https://hub.example.com"  # type: ignore[call-arg]


def test_an_invalid_port_is_refused() -> None:
    with pytest.raises(ValueError, match="master_port"):
        settings(master_port="70000")
