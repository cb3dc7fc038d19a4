"""MedCoG's KG verification on the real PrimeKG-derived files: a known DrugMechDB path is found, and every
node and edge id of the evidence exists in the store (the store is asked, not the bundle)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from benchmarks.bench_medcog import scripted, verification_questions
from benchmarks.primekg_real import write_real_kg
from metakg import api
from metakg.config import Settings, load_settings
from metakg.qa_engine.core import Answer, EvidencePath, Question
from metakg.qa_engine.strategies.medcog.strategy import render
from metakg.schemas.graph_store import GraphStore

CMV = Question(
    "Why is valganciclovir given for CMV infection?", (("A", "it becomes ganciclovir"), ("B", "chance")), "cmv", "A"
)
CMV_PLAN = "valganciclovir | valganciclovir treats CMV infection"


@pytest.fixture(scope="module")
def real_bundle(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    work = tmp_path_factory.mktemp("real")
    kg, rows = write_real_kg(data_dir / "primekg", work / "kg.csv")
    report = api.ingest_primekg(kg, work / "bundle", load_settings())
    assert report.read == rows and report.rejected == 0  # every real row is accepted
    return work / "bundle"


def in_store(store: GraphStore, path: EvidencePath) -> bool:
    """Every node of the path is in the store, and each edge links its two nodes there."""
    if any(store.get_node(n) is None for n in path.nodes):
        return False
    return all(
        any(nb.edge.id == edge for nb in store.neighbours(a)) for a, edge in zip(path.nodes, path.edges, strict=False)
    )


def verify_all(settings: Settings, store: GraphStore, questions: list[Question], replies: dict[str, str]) -> Any:
    medcog = {"route": "scot_kg", "filter_groundings": False, "max_refinements": 0}
    run = settings.model_copy(update={"qa": settings.qa.with_section("medcog", medcog)})
    ctx = api.qa_context(run, store, scripted(replies))
    strategy = api.create_strategy(run, "medcog")

    async def answer_all() -> list[Answer]:
        return [await strategy.answer(q, ctx) for q in questions]

    return asyncio.run(answer_all())


def check_real_verification(settings: Settings, store: GraphStore, bundle: Path) -> None:
    """The known path first, then 30 questions over the graph's names: every evidence id in ``store``."""
    (cmv,) = verify_all(settings, store, [CMV], {CMV.text: CMV_PLAN})
    rendered = [render(p) for p in cmv.evidence]
    assert rendered[0] == "valganciclovir <-[interacts with]- ganciclovir -[off-label use]-> CMV infection"
    assert cmv.evidence[0].nodes == ("drugbank:DB01610", "drugbank:DB01004", "mondo:0005132")
    questions, replies = verification_questions(bundle, 30)
    answers = verify_all(settings, store, questions, replies)
    paths = [p for a in answers for p in a.evidence]
    assert sum(1 for a in answers if a.evidence) >= 10  # the 15 two-edge walks mostly connect
    assert paths and all(in_store(store, p) for p in paths)


def test_kg_verification_on_the_real_primekg_files(real_bundle: Path, any_embedder: None) -> None:
    settings = load_settings()
    with api.open_store(settings, real_bundle) as store:
        check_real_verification(settings, store, real_bundle)
