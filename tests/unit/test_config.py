"""Settings from environment variables and the TOML file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metakg.config import describe_settings, load_settings
from metakg.errors import ConfigError


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("METAKG_EMBEDDER__MODEL_DIR", raising=False)
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


def test_a_settings_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "metakg.toml"
    config.write_bytes(b"\xef\xbb\xbf[store]\nmax_hops = 4\n")  # as Notepad saves "UTF-8 with BOM"
    monkeypatch.setenv("METAKG_CONFIG", str(config))
    assert load_settings().store.max_hops == 4


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


def test_broken_toml_names_the_file_line_and_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "broken.toml"
    config.write_text("[store]\nmax_hops = 2\n[qa\nconcepts = 'rules'\n", encoding="utf-8")
    monkeypatch.setenv("METAKG_CONFIG", str(config))
    with pytest.raises(ConfigError, match=r"broken\.toml.*line 3, column 4") as info:
        load_settings()
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ("[qa]\nn_maxx = 5\n", r"qa\.n_maxx"),
        ("[store]\nmax_hop = 5\n", r"store\.max_hop"),
        ("[llm]\nbase_ulr = 'http://x'\n", r"llm\.base_ulr"),
        ("[qa.metakgrag]\nn_maxx = 5\n", r"qa\.metakgrag\.n_maxx"),
    ],
)
def test_a_misspelt_key_in_a_section_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str, named: str
) -> None:
    from metakg.qa_engine.strategies import REGISTRY

    config = tmp_path / "c.toml"
    config.write_text(toml, encoding="utf-8")
    monkeypatch.setenv("METAKG_CONFIG", str(config))
    with pytest.raises(ConfigError, match=named):
        REGISTRY.check(load_settings().qa)  # strategy sections are checked where the strategies are known


def test_config_show_never_prints_a_key_in_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    from metakg.config import describe_settings

    monkeypatch.setenv("METAKG_LLM__BASE_URL", "http://user:sk-secret@llm.example:8000/v1")
    monkeypatch.setenv("METAKG_WIKIDATA__ENDPOINT", "https://bot:hunter2@query.example/sparql")
    shown = str(describe_settings(load_settings()))
    assert "sk-secret" not in shown and "hunter2" not in shown
    assert "http://user:***@llm.example:8000/v1" in shown


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("METAKG_LLM__BASE_URL", "HTTP://alice:Sup3rSecretPw@127.0.0.1:1/v1"),
        ("METAKG_LLM__BASE_URL", "ftp://alice:Sup3rSecretPw@example.org/v1"),
        ("METAKG_LLM__BASE_URL", "http://alice:Sup3r@SecretPw@127.0.0.1:1/v1"),
        ("METAKG_LLM__BASE_URL", "http://alice:Sup3r/SecretPw@127.0.0.1:1/v1"),
        ("METAKG_WIKIDATA__ENDPOINT", "gopher://alice:Sup3rSecretPw@example.org/sparql"),
        ("NEO4J_URI", "http://neo4j:Sup3rSecretPw@127.0.0.1:7687"),
    ],
)
def test_no_password_in_an_endpoint_url_reaches_a_message(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, value)
    try:
        settings = load_settings()
    except ConfigError as e:
        assert "SecretPw" not in str(e) and "Sup3r" not in str(e)
        return
    assert "SecretPw" not in json.dumps(describe_settings(settings))


def test_a_user_and_password_in_the_neo4j_uri_become_the_settings_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEO4J_URI", "bolt://reader:p%40ss@db.example:7687")
    neo4j = load_settings().neo4j
    assert neo4j.uri == "bolt://db.example:7687" and neo4j.user == "reader"
    assert neo4j.password.get_secret_value() == "p@ss"


@pytest.mark.parametrize(
    ("key", "value", "names"),
    [
        ("METAKG_LLM__BACKOFF_S", "nan", "llm.backoff_s"),
        ("METAKG_LLM__TIMEOUT_S", "inf", "llm.timeout_s"),
        ("METAKG_WIKIDATA__BACKOFF_S", "1e9", "wikidata.backoff_s"),
        ("METAKG_QA__MIN_SCORE", "nan", "qa"),
        ("METAKG_LLM__API_KEY", "sk-abc\ndef", "llm.api_key"),
        ("METAKG_LLM__API_KEY", "sk-abc def", "llm.api_key"),
        ("METAKG_LLM__PRICES_PER_MTOK", '{"m": [1.0, -2.0]}', "llm.prices_per_mtok"),
    ],
)
def test_numbers_that_are_not_finite_nul_characters_and_pasted_keys_are_refused(
    monkeypatch: pytest.MonkeyPatch, key: str, value: str, names: str
) -> None:
    monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError, match=names.replace(".", r"\.")) as info:
        load_settings()
    assert "sk-abc" not in str(info.value)  # a refused key is named, never shown


def test_text_holding_a_nul_character_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[llm]\nmodel = "smol\\u0000lm"\n', encoding="utf-8")  # an environment cannot carry one
    monkeypatch.setenv("METAKG_CONFIG", str(config))
    with pytest.raises(ConfigError, match=r"llm\.model.*NUL"):
        load_settings()
    config.write_text('[extract]\nrelations = ["treats", "a\\u0000b"]\n', encoding="utf-8")  # inside a list too
    with pytest.raises(ConfigError, match=r"extract\.relations.*NUL"):
        load_settings()
