"""`metakg extract` against the real local model (llama-cpp-python serving SmolLM2-135M-Instruct).

The model is tiny: these tests check that the run finishes, every record is accounted for, the bundle
validates, usage is logged and a repeated run is free, never the quality of the triples.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest

from metakg.extractors.ontology import node_types, read_ontology
from metakg.llm import local_server
from metakg.schemas.bundle import read_bundle
from metakg.schemas.vocabulary import default_vocabulary
from tests.unit.cli.test_cli import run

pytestmark = pytest.mark.integration


def _ledger(cache_dir: Path) -> list[dict[str, object]]:
    path = cache_dir / "llm" / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def use_local(monkeypatch: pytest.MonkeyPatch, local_llm: local_server.LocalServer, *, max_tokens: int) -> None:
    """Point the run at the session's local server, with short replies and a patient timeout."""
    monkeypatch.setenv("METAKG_LLM__BASE_URL", local_llm.base_url)
    monkeypatch.setenv("METAKG_LLM__MODEL", local_llm.model)
    monkeypatch.setenv("METAKG_LLM__MAX_TOKENS", str(max_tokens))
    monkeypatch.setenv("METAKG_LLM__TIMEOUT_S", "120")


def _accounted(bundle_dir: Path, units: int) -> None:
    bundle = read_bundle(bundle_dir)
    in_edges = set(bundle.edges["record_ids"].explode().drop_nulls().to_list())
    # a unit with no triple is in the rejects: its reply lines with their reasons, or "no_triples"
    rejected = set(bundle.rejects.filter(bundle.rejects["stage"] == "extract")["record"].to_list())
    assert len(in_edges | rejected) == units


@pytest.mark.parametrize(
    ("fmt", "path", "limit"),
    [
        ("csqa", "commonsenseqa/csqa_dev_official_schema.jsonl", 4),
        ("medagents", "medagentsbench/medqa_test_hard.jsonl", 2),
    ],
)
def test_extraction_with_the_local_model_validates_and_a_rerun_is_free(
    local_llm: local_server.LocalServer,
    data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fmt: str,
    path: str,
    limit: int,
) -> None:
    use_local(monkeypatch, local_llm, max_tokens=128)
    cache_dir = Path(os.environ["METAKG_PATHS__CACHE_DIR"])
    out = tmp_path / "b"
    args = ["extract", str(data_dir / path), "-f", fmt, "-o", str(out), "--limit", str(limit), "--json"]
    _, first = run(*args)
    assert first["ok"] is True and first["records"] == first["units"] == limit
    assert first["llm_calls"] == limit and first["failed"] == 0 and first["tokens"] > 0
    assert first["validation_ok"] is True and first["edges"] > 0  # the one-shot prompt gets some triples out
    _accounted(out, limit)
    # typed JSON by default, held to its schema by the server's grammar: no reply is unreadable (a reply cut at
    # max_tokens keeps its complete triples), and every node has a type of the vocabulary
    bundle = read_bundle(out)
    assert bundle.rejects.filter(pl.col("check") == "unparsed_line").height == 0
    assert set(bundle.nodes["type"].to_list()) <= default_vocabulary().names
    (entry,) = [s for s in bundle.manifest["sources"] if s.get("importer") == "extract"]
    assert entry["typed_by"] == "vocabulary" and entry["structured"] is True
    ledger = [e for e in _ledger(cache_dir) if e["run_id"] == first["run_id"]]
    assert len(ledger) == limit and all(e["prompt_tokens"] > 0 and e["latency_s"] > 0 for e in ledger)

    _, second = run(*args)
    assert second["llm_calls"] == second["cache_hits"] == limit and second["tokens"] == second["cost_usd"] == 0
    assert (second["triples"], second["edges"]) == (first["triples"], first["edges"])


def test_extract_starts_and_stops_the_local_model_when_no_endpoint_is_set(
    local_llm: local_server.LocalServer, tmp_path: Path, data_dir: Path
) -> None:
    # local_llm is only requested so that a missing install fails (in CI) before this test runs
    out = tmp_path / "b"
    text = tmp_path / "doc.txt"
    text.write_text("Aspirin reduces fever. Aspirin is sold without a prescription. " * 3)
    _, summary = run("extract", str(text), "-f", "text", "-o", str(out), "--json", code=None)
    assert summary["units"] == 1 and summary["llm_calls"] == 1 and summary["model"] == local_llm.model
    assert summary["failed"] == 0


