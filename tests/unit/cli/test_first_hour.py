"""What a new user meets in the first hour: a wrong file says why it was refused, a missing side table says how
to make it again, a source's figures are the ones its importer recorded, a missing --config is named as such,
the help lists the commands in the order of the work, and library errors name no command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from metakg.cli.main import COMMAND_SECTIONS
from metakg.errors import BundleError, StoreError
from metakg.loaders.embedded_store import EmbeddedStore
from metakg.schemas.bundle import EMBEDDINGS_FILE, MANIFEST_FILE, read_bundle, write_bundle, write_embeddings
from tests.conftest import small_bundle
from tests.unit.cli.test_cli import run


def test_a_wrong_file_is_refused_with_the_most_frequent_reasons(tmp_path: Path) -> None:
    questions = tmp_path / "questions.jsonl"
    questions.write_text("\n".join(json.dumps({"question": f"q{i}?", "answer": "A"}) for i in range(40)) + "\n")
    _, out = run("ingest", "triples", str(questions), "-d", "x", "-o", str(tmp_path / "b"), "--json", code=1)
    assert out["rejected"] == 40
    reasons = out["reject_reasons"]
    assert reasons[0]["check"] == "field_count" and reasons[0]["count"] == 40
    assert "expected 3 tab-separated fields" in reasons[0]["reason"] and reasons[0]["record"] == "questions.jsonl:1"
    result, _ = run("ingest", "triples", str(questions), "-d", "x", "-o", str(tmp_path / "b"), code=1)
    assert "40 x field_count: expected 3 tab-separated fields" in result.stderr  # said, not only filed


def test_reject_reasons_are_ordered_by_frequency_and_keep_the_first_example(tmp_path: Path) -> None:
    mixed = tmp_path / "kg.txt"
    mixed.write_bytes(b"a\tr\tb\nonly one field\n\xff\tr\tx\ntwo\tfields\nthree\tfields here\t\n")
    _, out = run("ingest", "triples", str(mixed), "-d", "x", "-o", str(tmp_path / "b"), "--json", code=1)
    checks = [r["check"] for r in out["reject_reasons"]]
    counts = [r["count"] for r in out["reject_reasons"]]
    assert counts == sorted(counts, reverse=True) and sum(counts) <= out["rejected"]
    assert checks[0] == "field_count" and out["reject_reasons"][0]["record"] == "kg.txt:2"


def test_a_deleted_embeddings_file_names_the_command_that_makes_it_again(tmp_path: Path) -> None:
    path = tmp_path / "b"
    write_bundle(path, small_bundle())
    bundle = read_bundle(path)
    write_embeddings(path, bundle, bundle.nodes["id"], _unit_vectors(bundle.nodes.height), model="m", dim=3)
    (path / EMBEDDINGS_FILE).unlink()
    result, out = run("info", str(path), "--json", code=1)
    assert "embed the bundle again" in out["error"] and out["fix"] == f"metakg embed {path}"
    assert f"fix: metakg embed {path}" in result.stderr


def test_info_shows_the_figures_each_importer_recorded(tmp_path: Path) -> None:
    path = tmp_path / "b"
    bundle = small_bundle()
    bundle.manifest = {
        "sources": [
            {"name": "wikidata:subset", "importer": "metakg.ingest.wikidata", "input": "subset.yaml",
             "entities": 12, "queries": 3, "run_id": "r1", "at": "2026-11-26T00:00:00+00:00"},
        ]
    }  # fmt: skip
    write_bundle(path, bundle)
    result, _ = run("info", str(path))
    line = next(x for x in result.stdout.splitlines() if x.startswith("source "))
    assert "None" not in line and "entities 12" in line and "queries 3" in line and "subset.yaml" in line


def test_a_missing_config_file_is_named_as_the_option_given(tmp_path: Path) -> None:
    _, out = run("--config", str(tmp_path / "missing.toml"), "info", str(tmp_path), "--json", code=2)
    assert "--config" in out["error"] and "METAKG_CONFIG" not in out["error"] and out["command"] == "info"


def test_help_lists_every_command_once_in_sections_of_the_work() -> None:
    result, _ = run("--help")
    text = result.stdout
    titles = [title for title, _names in COMMAND_SECTIONS]
    assert [text.index(f"{t}:") for t in titles] == sorted(text.index(f"{t}:") for t in titles)
    listed = [line.split()[0] for line in text.splitlines() if line.startswith("  ") and not line.startswith("   ")]
    commands = [n for _t, names in COMMAND_SECTIONS for n in names]
    assert [x for x in listed if x in commands] == commands  # each once, in the sections' order


def test_library_errors_say_the_fix_in_words_and_leave_the_command_to_the_cli(tmp_path: Path) -> None:
    bundle = small_bundle()
    store = EmbeddedStore(bundle.nodes, bundle.edges)
    with pytest.raises(StoreError) as caught:
        store.search("aspirin", mode="embedding")
    assert "metakg" not in str(caught.value) and caught.value.cli_fix == "metakg embed BUNDLE"
    path = tmp_path / "b"
    write_bundle(path, small_bundle())
    manifest = json.loads((path / MANIFEST_FILE).read_text())
    manifest["content_hashes"] = {}
    (path / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(BundleError) as refused:
        read_bundle(path)
    assert "`metakg" not in str(refused.value) and refused.value.cli_fix == f"metakg validate {path} --accept-changes"


def _unit_vectors(n: int) -> np.ndarray:
    return np.tile(np.array([1.0, 0.0, 0.0], dtype=np.float32), (n, 1))
