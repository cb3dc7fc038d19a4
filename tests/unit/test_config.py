"""Settings from environment variables and the TOML file."""

from __future__ import annotations

from pathlib import Path

import pytest

from metakg.config import load_settings
from metakg.errors import ConfigError


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("METAKG_EMBEDDER__MODEL_DIR")
    settings = load_settings()
    assert settings.store.backend == "embedded" and settings.store.max_hops == 3
    assert settings.embedder.model_dir is None and settings.validation.fail_on_reject


def test_environment_overrides_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "metakg.toml"
    config.write_text("[store]\nmax_hops = 4\n[ingest]\nmax_field_chars = 50\n", encoding="utf-8")
    monkeypatch.setenv("METAKG_CONFIG", str(config))
    monkeypatch.setenv("METAKG_INGEST__MAX_FIELD_CHARS", "77")
    settings = load_settings()
    assert settings.store.max_hops == 4
    assert settings.ingest.max_field_chars == 77


def test_local_metakg_toml_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "metakg.toml").write_text("[validation]\nhtml_report = false\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert load_settings().validation.html_report is False


@pytest.mark.parametrize(
    ("key", "value", "names"),
    [
        ("METAKG_STORE__MAX_HOPS", "99", "store.max_hops"),
        ("METAKG_EMBEDDER__MODEL_DIR", "/no/such/folder", "embedder.model_dir"),
        ("METAKG_STORE__BACKEND", "cassandra", "store.backend"),
    ],
)
def test_bad_values_name_the_setting(monkeypatch: pytest.MonkeyPatch, key: str, value: str, names: str) -> None:
    monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError, match=names.replace(".", r"\.")) as info:
        load_settings()
    assert info.value.exit_code == 2


def test_missing_config_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("METAKG_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match="METAKG_CONFIG"):
        load_settings()


def test_unknown_toml_key_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[stor]\nmax_hops = 2\n", encoding="utf-8")
    monkeypatch.setenv("METAKG_CONFIG", str(config))
    with pytest.raises(ConfigError, match="stor"):
        load_settings()