def test_an_update_through_the_local_model_asks_only_for_edited_records(
    local_llm: local_server.LocalServer, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """6 records, then 2 removed and 2 edited: 2 LLM calls with an empty cache, and the edges retracted
    are exactly those the first run's provenance ties only to removed or edited records (some are). Replies are
    cut at 72 tokens: a triple or two each is all the update's bookkeeping needs."""
    use_local(monkeypatch, local_llm, max_tokens=72)
    lines = (data_dir / "commonsenseqa" / "csqa_dev_official_schema.jsonl").read_text().splitlines()[:6]
    first = tmp_path / "v1.jsonl"
    first.write_text("\n".join(lines) + "\n")
    run("extract", str(first), "-f", "csqa", "-d", "quiz", "-o", str(tmp_path / "b1"), "--json")
    items = [json.loads(line) for line in lines]
    removed, edited = {items[i]["id"] for i in (1, 4)}, {items[i]["id"] for i in (2, 5)}
    for item in items:
        if item["id"] in edited:
            item["question"]["stem"] = item["question"]["stem"].rstrip("?") + " in a story?"
    second = tmp_path / "v2.jsonl"
    second.write_text("\n".join(json.dumps(i) for i in items if i["id"] not in removed) + "\n")
    cache_dir = tmp_path / "fresh-cache"
    monkeypatch.setenv("METAKG_PATHS__CACHE_DIR", str(cache_dir))
    args = ["extract", str(second), "-f", "csqa", "--update", str(tmp_path / "b1"), "-o", str(tmp_path / "b2")]
    _, update = run(*args, "--json")
    assert update["llm_calls"] == 2 and update["cache_hits"] == 0
    assert len([e for e in _ledger(cache_dir) if e["run_id"] == update["run_id"]]) == 2
    assert update["records_changes"] == {"unchanged": 2, "changed": 2, "added": 0, "removed": 2}
    before = {r["id"]: set(r["record_ids"]) for r in read_bundle(tmp_path / "b1").edges.iter_rows(named=True)}
    after = {r["id"]: set(r["record_ids"]) for r in read_bundle(tmp_path / "b2").edges.iter_rows(named=True)}
    gone = removed | edited
    for edge, ids in before.items():
        if ids - gone:  # still stated by a kept record: kept, with exactly the kept records (and edited restaters)
            assert edge in after and after[edge] - edited == ids - gone
        else:  # stated only by removed or edited records: retracted unless an edited record states it again
            assert edge not in after or after[edge] <= edited
    assert all(ids <= edited for edge, ids in after.items() if edge not in before)  # new edges: edited records'
    assert update["edges_changes"]["retracted"] == len(set(before) - set(after)) > 0


def test_the_estimate_counts_what_the_run_then_bills_and_a_budget_refuses_before_any_call(
    local_llm: local_server.LocalServer, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_local(monkeypatch, local_llm, max_tokens=32)  # the replies need not be useful, only counted
    units = 3
    cache_dir = Path(os.environ["METAKG_PATHS__CACHE_DIR"])
    source = [str(data_dir / "commonsenseqa/csqa_dev_official_schema.jsonl"), "-f", "csqa", "--limit", str(units)]
    out = tmp_path / "b"
    _, estimate = run("extract", *source, "--estimate", "--json")
    assert estimate["units"] == estimate["calls"] == units and estimate["answered"] == 0
    assert estimate["tokenizer"] == "the endpoint's tokenizer" and estimate["max_completion_tokens"] == units * 32
    assert estimate["list_usd_min"] is None  # no price for the local model
    assert not out.exists() and not _ledger(cache_dir)  # nothing sent, nothing written

    # priced, the prompts alone are over the budget: refused before any call
    monkeypatch.setenv("METAKG_LLM__PRICES_PER_MTOK", json.dumps({local_llm.model: [1000.0, 1000.0]}))
    _, priced = run("extract", *source, "--estimate", "--json")
    assert priced["list_usd_min"] == pytest.approx(priced["prompt_tokens"] * 1000 / 1e6, rel=1e-3)
    assert priced["batch_usd_max"] == pytest.approx(priced["list_usd_max"] / 2, rel=1e-3)
    _, refused = run("extract", *source, "-o", str(out), "--budget-usd", "0.5", "--json", code=2)
    assert "--budget-usd" in refused["error"] and "nothing was sent" in refused["error"]
    assert not _ledger(cache_dir) and not out.exists()

    monkeypatch.delenv("METAKG_LLM__PRICES_PER_MTOK")
    _, ran = run("extract", *source, "-o", str(out), "--json", code=None)
    assert ran["llm_calls"] == units and ran["failed"] == 0
    assert abs(ran["prompt_tokens"] - estimate["prompt_tokens"]) <= 0.05 * ran["prompt_tokens"], (ran, estimate)
    _, again = run("extract", *source, "--estimate", "--json")
    assert again["calls"] == 0 and again["answered"] == units and again["prompt_tokens"] == 0


def test_ontology_guided_extraction_with_the_local_model_is_well_formed_typed_and_scored(
    local_llm: local_server.LocalServer, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Constrained JSON through llama.cpp's grammar: no reply line refused as unparseable, every triple within
    the ontology, the nodes typed with its classes (declared in the manifest, so the bundle validates); then
    the same path scored by eval-extraction, whose figures come from calls that really ran."""
    use_local(monkeypatch, local_llm, max_tokens=512)  # llm.max_tokens' default: room for the schema's 8 triples
    source = data_dir / "text2kgbench" / "wikidata_tekgen"
    bench = tmp_path / "bench"  # the movie ontology, its first 2 test sentences and 30 training lines
    for folder, name, lines in (
        ("ontologies", "1_movie_ontology.json", None),
        ("ground_truth", "ont_1_movie_ground_truth.jsonl", 2),
        ("train", "ont_1_movie_train.jsonl", 30),
    ):
        (bench / folder).mkdir(parents=True)
        text = (source / folder / name).read_text()
        (bench / folder / name).write_text(text if lines is None else "".join(text.splitlines(True)[:lines]))
    sentences = bench / "ground_truth" / "ont_1_movie_ground_truth.jsonl"
    out = tmp_path / "b"
    _, summary = run(
        "extract", str(sentences), "-f", "jsonl", "--text-field", "sent", "--id-field", "id",
        "--ontology", str(bench / "ontologies" / "1_movie_ontology.json"),
        "--examples", str(bench / "train" / "ont_1_movie_train.jsonl"), "-o", str(out), "--json",
    )  # fmt: skip
    assert summary["llm_calls"] == 2 and summary["failed"] == 0 and summary["validation_ok"] is True
    bundle = read_bundle(out)
    checks = set(bundle.rejects["check"].to_list())
    assert not checks & {"unparsed_line", "reply_truncated"}, bundle.rejects.to_dicts()
    assert not checks & {"unknown_relation", "domain_violation", "range_violation", "unknown_type"}
    declared = bundle.manifest["types"]
    assert declared["film"]["is_a"] == "creative_work" and declared["film"]["ontology"] == "ont_1_movie"
    ontology = read_ontology(bench / "ontologies" / "1_movie_ontology.json")
    class_types = set(node_types(ontology, default_vocabulary())[0].values())
    types = set(bundle.nodes["type"].to_list())
    assert types and "concept" not in types and types <= class_types | {"value"}
    assert set(bundle.edges["display"].to_list()) <= {r.label for r in ontology.relations}

    _, scored = run("eval-extraction", str(bench), "--ontology", "movie", "--limit", "2", "--json")
    (row,) = scored["ontologies"]
    assert (row["sentences"], row["answered"]) == (2, 2) and row["onto_conf"] == 1.0  # held to the schema
    assert scored["run"]["unparsed_lines"] == 0 and scored["run"]["prompts"] == 2
    assert scored["run"]["cache_hits"] == 2  # the same prompts as the extraction's: no new call


def test_a_folder_of_real_documents_through_the_local_model_accounts_for_every_chunk(
    local_llm: local_server.LocalServer, debian_faq: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two of Debian's FAQ pages as HTML: every chunk becomes edges naming
    it or a reject naming it, and a repeated run is free."""
    use_local(monkeypatch, local_llm, max_tokens=96)
    docs = tmp_path / "docs"
    docs.mkdir()
    for page in ("kernel", "faqinfo"):
        (docs / f"{page}.html").write_bytes((debian_faq / f"{page}.en.html").read_bytes())
    out = tmp_path / "b"
    _, first = run("extract", str(docs), "-o", str(out), "--json")
    assert first["files"] == 2 and first["files_rejected"] == 0 and first["failed"] == 0
    assert first["llm_calls"] == first["units"] > 2 and first["validation_ok"] is True
    _accounted(out, first["units"])
    records = read_bundle(out).edges["record_ids"].explode().drop_nulls().to_list()
    assert records and all(r.split("#")[0] in ("kernel.html", "faqinfo.html") for r in records)
    _, again = run("extract", str(docs), "-o", str(out), "--json")
    assert again["llm_calls"] == again["cache_hits"] == first["units"]
