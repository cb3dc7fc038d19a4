"""The phrase index kept on disk when many questions build it at once (the first questions a server answers
over a new graph): every builder succeeds, and the file is always whole."""

from __future__ import annotations

import threading
from pathlib import Path

import polars as pl
import pytest

from metakg.loaders.embedded_store import EmbeddedStore
from metakg.qa_engine.services import QAServices, save_phrases
from metakg.schemas.tables import conform_edges, conform_nodes
from metakg.text_processing import PhraseIndex
from tests.conftest import HashEmbedder

BUILDERS = 12


def graph(names: int) -> EmbeddedStore:
    """A graph of ``names`` distinct names: enough that building and saving the index take a while."""
    nodes = pl.DataFrame(
        {
            "id": [f"kg:t/{i}" for i in range(names)],
            "name": [f"compound number {i} alpha" for i in range(names)],
            "type": "concept",
            "source": "t",
            "description": None,
            "aliases": [[] for _ in range(names)],
            "xrefs": [[] for _ in range(names)],
        }
    )
    edges = pl.DataFrame(
        {"src": ["kg:t/0"], "rel": ["r"], "dst": ["kg:t/1"], "source": "t", "confidence": [1.0],
         "record_ids": [["t.txt:1"]]}
    )  # fmt: skip
    return EmbeddedStore(conform_nodes(nodes), conform_edges(edges))


@pytest.mark.parametrize("round_", range(3))
def test_builders_of_one_new_index_at_once_all_succeed_and_readers_see_whole_files(tmp_path: Path, round_: int) -> None:
    store = graph(2000)
    services = QAServices(store, HashEmbedder(), max_entries=100, cache_dir=tmp_path)
    folder = tmp_path / "phrases"
    start = threading.Barrier(BUILDERS + 1)
    building = threading.Event()
    failures: list[BaseException] = []
    torn: list[Path] = []
    sizes: list[int] = []

    def build() -> None:
        start.wait()
        try:
            sizes.append(services.phrases.size)
        except BaseException as e:  # every failure is the finding
            failures.append(e)

    def read() -> None:  # a reader (another process starting) meanwhile: a file there is always whole
        start.wait()
        while building.is_set():
            for path in folder.glob("*.json"):
                if path.exists() and PhraseIndex.load(path) is None and path.exists():
                    torn.append(path)

    building.set()
    threads = [threading.Thread(target=build) for _ in range(BUILDERS)]
    reader = threading.Thread(target=read)
    for thread in [*threads, reader]:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    building.clear()
    reader.join(timeout=60)
    assert not failures, failures
    assert len(sizes) == BUILDERS and set(sizes) == {2000}
    assert not torn
    saved = list(folder.iterdir())
    assert len(saved) == 1 and saved[0].suffix == ".json"  # no temporary file left behind
    index = PhraseIndex.load(saved[0])
    assert index is not None and index.size == 2000
    assert index.find("is compound number 7 alpha toxic?") == ["compound number 7 alpha"]
    again = QAServices(store, HashEmbedder(), max_entries=100, cache_dir=tmp_path)  # the next process reads it
    assert again.phrases.size == 2000


def test_an_index_that_cannot_be_kept_still_serves(tmp_path: Path) -> None:
    index = PhraseIndex(["aspirin", "migraine"])
    blocked = tmp_path / "phrases"
    blocked.write_text("a file where the folder should be")
    save_phrases(index, blocked / "x.json")  # logged, not raised: the file only saves time
    services = QAServices(graph(10), HashEmbedder(), max_entries=10, cache_dir=tmp_path)
    assert services.phrases.size == 10
    assert blocked.read_text() == "a file where the folder should be"
