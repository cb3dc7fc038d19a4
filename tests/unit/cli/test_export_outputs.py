"""Exports never write into a bundle's own files, through a link, or into a FIFO (found by the third probe:
`export rdf -o kg/nodes.parquet` overwrote the table it exported; `export neo4j-admin` wrote through a link
in its folder, and hung on a FIFO there)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from metakg import api
from metakg.config import load_settings
from metakg.schemas.bundle import Bundle, read_bundle
from tests.conftest import small_bundle
from tests.unit.cli.test_cli import run


def _bundle(tmp_path: Path) -> Path:
    path = tmp_path / "kg"
    api.write_validated(path, small_bundle(), load_settings())
    return path


def test_an_export_over_a_file_of_the_bundle_is_refused_and_the_bundle_stays_whole(tmp_path: Path) -> None:
    kg = _bundle(tmp_path)
    before = (kg / "nodes.parquet").read_bytes()
    for target in ("nodes.parquet", "edges.parquet", "rejects.parquet"):
        _, out = run("export", "rdf", str(kg), "-o", str(kg / target), "--json", code=1)
        assert "is a file of the metakg bundle" in out["error"]
    assert (kg / "nodes.parquet").read_bytes() == before
    assert read_bundle(kg).nodes.height == small_bundle().nodes.height
    run("export", "rdf", str(kg), "-o", str(kg / "kg.nt"), "--json")  # a file of the user's own is fine


def test_neo4j_admin_files_are_never_written_through_a_link_or_into_a_fifo(tmp_path: Path) -> None:
    kg = _bundle(tmp_path)
    out = tmp_path / "import"
    out.mkdir()
    mine = tmp_path / "precious.txt"
    mine.write_text("the user's own file\n")
    (out / "nodes.csv").symlink_to(mine)
    _, refused = run("export", "neo4j-admin", str(kg), str(out), "--json", code=1)
    assert "nodes.csv" in refused["error"] and mine.read_text() == "the user's own file\n"
    (out / "nodes.csv").unlink()
    os.mkfifo(out / "edges.csv")
    result: dict[str, object] = {}
    worker = threading.Thread(target=lambda: result.update(run("export", "neo4j-admin", str(kg), str(out),
                                                                "--json", code=1)[1]))  # fmt: skip
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "the export blocked on the FIFO"
    assert "edges.csv" in str(result["error"]) and not (out / "nodes.csv").exists()  # refused before any is written
    (out / "edges.csv").unlink()
    _, done = run("export", "neo4j-admin", str(kg), str(out), "--json")
    assert Path(done["files"]["nodes"]).read_text().count("\n") == small_bundle().nodes.height


def test_an_export_that_fails_midway_leaves_the_earlier_one_whole_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A neo4j-admin export killed or out of space once left a mix of two exports; an RDF export killed before
    its rename left its temporary file for good (probe round 4)."""
    import polars as pl

    kg = _bundle(tmp_path)
    out = tmp_path / "import"
    run("export", "neo4j-admin", str(kg), str(out), "--json")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real = pl.DataFrame.write_csv
    calls = {"n": 0}

    def failing(self: pl.DataFrame, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(28, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pl.DataFrame, "write_csv", failing)
    other = tmp_path / "other"
    api.write_validated(other, Bundle(small_bundle().nodes.head(3), small_bundle().edges.head(1)), load_settings())
    _, failed = run("export", "neo4j-admin", str(other), str(out), "--json", code=1)
    assert "No space left on device" in failed["error"]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # the earlier export, whole
    monkeypatch.setattr(pl.DataFrame, "write_csv", real)

    left = tmp_path / "kg.nt.4194303-0123abcd.tmp"  # a pid no process has: an export killed before its rename
    left.write_text("half")
    run("export", "rdf", str(kg), "-o", str(tmp_path / "kg.nt"), "--json")
    assert not left.exists() and (tmp_path / "kg.nt").stat().st_size > 0
