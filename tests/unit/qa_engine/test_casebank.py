"""The case bank: build, top-K order, merge, the folder format, and MedCoG's memory routes reading it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from metakg.config import QASettings
from metakg.errors import InputDataError
from metakg.llm.scripted import ScriptedClient
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import Question
from metakg.qa_engine.strategies import REGISTRY
from metakg.qa_engine.strategies.medcog.casebank import CaseBank
from tests.unit.qa_engine.handmade import QUESTION, AxisEmbedder, store

# AxisEmbedder knows these texts: the hand-made question and entity names (see handmade.VECTORS)
ROWS = [
    ("c1", "decoy", "Facts: decoy -> near -> alpha\nAnswer: A", 1),
    ("c2", "bridge", "Facts: bridge -> near -> alpha\nAnswer: B", 0),
    ("c3", "alpha", "Facts: alpha\nAnswer: A", 1),
]


def test_top_k_is_most_similar_first(tmp_path: Path) -> None:
    embedder = AxisEmbedder()
    bank = CaseBank.build(ROWS, embedder, source="hand", model="axis")
    question = embedder.embed([QUESTION])[0]
    # sim to the question: decoy 0.9, bridge 0.5, alpha 0
    top = bank.top(question, 2)
    assert [c.id for c in top] == ["c1", "c2"] and [c.similarity for c in top] == pytest.approx([0.9, 0.5], abs=1e-3)
    assert "This reasoning was wrong" in bank.top(question, 2)[1].render()
    bank.write(tmp_path / "bank")
    again = CaseBank.read(tmp_path / "bank")
    assert len(again) == 3 and again.model == "axis" and [c.id for c in again.top(question, 3)] == ["c1", "c2", "c3"]
    manifest = json.loads((tmp_path / "bank" / "manifest.json").read_text())
    assert (manifest["cases"], manifest["correct"], manifest["dim"], manifest["version"]) == (3, 2, 5, 1)


def test_merge_keeps_the_later_case_and_refuses_other_models() -> None:
    embedder = AxisEmbedder()
    first = CaseBank.build(ROWS[:2], embedder, model="axis")
    second = CaseBank.build([("c2", "bridge", "better", 1), ROWS[2]], embedder, model="axis")
    merged = first.merge(second)
    assert merged.cases["id"].to_list() == ["c1", "c2", "c3"]
    assert merged.cases.filter(merged.cases["id"] == "c2")["reward"].item() == 1
    with pytest.raises(InputDataError, match="different embedding models"):
        first.merge(CaseBank.build(ROWS[:1], embedder, model="other"))


def test_a_folder_that_is_not_a_bank_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputDataError, match="not a case bank"):
        CaseBank.read(tmp_path)
    CaseBank.build(ROWS, AxisEmbedder(), model="axis").write(tmp_path)
    (tmp_path / "manifest.json").write_text('{"format": "metakg-casebank", "version": 99}')
    with pytest.raises(InputDataError, match="format 99"):
        CaseBank.read(tmp_path)


def test_memory_routes_show_the_most_similar_cases(tmp_path: Path) -> None:
    CaseBank.build(ROWS, AxisEmbedder(), model="axis").write(tmp_path / "bank")
    settings = QASettings.model_validate(
        {"medcog": {"route": "scot_mem", "casebank": str(tmp_path / "bank"), "cases": 2}}
    )
    client = ScriptedClient({"Work in three parts": "Reasoning: as before.\nAnswer: A"})
    ctx = QAContext(store=store(), embedder=AxisEmbedder(), settings=settings, llm=client)
    question = Question(QUESTION, (("A", "zeta"), ("B", "bridge")), "q")
    answer = asyncio.run(REGISTRY.create("medcog", settings).answer(question, ctx))
    assert answer.status == "ok" and [c["id"] for c in answer.trace["cases"]] == ["c1", "c2"]
    prompt = client.calls[0].messages[-1].content
    assert prompt.index("decoy -> near -> alpha") < prompt.index("bridge -> near -> alpha") < prompt.rindex("Question:")
    assert "Facts: alpha" not in prompt  # the third case is not among the two most similar


def test_a_damaged_misplaced_or_foreign_bank_is_a_clear_error(tmp_path: Path) -> None:
    bank = tmp_path / "bank"
    CaseBank.build(ROWS, AxisEmbedder(), model="axis").write(bank)
    with pytest.raises(InputDataError, match="was embedded with axis, not all-MiniLM-L6-v2"):
        CaseBank.read(bank, model="all-MiniLM-L6-v2")
    assert len(CaseBank.read(bank, model="axis")) == 3
    (bank / "cases.parquet").write_bytes(b"PAR1 not a table")
    with pytest.raises(InputDataError, match=r"cases.parquet cannot be read .*build the case bank again"):
        CaseBank.read(bank)
    (bank / "manifest.json").write_text("{broken")
    with pytest.raises(InputDataError, match="is not readable JSON"):
        CaseBank.read(bank)
    bundle = tmp_path / "kg"  # a KG bundle given where a bank belongs
    bundle.mkdir()
    (bundle / "manifest.json").write_text('{"schema_version": "1.1", "counts": {}}')
    (bundle / "cases.parquet").write_bytes(b"")
    with pytest.raises(InputDataError, match=r"its manifest.json is not a case bank's \(a KG bundle\?\)"):
        CaseBank.read(bundle)


def test_writing_a_bank_swaps_it_in_whole_and_keeps_other_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bank = tmp_path / "bank"
    CaseBank.build(ROWS[:1], AxisEmbedder(), model="axis").write(bank)
    (bank / "README").write_text("our bank")
    before = (bank / "cases.parquet").read_bytes()

    def full_disk(*_args: object, **_kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("polars.DataFrame.write_parquet", full_disk)
    with pytest.raises(OSError, match="No space left"):
        CaseBank.build(ROWS, AxisEmbedder(), model="axis").write(bank)
    monkeypatch.undo()
    assert (bank / "cases.parquet").read_bytes() == before and len(CaseBank.read(bank)) == 1
    CaseBank.build(ROWS, AxisEmbedder(), model="axis").write(bank)
    assert len(CaseBank.read(bank)) == 3 and (bank / "README").read_text() == "our bank"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bank"]  # no staging folder left beside it
