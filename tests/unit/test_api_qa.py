"""The QA context the api builds: settings checked, the knowledge source and the local-graph factory wired."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from metakg import api
from metakg.config import load_settings
from metakg.errors import ConfigError
from metakg.schemas.bundle import read_manifest, write_bundle
from metakg.schemas.graph_store import GraphStore
from metakg.schemas.knowledge_source import GraphStoreFactory, KnowledgeSource
from tests.conftest import small_bundle
from tests.unit.qa_engine.handmade import store


def test_the_context_has_a_knowledge_source_and_a_graph_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAKG_WIKIDATA__ENDPOINT", "http://127.0.0.1:9/sparql")
    ctx = api.qa_context(load_settings(), store(), None)
    assert isinstance(ctx.knowledge_source, KnowledgeSource)
    assert ctx.knowledge_source.endpoint == "http://127.0.0.1:9/sparql"  # nothing sent until asked
    factory = ctx.graph_factory
    assert isinstance(factory, GraphStoreFactory)
    first, second = factory(), factory()
    assert isinstance(first, GraphStore) and first is not second
    assert first.counts() == {"nodes": 0, "edges": 0}
    grown = store().subgraph(["kg:hand/alpha"], hops=1)
    with first:
        first.upsert(grown.nodes, grown.edges)
        assert first.counts() == {"nodes": 3, "edges": 2} and second.counts()["nodes"] == 0
        assert {nb.node.name for nb in first.neighbours("kg:hand/alpha")} == {"decoy", "bridge"}


def test_the_context_refuses_bad_strategy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAKG_QA__METAKGRAG__N_MAX", "many")
    with pytest.raises(ConfigError, match=r"qa\.metakgrag\.n_max"):
        api.qa_context(load_settings(), store(), None)
    monkeypatch.delenv("METAKG_QA__METAKGRAG__N_MAX")
    monkeypatch.setenv("METAKG_QA__STRATEGY", "graphrag")
    with pytest.raises(ConfigError, match="choose from llm_only, kg_rag, metakgrag"):
        api.qa_context(load_settings(), store(), None)


def test_strategy_sections_from_a_toml_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "metakg.toml"
    config.write_text(
        "[qa]\nmax_starts = 2\n\n[qa.metakgrag]\nn_max = 1\nno_cycle = true\n\n[qa.kg_rag]\nneighbours = 4\n"
    )
    monkeypatch.setenv("METAKG_CONFIG", str(config))
    settings = load_settings()
    assert settings.qa.max_starts == 2 and settings.qa.sections() == ["kg_rag", "metakgrag"]
    strategy = api.create_strategy(settings)
    assert strategy.label == "metakgrag[no_cycle]" and strategy.settings.n_max == 1
    assert api.create_strategy(settings, "kg_rag").settings.neighbours == 4
    monkeypatch.setenv("METAKG_QA__METAKGRAG", "3")
    with pytest.raises(ConfigError, match="strategy sections are tables"):
        load_settings()


def test_a_second_writer_of_an_evaluation_folder_is_refused(tmp_path: Path) -> None:
    from metakg.errors import ResourceBusy
    from metakg.schemas.locks import exclusive

    questions = tmp_path / "q.json"
    questions.write_text('{"question": "What links alpha?\\nA: beta\\nB: zeta", "answer": "A"}\n')
    out = tmp_path / "report"
    with exclusive(out, "the evaluation folder"), pytest.raises(ResourceBusy, match="another metakg process"):
        api.evaluate_benchmark(
            load_settings(), api.Benchmark(questions, "pilot"), out, api.Runs(["kg_rag"]), runner=api.NoLLM()
        )
    assert not (out / "summary.json").exists()


def test_local_kg_is_checked_like_a_path_from_config(tmp_path: Path) -> None:
    settings = load_settings()
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        api.with_local_kg(settings, tmp_path / "a-file")
    with pytest.raises(ConfigError, match="parent folder"):
        api.with_local_kg(settings, tmp_path / "missing" / "kg")
    assert api.with_local_kg(settings, tmp_path / "kg").qa.local_kg == str(tmp_path / "kg")
    assert api.with_local_kg(settings, "neo4j").qa.local_kg == "neo4j"
    assert api.with_local_kg(settings, None) is settings


def test_a_bundle_asked_over_keeps_its_name_embeddings(tmp_path: Path, any_embedder: None) -> None:
    """The first question over a bundle without embeddings stores them once; later ones embed no names."""
    write_bundle(tmp_path / "b", small_bundle())
    settings = load_settings()
    said: list[str] = []
    question = api.make_question("Which drug treats headache?")
    where, rules = api.StoreChoice(tmp_path / "b"), api.NoLLM()
    first = api.ask(settings, question, over=where, strategy="kg_rag", runner=rules, progress=said.append)
    assert first.evidence and any("embedding the node names once" in s for s in said)
    assert read_manifest(tmp_path / "b")["embeddings"]["nodes"] == small_bundle().nodes.height
    stored = pl.read_parquet(tmp_path / "b" / "embeddings.parquet")
    said.clear()
    again = api.ask(settings, question, over=where, strategy="kg_rag", runner=rules, progress=said.append)
    assert again.evidence == first.evidence and not any("embedding the node names" in s for s in said)
    assert pl.read_parquet(tmp_path / "b" / "embeddings.parquet").equals(stored)
