"""Downloads of the demo KG, against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest

from metakg import api
from metakg.api import demo as api_demo
from metakg.api import ingest as api_ingest
from metakg.config import load_settings
from metakg.errors import ConfigError, UsageError


@pytest.fixture
def server(tmp_path: Path, serve_dir: Callable[[Path], str]) -> str:
    root = tmp_path / "www"
    root.mkdir()
    (root / "kg.txt").write_text("dog\tlives with\thuman\ncat\tlikes\thuman\n", encoding="utf-8")
    return serve_dir(root)


def test_demo_file_is_downloaded_once_into_the_cache(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("METAKG_PATHS__DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setattr(api_demo, "DEMO_KG_URL", f"{server}/kg.txt")
    settings = load_settings()
    path = api.demo_triples_file(settings)
    assert path.is_relative_to(settings.paths.cache_dir)
    assert path.read_text(encoding="utf-8").startswith("dog\tlives with")
    monkeypatch.setattr(api_demo, "DEMO_KG_URL", f"{server}/gone.txt")  # the cached copy is used from now on
    assert api.demo_triples_file(settings) == path


def test_failed_download_is_explained_and_leaves_nothing(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("METAKG_PATHS__DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setattr(api_demo, "DEMO_KG_URL", f"{server}/missing.txt")
    settings = load_settings()
    with pytest.raises(ConfigError, match="download of"):
        api.demo_triples_file(settings)
    assert not list(settings.paths.cache_dir.rglob("*.txt*"))


def test_primekg_download_checks_the_md5(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_dir: Path
) -> None:
    from metakg.errors import InputDataError

    monkeypatch.setattr(api_ingest, "DATAVERSE_KG_URL", f"{server}/kg.txt")
    settings = load_settings()
    with pytest.raises(InputDataError, match="MD5"):
        api.ingest_primekg(None, tmp_path / "b", settings, download_missing=True)
    head = (data_dir / "primekg" / "primekg_kg_head5.csv").read_bytes()
    cached = settings.paths.cache_dir / "primekg" / "kg.csv"
    cached.write_bytes(head)  # a file already in the cache is not fetched again; its MD5 is still checked
    monkeypatch.setattr(api_ingest, "KG_MD5", hashlib.md5(head, usedforsecurity=False).hexdigest())
    report = api.ingest_primekg(None, tmp_path / "b", settings, download_missing=True)
    assert (report.read, report.edges) == (5, 5)
    with pytest.raises(UsageError, match="--download"):
        api.ingest_primekg(None, tmp_path / "b", settings)
