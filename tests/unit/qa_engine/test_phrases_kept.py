"""The phrase index is built by the steps that make a graph to ask (embed; load neo4j in the integration
tests), so the first question of a later process reads it instead of building it."""

from __future__ import annotations

from pathlib import Path

import pytest

from metakg import api
from metakg.config import load_settings
from metakg.loaders.embedded_store import EmbeddedStore
from metakg.qa_engine.services import QAServices, keep_phrases, phrases_file
from metakg.schemas.bundle import read_bundle
from metakg.text_processing import PhraseIndex
from tests.conftest import HashEmbedder, small_bundle


def no_building(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the phrase index was built at the question")

    monkeypatch.setattr(PhraseIndex, "__init__", refuse)


def test_a_kept_index_is_read_by_the_next_services(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = EmbeddedStore.from_bundle(small_bundle())
    path = keep_phrases(store, tmp_path)
    assert path == phrases_file(store.names(), tmp_path) and path.is_file()
    written = path.stat().st_mtime_ns
    assert keep_phrases(store, tmp_path) == path and path.stat().st_mtime_ns == written  # kept, not rebuilt
    no_building(monkeypatch)
    services = QAServices(store, HashEmbedder(), max_entries=100, cache_dir=tmp_path)
    assert "aspirin" in [n.lower() for n in services.phrases.find("what does aspirin treat")]


def test_embed_keeps_the_phrase_index(tmp_path: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = load_settings()
    settings = base.model_copy(
        update={
            "embedder": base.embedder.model_copy(update={"model_dir": model_dir}),
            "paths": base.paths.model_copy(update={"cache_dir": tmp_path / "cache"}),
        }
    )
    bundle = tmp_path / "kg"
    api.write_validated(bundle, small_bundle(), settings)
    names = EmbeddedStore.from_bundle(read_bundle(bundle)).names()
    assert not phrases_file(names, tmp_path / "cache").exists()
    api.embed_bundle(bundle, settings)
    assert phrases_file(names, tmp_path / "cache").is_file()
    no_building(monkeypatch)
    with api.open_store(settings, bundle) as store:
        services = QAServices(store, HashEmbedder(), max_entries=100, cache_dir=tmp_path / "cache")
        assert services.phrases.size == len({n.lower() for n in names if len(n) > 1})
