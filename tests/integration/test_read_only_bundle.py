"""A bundle on a read-only mount (or in a folder without write permission) is read and questioned as it is:
nothing is refused as "busy" and nothing is written to it."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from metakg.schemas.bundle import write_bundle
from tests.conftest import small_bundle
from tests.unit.cli.test_cli import run


@contextlib.contextmanager
def read_only(folder: Path, where: Path) -> Iterator[Path]:
    """``folder`` seen read-only at ``where``: a read-only bind mount as root (root writes through
    permissions), else the folder itself with its write permission taken away."""
    if os.geteuid() != 0:
        paths = [folder, *folder.rglob("*")]
        for path in paths:
            path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield folder
        finally:
            for path in paths:
                path.chmod(0o755 if path.is_dir() else 0o644)
        return
    where.mkdir()
    bound = subprocess.run(["mount", "--bind", str(folder), str(where)], capture_output=True, text=True)
    if bound.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"cannot bind-mount a read-only folder in CI: {bound.stderr}")
        pytest.skip(f"cannot bind-mount a read-only folder here: {bound.stderr.strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(where)], check=True, capture_output=True)
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_read_only_bundle_is_questioned_as_it_is(tmp_path: Path, any_embedder: None) -> None:
    shelf = tmp_path / "shelf"
    write_bundle(shelf / "b", small_bundle())  # never embedded: a question would store its name embeddings
    before = sorted(p.name for p in shelf.rglob("*"))
    with read_only(shelf, tmp_path / "ro") as seen:
        bundle = seen / "b"
        _, info = run("info", str(bundle), "--json")
        assert info["nodes"] == small_bundle().nodes.height
        result, answer = run("ask", "What does aspirin treat?", "--bundle", str(bundle), "--no-llm", "--json")
        assert answer["evidence"], answer  # answered over the bundle as it is
        assert "busy" not in result.stderr and "keeps no name embeddings" in result.stderr
        _, search = run("query", "search", str(bundle), "aspirin", "--json")
        assert search["count"] >= 1
        _, refused = run("embed", str(bundle), "--json", code=1)  # a write is refused, naming why
        assert refused["error_type"] == "OutputError" and "cannot make the lock file" in refused["error"]
        assert "busy" not in refused["error"]
    assert sorted(p.name for p in shelf.rglob("*")) == before


@pytest.mark.parametrize(
    "command",
    [
        ("export", "rdf", "{b}", "-o", "{ro}/kg.nt", "--format", "nt"),
        ("export", "neo4j-admin", "{b}", "{ro}/admin"),
        ("merge", "{b}", "{b}", "-o", "{ro}/merged"),
        ("ingest", "triples", "{triples}", "-d", "t", "-o", "{ro}/b2"),
    ],
)
def test_an_output_on_a_read_only_mount_is_a_clean_error(tmp_path: Path, command: tuple[str, ...]) -> None:
    write_bundle(tmp_path / "b", small_bundle())
    triples = tmp_path / "kg.txt"
    triples.write_text("a\tr\tb\n")
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    with read_only(shelf, tmp_path / "ro") as seen:
        args = [a.format(b=tmp_path / "b", ro=seen, triples=triples) for a in command]
        _, out = run(*args, "--json", code=1)  # once a traceback from cleaning up what was never made
        assert out["ok"] is False and out["error_type"] in ("ExportError", "OutputError"), out
        assert "Read-only file system" in out["error"] or "permission" in out["error"].lower(), out
    assert not any(shelf.iterdir())
