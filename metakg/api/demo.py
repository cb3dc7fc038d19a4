"""``metakg demo``: the main job end to end on the embedded store, on the CommonsenseQA KG of the MetaKGRAG
pilot (from the data directory, else downloaded once into the cache)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from metakg.api._shared import Progress, cache_folder, quiet
from metakg.api.bundles import validate_bundle
from metakg.api.ingest import ingest_triples
from metakg.api.qa import read_questions
from metakg.api.session import OneShotLLM, QASession, embedded_names
from metakg.api.stores import neighbours_of, open_store, paths_between
from metakg.config import Settings
from metakg.errors import ConfigError
from metakg.fetch import download
from metakg.ingest.triples import TripleIngestReport
from metakg.qa_engine.core import Answer, Question
from metakg.schemas.graph_store import GraphPath, Neighbour, NodeRecord
from metakg.schemas.validation import ValidationReport

DEMO_KG = "metakgrag_pilot/commonsenseqa__knowledge_graph.txt"
DEMO_QUESTIONS = "metakgrag_pilot/commonsenseqa__commonsenseqa.json"
_PILOT_URL = (
    "https://raw.githubusercontent.com/XujieYuan/Understanding-KG-RAG/6da0f52f8221b237722a49912b53f3683a190cce/data/"
)
DEMO_KG_URL = _PILOT_URL + "commonsenseqa/knowledge_graph.txt"
DEMO_QUESTIONS_URL = _PILOT_URL + "commonsenseqa/commonsenseqa.json"


def demo_file(settings: Settings, name: str, url: str, progress: Progress | None = None) -> Path:
    """A demo input (``name`` under the data directory), else downloaded once into the cache.

    Raises:
        ConfigError: no data directory and the download fails.
    """
    data_dir = settings.paths.data_dir
    if data_dir is not None and (data_dir / name).is_file():
        return data_dir / name
    cached = cache_folder(settings, "data") / name
    if cached.is_file():
        return cached
    (progress or quiet)(f"downloading {url}")
    return download(
        url,
        cached,
        error=ConfigError,
        hint=f"The demo needs {name}: put it under the data directory "
        f"({data_dir or 'none; set METAKG_PATHS__DATA_DIR'}).",
    )


def demo_triples_file(settings: Settings, progress: Progress | None = None) -> Path:
    """The CommonsenseQA KG file of the MetaKGRAG pilot (data directory, else downloaded once)."""
    return demo_file(settings, DEMO_KG, DEMO_KG_URL, progress)


@dataclass
class DemoResult:
    """What the demo did and found."""

    bundle: Path
    ingest: TripleIngestReport
    validation: ValidationReport
    concept: NodeRecord
    neighbours: list[Neighbour]
    path_ends: tuple[NodeRecord, NodeRecord]
    paths: list[GraphPath]
    counts: dict[str, int] = field(default_factory=dict)
    answers: list[tuple[Question, Answer]] = field(default_factory=list)


def run_demo(
    settings: Settings,
    out: Path,
    *,
    concept: str = "car",
    path_from: str = "dog",
    path_to: str = "cat",
    questions: int = 3,
    progress: Progress | None = None,
) -> DemoResult:
    """Ingest the CommonsenseQA KG, validate it, load it into the embedded store, query it, and answer the
    first ``questions`` CommonsenseQA questions with MetaKGRAG (the configured LLM, else the local one)."""
    say = progress or quiet
    source = demo_triples_file(settings, say)
    say(f"ingesting {source}")
    report = ingest_triples(source, "commonsenseqa", out, settings, progress=say)
    say("validating")
    validation = validate_bundle(out, settings, progress=say)
    embedded_names(out, settings, say)  # stored in the bundle: no question of the demo or after embeds names
    say("loading the embedded store")
    with open_store(settings, out, progress=say) as store:
        node, neighbours = neighbours_of(store, concept, limit=10)
        a, b, paths = paths_between(store, path_from, path_to, k=3, max_hops=settings.store.max_hops)
        answers: list[tuple[Question, Answer]] = []
        if questions > 0:
            asked, _read = read_questions(demo_file(settings, DEMO_QUESTIONS, DEMO_QUESTIONS_URL, say), "pilot")
            say(f"answering {questions} CommonsenseQA questions with metakgrag")
            session = QASession(settings, store, runner=OneShotLLM(), progress=say)
            answers = list(zip(asked[:questions], session.answer_all(asked[:questions], "metakgrag"), strict=True))
        counts = store.counts()
    return DemoResult(
        bundle=out,
        ingest=report,
        validation=validation,
        concept=node,
        neighbours=neighbours,
        path_ends=(a, b),
        paths=paths,
        counts=counts,
        answers=answers,
    )
