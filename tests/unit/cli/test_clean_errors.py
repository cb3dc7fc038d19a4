"""Bad input that once gave a traceback, a wrong exit code or a misleading message: each now a clear error with
its documented exit code, and the --json line whatever went wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metakg.schemas.bundle import MANIFEST_FILE, write_bundle
from tests.conftest import small_bundle
from tests.unit.cli.test_cli import run


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    path = tmp_path / "b"
    write_bundle(path, small_bundle())
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["info"], "Missing argument"),
        (["info", "x", "--bogus"], "No such option: --bogus"),
        (["info", "x", "--top", "many"], "Invalid value for '--top'"),
        (["nonexistent"], "No such command 'nonexistent'"),
    ],
)
def test_a_usage_error_keeps_the_json_contract(args: list[str], message: str) -> None:
    _, out = run(*args, "--json", code=2)
    assert out["ok"] is False and out["error_type"] == "UsageError" and message in out["error"]


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["query", "path", "{b}", "aspirin", "headache", "-k", "100000"], "'--k'"),
        (["query", "path", "{b}", "aspirin", "headache", "--max-hops", "50"], "'--max-hops'"),
        (["query", "search", "{b}", "aspirin", "-k", "0"], "'--k'"),
        (["query", "neighbours", "{b}", "aspirin", "--limit", "0"], "'--limit'"),
        (["info", "{b}", "--top", "-1"], "'--top'"),
        (["demo", "--questions", "-1"], "'--questions'"),
        (["calibrate", "medcog", "x.jsonl", "-f", "medagents", "-o", "out", "--budget", "-1"], "'--budget'"),
    ],
)
def test_out_of_range_numbers_are_usage_errors_before_any_work(bundle: Path, args: list[str], option: str) -> None:
    _, out = run(*[a.replace("{b}", str(bundle)) for a in args], "--json", code=2)
    assert option in out["error"]


def test_invalid_settings_keep_the_json_contract(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAKG_SERVER__PORT", "eighty")
    _, out = run("query", "search", str(bundle), "aspirin", "--json", code=2)
    assert out["error_type"] == "ConfigError" and "server.port" in out["error"] and out["command"] == "query search"


@pytest.mark.parametrize("value", ["[http://a", "http://a.example"])
def test_malformed_json_in_an_env_list_is_named(bundle: Path, value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAKG_SERVER__CORS_ORIGINS", value)
    _, out = run("query", "search", str(bundle), "aspirin", "--json", code=2)
    assert "METAKG_SERVER__CORS_ORIGINS is not valid JSON" in out["error"]


def test_a_strategy_list_given_as_json_in_the_environment_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAKG_QA__MEDCOG__NODE_TYPES", '["disease", "drug"]')
    _, out = run("config", "show", "--json")
    assert out["settings"]["qa"]["medcog"]["node_types"] == ["disease", "drug"]
    monkeypatch.setenv("METAKG_QA__MEDCOG__NODE_TYPES", '["disease"')
    _, out = run("config", "show", "--json", code=2)
    assert "qa.medcog.node_types is not valid JSON" in out["error"]


def test_a_settings_file_that_is_not_utf8_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toml = tmp_path / "metakg.toml"
    toml.write_bytes(b'[server]\nhost = "\xff"\n')
    monkeypatch.setenv("METAKG_CONFIG", str(toml))
    _, out = run("config", "show", "--json", code=2)
    assert f"{toml} is not UTF-8 text" in out["error"]


def test_an_empty_as_of_is_refused(bundle: Path) -> None:
    _, out = run("query", "neighbours", str(bundle), "aspirin", "--as-of", "", "--json", code=2)
    assert "--as-of '' is not an ISO 8601 date" in out["error"]


def test_an_answer_page_named_as_a_folder_is_refused_before_answering(bundle: Path, tmp_path: Path) -> None:
    args = ["ask", "what treats headache?", "--bundle", str(bundle), "--no-llm", "--html", str(tmp_path), "--json"]
    _, out = run(*args, code=2)
    assert "is a folder" in out["error"] and "answer.html" in out["error"]


def test_an_output_that_is_a_file_is_named_not_busy(tmp_path: Path) -> None:
    source = tmp_path / "kg.txt"
    source.write_text("a\tr\tb\n")
    target = tmp_path / "taken"
    target.write_text("a file")
    _, out = run("ingest", "triples", str(source), "-d", "t", "-o", str(target), "--json", code=2)
    assert "is a file, not a bundle directory" in out["error"] and target.read_text() == "a file"


def test_an_unterminated_quote_in_a_primekg_file_is_a_clear_data_error(tmp_path: Path) -> None:
    header = "relation,display_relation,x_index,x_id,x_type,x_name,x_source,y_index,y_id,y_type,y_name,y_source\n"
    path = tmp_path / "kg.csv"
    path.write_text(
        header + 'protein_protein,ppi,0,9796,gene/protein,"PHYHIP,NCBI,8889,56992,gene/protein,KIF15,NCBI\n'
    )
    _, out = run("ingest", "primekg", str(path), "-o", str(tmp_path / "b"), "--json", code=1)
    assert out["error_type"] == "InputDataError" and "never closes" in out["error"] and str(path) in out["error"]
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    "manifest", [[1, 2], {"schema_version": "1.1", "content_hashes": {"../../etc/passwd": "0" * 64}}]
)
def test_an_untrustworthy_manifest_is_a_data_error(bundle: Path, manifest: object) -> None:
    (bundle / MANIFEST_FILE).write_text(json.dumps(manifest))
    for command in (["info", str(bundle)], ["query", "search", str(bundle), "aspirin"], ["validate", str(bundle)]):
        _, out = run(*command, "--json", code=1)
        assert out["error_type"] == "BundleError" and "manifest.json" in out["error"]


def test_nan_in_a_manifest_is_refused_and_never_printed(bundle: Path) -> None:
    """Probe round 4: a NaN count went through, and info --json printed it (no JSON has NaN)."""
    manifest = json.loads((bundle / MANIFEST_FILE).read_text())
    manifest["counts"] = {"nodes": float("nan")}
    (bundle / MANIFEST_FILE).write_text(json.dumps(manifest))
    result, out = run("info", str(bundle), "--json", code=1)
    assert "holds NaN" in out["error"] and "NaN" not in result.stdout.splitlines()[-1].replace("holds NaN", "")


def test_a_cache_folder_that_cannot_be_made_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("METAKG_PATHS__CACHE_DIR", str(blocker / "cache"))  # a file where a folder must go
    monkeypatch.setenv("METAKG_LLM__BASE_URL", "http://127.0.0.1:9/v1")
    _, out = run("llm", "ask", "hi", "--json", code=2)
    assert out["error_type"] == "ConfigError" and "cannot be made" in out["error"]
    assert "METAKG_PATHS__CACHE_DIR" in out["error"]


def test_a_password_in_a_neo4j_uri_given_as_the_graph_never_reaches_a_message() -> None:
    result, out = run("query", "search", "bolt://neo4j:N3o4jSecretPw@127.0.0.1:1", "dog", "--json", code=2)
    assert out["error_type"] == "ConfigError" and "bolt://127.0.0.1:1" in out["error"]
    assert "N3o4jSecretPw" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["export", "neo4j-admin", "{b}", "{f}"],
        ["synthetic", "primekg", "-o", "{f}"],
        ["eval", "{f}", "-f", "pilot", "-b", "{b}", "-o", "{f}"],
        ["tune", "{f}", "-f", "pilot", "-b", "{b}", "-o", "{f}", "--grid", "path_hops=2,3"],
    ],
)
def test_an_output_folder_that_is_a_file_is_a_usage_error(bundle: Path, tmp_path: Path, args: list[str]) -> None:
    taken = tmp_path / "taken"
    taken.write_text("keep me")
    given = [a.replace("{b}", str(bundle)).replace("{f}", str(taken)) for a in args]
    _, out = run(*given, "--json", code=2)
    assert out["error_type"] == "UsageError" and "is a file" in out["error"] and taken.read_text() == "keep me"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["eval", "q.jsonl", "-f", "csqa", "-s", "", "-o", "ev"], "--strategy names no strategy"),
        (["query", "neighbours", "kg", "a", "--rel", ""], "--rel is empty"),
        (["llm", "ask", "  "], "the prompt is empty"),
        (["extract", "q.jsonl", "-f", "csqa", "-o", "x", "--budget-usd", "nan"], "--budget-usd must be a finite"),
        (["export", "neo4j-admin", "kg", ""], "DIRECTORY is empty"),  # once wrote into the current folder
    ],
)
def test_empty_or_meaningless_arguments_are_usage_errors(args: list[str], says: str) -> None:
    """Probe round 4: each ran (eval ran nothing with exit 0, llm ask sent an empty prompt as a billed call)."""
    _, out = run(*args, "--json", code=2)
    assert says in out["error"]


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("METAKG_QA__MEDCOG__NODE_TYPES", '["nosuchtype"]', "qa.medcog.node_types"),
        ("METAKG_IDENTITY__PREFIX_PRIORITY", '{"nosuchtype": ["x"]}', "identity.prefix_priority names 'nosuchtype'"),
        ("METAKG_IDENTITY__ONE_PER_ENTITY", '["MONDO", ""]', "identity.one_per_entity"),
    ],
)
def test_config_show_refuses_what_the_commands_using_a_setting_would(
    variable: str, value: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Probe round 4: these passed config show, and ask or resolve refused them (or ignored them) later."""
    monkeypatch.setenv(variable, value)
    _, out = run("config", "show", "--json", code=2)
    assert says in out["error"]
    if variable == "METAKG_IDENTITY__PREFIX_PRIORITY":  # and resolve, which reads it, refuses it too
        _, out = run("resolve", "a", "b", "-o", "c", "--json", code=2)
        assert says in out["error"]
