"""The command line: the --json contract, exit codes, and no tracebacks on bad input."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import Result
from typer.testing import CliRunner

from metakg.cli.main import app
from metakg.schemas.bundle import read_bundle, write_bundle
from tests.conftest import small_bundle
from tests.unit.schemas.test_validation import bad_bundle

runner = CliRunner()


def run(*args: str, code: int | None = 0) -> tuple[Result, dict[str, Any]]:
    """Invoke the CLI; assert the exit code (None: any) and return the --json payload."""
    result = runner.invoke(app, list(args))
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    assert code is None or result.exit_code == code, output
    lines = result.stdout.strip().splitlines()
    payload = json.loads(lines[-1]) if "--json" in args and lines else {}
    return result, payload


@pytest.fixture
def triples(tmp_path: Path) -> Path:
    path = tmp_path / "kg.txt"
    path.write_bytes(
        b"aspirin\ttreats\theadache\nheadache\tsymptom of\tmigraine\nbad line\n\xff\tr\tx\n"
        b"aspirin\ttreats\theadache\nmigraine\tis a\tdisease\n"
    )
    return path


def test_ingest_json_counts_add_up_and_exit_1_on_rejects(tmp_path: Path, triples: Path) -> None:
    _, out = run("ingest", "triples", str(triples), "-d", "t", "-o", str(tmp_path / "b"), "--json", code=1)
    assert out["ok"] is False and out["command"] == "ingest triples"
    assert (out["read"], out["accepted"], out["rejected"], out["nodes"], out["edges"]) == (6, 4, 2, 4, 3)
    assert out["read"] == out["accepted"] + out["rejected"]
    assert (tmp_path / "b" / "manifest.json").is_file()  # written despite the rejects
    _, again = run("ingest", "triples", str(triples), "-d", "t", "-o", str(tmp_path / "b"), "--json", "--allow-rejects")
    assert again["rejected"] == 2 and again["ok"] is True  # ok is exit 0: the rejects were allowed


@pytest.mark.parametrize(
    ("tolerance", "code"), [("2", 0), ("1", 1), ("34%", 0), ("33%", 1), ("0", 1), ("-1", 2), ("lots", 2)]
)
def test_ingest_tolerates_the_rejects_it_is_told_to(tmp_path: Path, triples: Path, tolerance: str, code: int) -> None:
    args = ("ingest", "triples", str(triples), "-d", "t", "-o", str(tmp_path / "b"), "--json")
    _, out = run(*args, "--max-rejects", tolerance, code=code)  # 2 of 6 lines are rejected (33.3%)
    if code == 2:
        assert "--max-rejects" in out["error"] and not (tmp_path / "b").exists()
    else:
        assert out["ok"] is (code == 0) and out["rejected"] == 2


def test_ingest_human_output(tmp_path: Path, triples: Path) -> None:
    result, _ = run("ingest", "triples", str(triples), "-d", "t", "-o", str(tmp_path / "b"), code=1)
    assert "4 accepted, 2 rejected" in result.stdout
    assert "rejects.parquet" in result.stderr


def test_ingest_errors_have_the_right_codes(tmp_path: Path, triples: Path) -> None:
    _, out = run(
        "ingest", "triples", str(tmp_path / "missing.txt"), "-d", "t", "-o", str(tmp_path / "b"), "--json", code=1
    )
    assert out["ok"] is False and "does not exist" in out["error"]
    _, bad_name = run("ingest", "triples", str(triples), "-d", "bad name", "-o", str(tmp_path / "b"), "--json", code=2)
    assert "dataset name" in bad_name["error"]
    run("ingest", "triples", str(triples), "-d", "t", "-o", str(tmp_path / "b"), "--type", "unicorn", code=2)
    run("ingest", "triples", str(triples), "-o", str(tmp_path / "b"), code=2)  # --dataset missing
    run("ingest", "triples", str(triples), "-d", "t", "-o", str(tmp_path / "b"), "--bogus", code=2)
    (tmp_path / "empty.txt").write_text("\n\n")
    nothing = ("ingest", "triples", str(tmp_path / "empty.txt"), "-d", "t", "-o", str(tmp_path / "e"), "--json")
    result, empty = run(*nothing, "--allow-rejects", code=1)
    assert empty["ok"] is False and empty["accepted"] == 0 and "no triple accepted" in result.stderr
    # a tab written as the shell passes '\t' is a tab
    escaped = ("--separator", "\\t", "--allow-rejects", "--json")
    _, tab = run("ingest", "triples", str(triples), "-d", "t", "-o", str(tmp_path / "tab"), *escaped)
    assert (tab["accepted"], tab["rejected"]) == (4, 2)


def test_validate_bad_bundle(tmp_path: Path) -> None:
    write_bundle(tmp_path / "bad", bad_bundle())
    _, out = run("validate", str(tmp_path / "bad"), "--json", code=1)
    assert out["ok"] is False
    assert {
        "nodes.id_not_null",
        "nodes.id_unique",
        "edges.endpoint_exists",
        "edges.confidence_in_range",
        "nodes.name_not_empty",
    } <= set(out["failures"])
    assert out["warnings"] == ["edges.mutual_directed"] and out["warned"] == 2  # a -r-> b and b -r-> a, kept
    assert out["nodes_in"] == 9 and out["edges_in"] == 9 and out["nodes"] == 3 and out["edges"] == 2
    assert out["rejected"] == (9 - 3) + (9 - 2)
    assert (tmp_path / "bad" / "validation.html").is_file() and (tmp_path / "bad" / "validation.json").is_file()
    # a second run finds nothing new: the bundle now holds only accepted rows
    _, again = run("validate", str(tmp_path / "bad"), "--json")
    assert again["ok"] is True and again["rejected"] == 0
    _, info = run("info", str(tmp_path / "bad"), "--json")
    assert info["rejected"] == 13 and info["manifest"]["validation"]["ok"] is True


def test_validate_names_every_failed_check_whole_at_80_columns(tmp_path: Path) -> None:
    write_bundle(tmp_path / "bad", bad_bundle())
    result = runner.invoke(app, ["validate", str(tmp_path / "bad")], terminal_width=80)
    assert "(nodes.id_not_null, nodes.id_curie," in result.stdout  # the headline names the failed checks
    assert "edges.confidence_in_range" in result.stdout and "…" not in result.stdout.split("┃ check")[1]


def test_validate_allowing_rejects_is_ok_and_exit_0(tmp_path: Path) -> None:
    write_bundle(tmp_path / "bad", bad_bundle())
    _, out = run("validate", str(tmp_path / "bad"), "--allow-rejects", "--json")
    assert out["ok"] is True and out["rejected"] == 13 and "nodes.id_unique" in out["failures"]


def test_validate_missing_bundle(tmp_path: Path) -> None:
    _, out = run("validate", str(tmp_path / "nope"), "--json", code=1)
    assert out["error_type"] == "BundleError"


def test_info_merge_export(tmp_path: Path) -> None:
    write_bundle(tmp_path / "a", small_bundle())
    result, _ = run("info", str(tmp_path / "a"))
    assert "treats" in result.stdout and "not validated" in result.stdout
    _, out = run("merge", str(tmp_path / "a"), str(tmp_path / "a"), "-o", str(tmp_path / "m"), "--json")
    assert (out["nodes"], out["edges"]) == (10, 9)
    run("merge", str(tmp_path / "a"), "-o", str(tmp_path / "a"), code=2)
    _, rdf = run("export", "rdf", str(tmp_path / "m"), "-o", str(tmp_path / "kg.nt"), "--format", "nt", "--json")
    assert rdf["statements_written"] == rdf["statements_expected"] > 0
    run("export", "rdf", str(tmp_path / "m"), "-o", str(tmp_path / "kg.x"), "--format", "xml", code=2)
    # a locale written the POSIX way is not a language tag: a clear error before anything is written
    lang = ("--lang", "en_US", "--json")
    _, bad = run("export", "rdf", str(tmp_path / "m"), "-o", str(tmp_path / "l.nt"), *lang, code=2)
    assert "'en_US' is not a language tag" in bad["error"] and not (tmp_path / "l.nt").exists()


def test_export_rdf_takes_the_format_from_the_name_and_never_replaces_a_link_or_device(tmp_path: Path) -> None:
    write_bundle(tmp_path / "a", small_bundle())
    bundle = str(tmp_path / "a")
    _, nt = run("export", "rdf", bundle, "-o", str(tmp_path / "new folder" / "kg.nt"), "--json")
    assert nt["format"] == "nt" and not (tmp_path / "new folder" / "kg.nt").read_text().startswith("@prefix")
    _, clash = run("export", "rdf", bundle, "-o", str(tmp_path / "kg.ttl"), "--format", "nq", "--json", code=2)
    assert "ends in .ttl" in clash["error"] and not (tmp_path / "kg.ttl").exists()
    _, plain = run("export", "rdf", bundle, "-o", str(tmp_path / "kg.out"), "--json")
    assert plain["format"] == "ttl"
    for name in ("kg.rdf", "kg.jsonld", "kg.nt.gz"):  # what a reader would take for another syntax, or packed
        _, other = run("export", "rdf", bundle, "-o", str(tmp_path / name), "--json", code=2)
        assert "give a name ending in .ttl" in other["error"] and not (tmp_path / name).exists()
    _, dash = run("export", "rdf", bundle, "-o", "-", "--json", code=2)
    assert "not to standard output" in dash["error"]
    (tmp_path / "target.ttl").write_text("KEEP")
    (tmp_path / "link.ttl").symlink_to(tmp_path / "target.ttl")
    _, link = run("export", "rdf", bundle, "-o", str(tmp_path / "link.ttl"), "--json", code=1)
    assert "symbolic link" in link["error"] and (tmp_path / "link.ttl").is_symlink()
    os.mkfifo(tmp_path / "pipe.ttl")
    _, fifo = run("export", "rdf", bundle, "-o", str(tmp_path / "pipe.ttl"), "--json", code=1)
    assert "not a regular file" in fifo["error"] and stat.S_ISFIFO(os.lstat(tmp_path / "pipe.ttl").st_mode)


def test_query_commands(tmp_path: Path, model_dir: Path) -> None:  # names resolve by embedding too
    write_bundle(tmp_path / "a", small_bundle())
    bundle = str(tmp_path / "a")
    _, out = run("query", "neighbours", bundle, "Aspirin", "--rel", "treats", "--json")
    assert out["node"]["id"] == "kg:test/0"
    assert {n["node"]["name"] for n in out["neighbours"]} == {"headache", "fever"}
    result, _ = run("query", "neighbours", bundle, "aspirin")
    assert "-[treats]-> headache" in result.stdout
    _, shown = run("query", "neighbours", bundle, "Aspirin", "--rel", "Treats ", "--json")  # as shown, not stored
    assert shown["neighbours"] == out["neighbours"]
    result, _ = run("query", "neighbours", bundle, "aspirin", "--rel", "cures")
    assert "0 neighbours" in result.stdout and "`metakg query schema" in result.stderr
    _, path = run("query", "path", bundle, "aspirin", "migraine", "--json")
    assert path["count"] == 1 and len(path["paths"][0]["edges"]) == 2
    _, none = run("query", "path", bundle, "aspirin", "isolated", "--json", code=1)
    assert none["count"] == 0 and "hint" not in none
    _, misspelt = run("query", "path", bundle, "aspirin", "migraine", "--rel", "bogus", "--json", code=1)
    assert "no edge of bogus on a path between them; `metakg query schema" in misspelt["hint"]
    _, cures = run("query", "neighbours", bundle, "aspirin", "--rel", "cures", "--json")
    assert "no edge of cures at this node" in cures["hint"]
    _, hits = run("query", "search", bundle, "pyrexia", "--mode", "exact", "--json")
    assert [h["node"]["name"] for h in hits["hits"]] == ["fever"]
    # impossible counts are usage errors (exit 2), named
    for args, named in (
        (
            ("path", bundle, "aspirin", "migraine", "--k", "0"),
            "'--k' / '-k': Input should be greater than or equal to 1",
        ),
        (("path", bundle, "aspirin", "migraine", "--max-hops", "0"), "'--max-hops': Input should be greater than"),
        (("neighbours", bundle, "aspirin", "--limit", "-5"), "'--limit': Input should be greater than or equal to 1"),
        (("search", bundle, "aspirin", "-k", "0"), "'--k' / '-k': Input should be greater than or equal to 1"),
    ):
        result, payload = run("query", *args, "--json", code=2)
        assert named in payload["error"]
    # a name nothing resembles is not matched to an unrelated node; the closest names are listed
    _, unknown = run("query", "neighbours", bundle, "zzzzqqq unknown thing", "--json", code=1)
    assert "no node has the id or name 'zzzzqqq unknown thing'" in unknown["error"]
    assert "closest names are" in unknown["error"] and "similarity floor 0.6" in unknown["error"]
    _, near = run("query", "neighbours", bundle, "aspirin tablets", "--json")  # close enough (0.89)
    assert near["node"]["name"] == "aspirin"


def test_embed_then_search(tmp_path: Path, model_dir: Path) -> None:
    write_bundle(tmp_path / "a", small_bundle())
    _, out = run("embed", str(tmp_path / "a"), "--json")
    assert out["nodes"] == 10 and out["dim"] == 384 and out["model"] == "all-MiniLM-L6-v2"
    _, hits = run("query", "search", str(tmp_path / "a"), "influenza virus", "--mode", "embedding", "-k", "2", "--json")
    assert hits["hits"][0]["node"]["name"] == "flu"


def test_config_show_and_bad_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    _, out = run("config", "show", "--json")
    assert out["settings"]["store"]["max_hops"] == 3
    monkeypatch.setenv("METAKG_STORE__MAX_HOPS", "0")
    result, _ = run("config", "show", code=2)
    assert "store.max_hops" in result.stderr
    monkeypatch.delenv("METAKG_STORE__MAX_HOPS")
    monkeypatch.setenv("METAKG_QA__METAKGRAG__N_MAXX", "5")  # a key the strategy has not: eval would refuse it
    _, refused = run("config", "show", "--json", code=2)
    assert "qa.metakgrag.n_maxx" in refused["error"]
    monkeypatch.delenv("METAKG_QA__METAKGRAG__N_MAXX")
    monkeypatch.setenv("METAKG_NEO4J_BATCH_SIZE", "5")  # one underscore: once ignored without a word
    _, misspelt = run("config", "show", "--json", code=2)
    assert "METAKG_NEO4J__BATCH_SIZE" in misspelt["error"]
    monkeypatch.delenv("METAKG_NEO4J_BATCH_SIZE")
    monkeypatch.setenv("METAKG_QA_METAKGRAG__N_MAX", "5")  # one underscore, then two: ignored as well before
    _, mixed = run("config", "show", "--json", code=2)
    assert "METAKG_QA__METAKGRAG__N_MAX" in mixed["error"]
    monkeypatch.delenv("METAKG_QA_METAKGRAG__N_MAX")
    monkeypatch.setenv("METAKG__QA__TAU_ENTITY", "0.3")  # two underscores after METAKG
    _, doubled = run("config", "show", "--json", code=2)
    assert doubled["error"].endswith("so this one is METAKG_QA__TAU_ENTITY.")
    monkeypatch.delenv("METAKG__QA__TAU_ENTITY")
    for wrong in ("METAKG_NEOJ4__URI", "METAKG_LLM_MODEL__X"):  # no such section; a key that is no section
        monkeypatch.setenv(wrong, "x")
        _, unknown = run("config", "show", "--json", code=2)
        assert "it names no setting" in unknown["error"] and "neo4j" in unknown["error"], wrong
        monkeypatch.delenv(wrong)
    monkeypatch.setenv("METAKG_SOMETHING_ELSE", "x")  # not shaped like a setting: left alone
    monkeypatch.setenv("METAKG_LLM_MODEL", "m")  # a documented alias, and the test server's password
    monkeypatch.setenv("METAKG_NEO4J_PASSWORD", "p")
    shown = run("config", "show", "--json")[1]["settings"]
    assert shown["llm"]["model"] == "m" and shown["neo4j"]["password"] == "**********"  # the server's, read


def test_an_option_that_takes_one_value_given_twice_is_refused(tmp_path: Path) -> None:
    bundle = tmp_path / "kg"
    write_bundle(bundle, small_bundle())
    # the parser would keep the last one without a word: the question asked of a graph not meant
    _, twice = run("ask", "what treats fever?", "-b", str(bundle), "--bundle=elsewhere", "--json", code=2)
    assert twice["error_type"] == "UsageError" and "--bundle takes one value" in twice["error"]
    assert twice["command"] == "ask"
    _, attached = run("ask", "what treats fever?", "-b", str(bundle), f"-b{bundle}", "--json", code=2)
    assert "--bundle takes one value" in attached["error"]  # a short option's value written onto it
    assert "Usage: metakg ask" in run("ask", "--help", "-b", "a", "-b", "b")[0].stdout  # help first
    result, _ = run("--config", str(tmp_path / "nope.toml"), "info", str(bundle), "--config", "x", code=2)
    assert "--config" in result.output  # the root's option, given again after the command: the root's error
    # an option that collects values, a flag given twice, and an option's value that looks like one are fine
    value = run("info", str(bundle), "--json", "--json")[1]
    assert value["ok"] is True
    result, _ = run("ingest", "triples", str(tmp_path / "none.txt"), "--separator", "--separator", "-o", "x", code=None)
    assert "given more than once" not in result.output


def test_version_and_help() -> None:
    result, _ = run("--version")
    assert result.stdout.startswith("metakg ")
    result, _ = run("ingest", "triples", "--help")
    assert "--dataset" in result.stdout and "rejects.parquet" in result.stdout


def test_synthetic_and_primekg_commands(tmp_path: Path, data_dir: Path) -> None:  # the published counts
    _, synthetic = run("synthetic", "primekg", "-o", str(tmp_path / "syn"), "--scale", "0.001", "--json")
    assert synthetic["synthetic"] is True and "synthetic" in synthetic["path"]
    _, ingest = run("ingest", "primekg", synthetic["path"], "-o", str(tmp_path / "b"), "--json")
    assert ingest["read"] == synthetic["rows"] and ingest["rejected"] == 0
    assert ingest["mirrored_pairs"] == ingest["edges"]
    assert ingest["read"] == ingest["accepted"] + ingest["rejected"]
    run("synthetic", "primekg", "-o", str(tmp_path / "x"), "--scale", "17", code=2)
    _, missing = run("ingest", "primekg", "-o", str(tmp_path / "b"), "--json", code=2)
    assert "--download" in missing["error"]
    _, admin = run("export", "neo4j-admin", str(tmp_path / "b"), str(tmp_path / "admin"), "--json")
    assert admin["import_command"].startswith("neo4j-admin database import full")
    assert admin["nodes"] == ingest["nodes"] and admin["edges"] == ingest["edges"]
    _, generic = run(
        "export", "neo4j-admin", str(tmp_path / "b"), str(tmp_path / "g"), "--rel-types", "generic", "--json"
    )
    header = (tmp_path / "g" / "edges_header.csv").read_text(encoding="utf-8").strip().split(",")
    rows = pl.read_csv(tmp_path / "g" / "edges.csv", has_header=False, new_columns=header)
    assert generic["rel_types"] == "generic" and header[-1] == "rel"
    assert rows[":TYPE"].unique().to_list() == ["RELATED"] and rows["rel"].n_unique() > 1
    run("export", "neo4j-admin", str(tmp_path / "b"), str(tmp_path / "h"), "--rel-types", "some", code=2)


def test_unreachable_neo4j_is_a_configuration_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEO4J_URI", "bolt://127.0.0.1:9")
    write_bundle(tmp_path / "a", bad_bundle())
    before = (tmp_path / "a" / "manifest.json").read_bytes()
    _, out = run("load", "neo4j", str(tmp_path / "a"), "--json", code=2)
    assert "make neo4j-up" in out["error"]
    # the server is checked before the never-validated bundle is validated in place: it is left as it was
    assert (tmp_path / "a" / "manifest.json").read_bytes() == before
    for size in ("0", "-5", "100001"):  # 0 once meant the default, -5 wrote nothing
        _, bad = run("load", "neo4j", str(tmp_path / "a"), "--batch-size", size, "--json", code=2)
        assert "--batch-size must be from 1" in bad["error"]
    monkeypatch.setenv("NEO4J_PASSWORD", "do-not-print-me")
    result, _ = run("query", "path", "bolt://127.0.0.1:9", "a", "b", code=2)
    assert "do-not-print-me" not in result.stdout + result.stderr


def test_a_table_changed_behind_the_manifest_is_refused_until_accepted(tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    write_bundle(bundle, small_bundle())
    small_bundle().nodes.head(9).write_parquet(bundle / "nodes.parquet")  # rewritten behind the manifest's back
    for command in (("info",), ("validate",), ("export", "rdf"), ("query", "search")):
        extra = ("-o", str(tmp_path / "kg.nt"), "--format", "nt") if command[0] == "export" else ()
        extra = ("aspirin",) if command[0] == "query" else extra
        _, out = run(*command, str(bundle), *extra, "--json", code=1)
        assert "nodes.parquet changed since the bundle was written" in out["error"], command
        assert out["fix"] == f"metakg validate {bundle} --accept-changes"
    _, out = run("validate", str(bundle), "--accept-changes", "--json")
    assert out["nodes_in"] == 9  # the changed table was read, validated and its hash recorded
    run("info", str(bundle), "--json")


def test_accepting_changes_checks_every_id_it_reads(tmp_path: Path) -> None:
    """Issue 56, item 4: after bit rot, ``validate --accept-changes`` applies the id checks to the tables it
    reads: an edge id with a control character and a node id with a quote in it (``ncbigene:97"9"6``) are
    rejected with their reasons, not kept."""
    bundle = tmp_path / "b"
    write_bundle(bundle, small_bundle())
    edges = pl.read_parquet(bundle / "edges.parquet")
    rotted = edges.with_columns(
        pl.when(pl.int_range(pl.len()) == 0).then(pl.lit("e:12\x0034")).otherwise("id").alias("id")
    )
    rotted.write_parquet(bundle / "edges.parquet")
    nodes = pl.read_parquet(bundle / "nodes.parquet")
    quoted = nodes.with_columns(
        pl.when(pl.int_range(pl.len()) == 0).then(pl.lit('ncbigene:97"9"6')).otherwise("id").alias("id")
    )
    quoted.write_parquet(bundle / "nodes.parquet")
    _, out = run("validate", str(bundle), "--accept-changes", "--json", code=None)
    rejects = pl.read_parquet(bundle / "rejects.parquet")
    checks = set(rejects["check"].to_list())
    assert {"edges.id_format", "nodes.id_curie"} <= checks, rejects
    kept = read_bundle(bundle)
    assert "e:12\x0034" not in kept.edges["id"].to_list() and 'ncbigene:97"9"6' not in kept.nodes["id"].to_list()
    assert out["nodes_in"] == nodes.height


def test_accepting_changes_records_a_changed_history_table_too(tmp_path: Path) -> None:
    """The fix the refusal names works for a side table (the history) as for the nodes: no loop."""
    source, bundle = tmp_path / "k.txt", tmp_path / "h"
    source.write_text("a\tlinks\tb\nb\tlinks\tc\n")
    run("ingest", "triples", str(source), "-d", "t", "-o", str(bundle), "--history", "--json")
    source.write_text("a\tlinks\tb\nc\tlinks\td\n")
    run("ingest", "triples", str(source), "-d", "t", "-o", str(bundle), "--previous", str(bundle), "--json")
    table = bundle / "history_edges.parquet"
    pl.read_parquet(table).write_parquet(table, compression="gzip")  # the same rows, other bytes
    _, out = run("info", str(bundle), "--json", code=1)
    assert "history_edges.parquet changed" in out["error"]
    run(*out["fix"].split()[1:], "--json")
    run("info", str(bundle), "--json")


def test_a_cut_table_is_called_damaged_with_no_change_to_accept(tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    write_bundle(bundle, small_bundle())
    table = bundle / "edges.parquet"
    table.write_bytes(table.read_bytes()[:300])  # a copy cut short
    _, out = run("info", str(bundle), "--json", code=1)
    assert "is damaged" in out["error"] and "fix" not in out  # accepting it would only fail to read it


def test_the_usage_line_says_how_many_calls_the_cache_answered() -> None:
    """Issue 56, item 19: a cached answer's line once said "2 LLM calls, 0 tokens" without saying why."""
    from metakg.cli.qa_cmd import _calls

    assert _calls(2, 0) == "2 LLM calls" and _calls(1, 0) == "1 LLM call"
    assert _calls(2, 2) == "2 LLM calls (2 from the cache)" and _calls(2, 1) == "2 LLM calls (1 from the cache)"
