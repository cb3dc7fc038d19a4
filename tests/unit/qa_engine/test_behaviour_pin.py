"""The strategies' answers, evidence and traces on a slice of the pilot CommonsenseQA set are pinned.

``tests/data/qa_pin_csqa.json`` was first written before strategies became plugins, and rewritten when
the retrieval-quality work changed retrieval on purpose (choices grounded, tuned MetaKGRAG defaults,
kg_rag ranked across starts). Same scripted LLM, the real MiniLM embedder, the MetaKGRAG authors'
CommonsenseQA KG, the first 5 questions, every strategy and ablation. Any change to retrieval, the
cycle, the prompts or the answer step shows here as a diff; a deliberate change rewrites the file with
``python -m tests.unit.qa_engine.test_behaviour_pin``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from metakg import api
from metakg.config import QASettings, load_settings
from metakg.llm.client import ChatRequest
from metakg.llm.embedder import Embedder, OnnxEmbedder
from metakg.llm.scripted import ScriptedClient
from metakg.loaders.embedded_store import EmbeddedStore
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.strategies import REGISTRY
from metakg.schemas.bundle import read_bundle

PIN = Path(__file__).resolve().parents[2] / "data" / "qa_pin_csqa.json"
RUNS = [("llm_only", ()), ("kg_rag", ()), ("metakgrag", ())] + [
    ("metakgrag", (s,)) for s in ("no_completeness", "no_relevance", "no_restart", "no_cycle")
]
KEPT = ("choice", "evidence", "question_id", "reason", "status", "strategy", "text", "trace")


def script(req: ChatRequest) -> str:
    """Concepts: the question's words longer than 4 letters; answers: a letter chosen by the prompt's hash,
    so a change of evidence or prompt changes the answer."""
    prompt = req.messages[-1].content
    if "key concepts" in prompt:
        words = [w.strip("?.,!'\"").lower() for w in prompt.rsplit("Question:", 1)[1].split()]
        return "\n".join(w for w in words if len(w) > 4)
    letters = [line[0] for line in prompt.splitlines() if len(line) > 2 and line[1] == ":" and line[0] in "ABCDE"]
    return f"Answer: {letters[zlib.crc32(prompt.encode()) % len(letters)]}"


def answers(bundle: Path, questions_file: Path, embedder: Embedder) -> dict[str, list[dict[str, Any]]]:
    store = EmbeddedStore.from_bundle(read_bundle(bundle), embedder=embedder)
    questions, _ = api.read_questions(questions_file, "pilot", limit=5)
    ctx = QAContext(store=store, embedder=embedder, settings=QASettings(), llm=ScriptedClient(script))
    result: dict[str, list[dict[str, Any]]] = {}

    async def run() -> None:
        for name, switches in RUNS:
            strategy = REGISTRY.create(name, ctx.settings, switches)
            result[strategy.label] = [
                {k: v for k, v in (await strategy.answer(q, ctx)).to_dict().items() if k in KEPT} for q in questions
            ]

    asyncio.run(run())
    return json.loads(json.dumps(result))  # tuples as lists, like the file


def _same(old: Any, new: Any) -> bool:
    """Equal, numbers to within 2e-4: the traces round scores to 4 places, and a score whose fifth place sits
    on a rounding boundary rounds either way on another CPU (onnxruntime's kernels differ by the last bits)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return old.keys() == new.keys() and all(_same(old[k], new[k]) for k in old)
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(_same(a, b) for a, b in zip(old, new, strict=True))
    if isinstance(old, float | int) and isinstance(new, float | int) and not isinstance(old, bool):
        return abs(old - new) <= 2e-4
    return bool(old == new)


@pytest.fixture(scope="module")
def csqa(tmp_path_factory: pytest.TempPathFactory, public_file: Callable[[str], Path]) -> Path:
    out = tmp_path_factory.mktemp("pin") / "csqa"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("METAKG_PATHS__CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        api.ingest_triples(
            public_file("metakgrag_pilot/commonsenseqa__knowledge_graph.txt"), "commonsenseqa", out, load_settings()
        )
    return out


def test_answers_evidence_and_traces_are_unchanged(
    csqa: Path, public_file: Callable[[str], Path], minilm: OnnxEmbedder
) -> None:
    pinned = json.loads(PIN.read_text(encoding="utf-8"))
    now = answers(csqa, public_file("metakgrag_pilot/commonsenseqa__commonsenseqa.json"), minilm)
    assert sorted(now) == sorted(pinned)
    for label, rows in pinned.items():
        for old, new in zip(rows, now[label], strict=True):
            assert _same({k: old[k] for k in KEPT}, new), f"{label} {old['question_id']} changed"
    assert any(row["trace"].get("cycles") for row in now["metakgrag"])  # the slice exercises the cycle


if __name__ == "__main__":  # rewrite the pin: python -m tests.unit.qa_engine.test_behaviour_pin BUNDLE DATA_DIR MODEL
    bundle, data, model = (Path(a) for a in sys.argv[1:4])
    rows = answers(bundle, data / "metakgrag_pilot/commonsenseqa__commonsenseqa.json", OnnxEmbedder(model))
    PIN.write_text(json.dumps(rows, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
