"""Bundle versions: a rewrite is swapped in whole, readers see one version, a manifest is trusted only as far as
it is confined and hashed, and a writer never replaces a version it did not read."""

from __future__ import annotations

import errno
import json
import os
import threading
from pathlib import Path

import polars as pl
import pytest

from metakg.errors import BundleChanged, BundleError, OutputError, ResourceBusy, UsageError
from metakg.schemas import bundle as bundle_module
from metakg.schemas.bundle import (
    EDGES_FILE,
    MANIFEST_FILE,
    NODES_FILE,
    Bundle,
    read_bundle,
    read_embeddings,
    read_manifest,
    verify_bundle,
    write_bundle,
    write_embeddings,
)
from metakg.schemas.bundle_dir import recover, writing
from metakg.schemas.tables import conform_nodes
from tests.conftest import small_bundle


def grown(n: int) -> Bundle:
    """The small bundle with ``n`` extra nodes (so versions differ in their counts)."""
    base = small_bundle()
    extra = conform_nodes(
        pl.DataFrame(
            {
                "id": [f"kg:test/extra{i}" for i in range(n)],
                "name": [f"extra {i}" for i in range(n)],
                "type": ["concept"] * n,
                "source": ["test"] * n,
            }
        )
    )
    return Bundle(pl.concat([base.nodes, extra]), base.edges)


def beside(path: Path) -> list[str]:
    """Names beside the bundle other than the bundle and its lock."""
    return sorted(p.name for p in path.parent.iterdir() if p.name not in (path.name, f".{path.name}.lock"))


def test_a_rewrite_that_fails_midway_leaves_the_old_version_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "b"
    write_bundle(path, grown(1))
    before = {name: (path / name).read_bytes() for name in os.listdir(path)}
    real = bundle_module._write_parquet

    def full_disk(frame: pl.DataFrame, target: Path) -> None:
        if target.name == EDGES_FILE:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(frame, target)

    monkeypatch.setattr(bundle_module, "_write_parquet", full_disk)
    with pytest.raises(BundleError, match="No space left on device; the previous version is unchanged"):
        write_bundle(path, grown(5))
    assert {name: (path / name).read_bytes() for name in os.listdir(path)} == before
    assert read_bundle(path).nodes.height == small_bundle().nodes.height + 1
    assert beside(path) == []  # the staging folder is gone


def test_a_first_write_that_fails_leaves_nothing_and_says_nothing_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 56, item 11: a write to a new output that fails (a full disk) leaves no bundle, no staging folder
    and no ``.NAME.lock`` beside it, and does not claim a previous version is unchanged when there was none."""
    path = tmp_path / "new"

    def full_disk(frame: pl.DataFrame, target: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(bundle_module, "_write_parquet", full_disk)
    with (
        pytest.raises(BundleError, match="No space left on device; nothing was written") as failed,
        writing(path) as real,
    ):
        write_bundle(real, small_bundle())
    assert "previous version" not in str(failed.value)
    assert sorted(os.listdir(tmp_path)) == []  # once: .new.lock stayed behind
    monkeypatch.undo()
    with writing(path) as real:  # the next writer takes the lock as usual, and keeps it beside the bundle
        write_bundle(real, small_bundle())
    assert sorted(os.listdir(tmp_path)) == [".new.lock", "new"]


def test_a_writer_killed_before_the_swap_leaves_a_staging_folder_the_next_writer_removes(tmp_path: Path) -> None:
    path = tmp_path / "b"
    write_bundle(path, grown(1))
    dead = tmp_path / ".b.new-999999999-deadbeef"  # a staging folder whose writer is gone
    dead.mkdir()
    (dead / NODES_FILE).write_bytes(b"half a table")
    assert read_bundle(path).nodes.height == small_bundle().nodes.height + 1  # readers never look at it
    with writing(path):
        pass
    assert not dead.exists()


def test_a_version_retired_by_an_unfinished_two_rename_swap_is_put_back(tmp_path: Path) -> None:
    path = tmp_path / "b"
    write_bundle(path, grown(2))
    retired = tmp_path / ".b.old-999999999-deadbeef"
    path.rename(retired)  # the crash between the two renames of a platform without an exchange
    with pytest.raises(BundleError, match=r"an interrupted write left its previous version at .*\.b\.old-"):
        read_bundle(path)
    recover(path)
    assert read_bundle(path).nodes.height == small_bundle().nodes.height + 2


def test_readers_during_rewrites_always_see_one_whole_version(tmp_path: Path) -> None:
    path = tmp_path / "b"
    write_bundle(path, grown(0))
    stop = threading.Event()
    errors: list[str] = []
    reads = 0

    def rewrite() -> None:
        n = 0
        while not stop.is_set():
            n = n % 7 + 1
            write_bundle(path, grown(n))

    writer = threading.Thread(target=rewrite)
    writer.start()
    try:
        for _ in range(150):
            try:
                read = read_bundle(path)
            except BundleError as e:
                errors.append(str(e))
                continue
            reads += 1
            if read.manifest["counts"]["nodes"] != read.nodes.height:  # tables and manifest of one version
                errors.append(f"{read.nodes.height} nodes under a manifest counting {read.manifest['counts']}")
    finally:
        stop.set()
        writer.join()
    assert errors == [] and reads == 150


def test_a_writer_refuses_to_replace_a_version_it_did_not_read(tmp_path: Path) -> None:
    path = tmp_path / "b"
    write_bundle(path, grown(1))
    mine = read_bundle(path)
    write_bundle(path, grown(3))  # another process's version
    theirs = (path / MANIFEST_FILE).read_bytes()
    with pytest.raises(BundleChanged, match="changed since it was read"):
        write_bundle(path, grown(9), expect=mine.token)
    assert (path / MANIFEST_FILE).read_bytes() == theirs
    again = read_bundle(path)
    write_bundle(path, grown(9), expect=again.token)  # read again: the write goes through
    assert read_bundle(path).nodes.height == small_bundle().nodes.height + 9


def test_embedding_keeps_every_other_file_and_a_user_note(tmp_path: Path) -> None:
    path = tmp_path / "b"
    write_bundle(path, grown(1))
    (path / "NOTES.md").write_text("mine")
    (path / "validation.html").write_text("<p>report</p>")
    nodes_inode = (path / NODES_FILE).stat().st_ino
    bundle = read_bundle(path)
    vectors = pl.Series([[0.5, 0.5]] * bundle.nodes.height).to_numpy()
    import numpy as np

    write_embeddings(path, bundle, bundle.nodes["id"], np.asarray(vectors.tolist()), model="m", dim=2)
    assert (path / "NOTES.md").read_text() == "mine" and (path / "validation.html").read_text() == "<p>report</p>"
    assert (path / NODES_FILE).stat().st_ino == nodes_inode  # kept as it was (a hard link), not rewritten
    again = read_bundle(path)
    stored = read_embeddings(path, again)
    assert stored is not None and stored.height == again.nodes.height
    verify_bundle(path)


def test_an_output_that_is_a_file_or_a_foreign_folder_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "f"
    file.write_text("x")
    with pytest.raises(UsageError, match="is a file, not a bundle directory"), writing(file):
        pass
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("years of work")
    with pytest.raises(UsageError, match=r"holds other files \(thesis.tex\) and no bundle"), writing(home):
        pass
    assert (home / "thesis.tex").read_text() == "years of work"


def test_a_second_writer_is_busy_and_a_folder_without_write_permission_is_an_output_error(tmp_path: Path) -> None:
    path = tmp_path / "b"
    with writing(path), pytest.raises(ResourceBusy, match="another metakg process is writing"), writing(path):
        pass
    if os.geteuid() == 0:
        return  # root writes anywhere: the permission check cannot be shown
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(OutputError, match="cannot make the lock file"), writing(locked / "b"):
            pass
    finally:
        locked.chmod(0o700)


def edit_manifest(path: Path, **changes: object) -> None:
    manifest = json.loads((path / MANIFEST_FILE).read_text())
    manifest.update(changes)
    (path / MANIFEST_FILE).write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    "name", ["../../etc/passwd", "/etc/passwd", "nodes.parquet/../../../secret", "notes.txt", "manifest.json"]
)
def test_a_manifest_listing_a_file_outside_the_tables_is_refused_before_anything_is_read(
    tmp_path: Path, name: str
) -> None:
    path = tmp_path / "b"
    write_bundle(path, small_bundle())
    manifest = json.loads((path / MANIFEST_FILE).read_text())
    edit_manifest(path, content_hashes=manifest["content_hashes"] | {name: "0" * 64})
    for read in (read_bundle, verify_bundle, read_manifest):
        with pytest.raises(BundleError, match="which is not one of a bundle's tables"):
            read(path)


@pytest.mark.parametrize("name", ["nodes.parquet", MANIFEST_FILE])
def test_a_table_or_manifest_that_is_a_symbolic_link_is_never_followed(tmp_path: Path, name: str) -> None:
    path = tmp_path / "b"
    write_bundle(path, small_bundle())
    outside = tmp_path / f"outside-{name}"
    (path / name).rename(outside)  # the very bytes the manifest hashed: only the link tells them apart
    (path / name).symlink_to(outside)
    for read in (read_bundle, verify_bundle):
        with pytest.raises(BundleError, match=f"{name} is a symbolic link"):
            read(path)


@pytest.mark.parametrize("hashes", [None, {}, {"rejects.parquet": "0" * 64}])
def test_a_manifest_without_hashes_is_refused_unless_told(tmp_path: Path, hashes: object) -> None:
    path = tmp_path / "b"
    write_bundle(path, small_bundle())
    edit_manifest(path, content_hashes=hashes)
    with pytest.raises(BundleError, match=r"records no content hash .*accepting changes") as refused:
        read_bundle(path)
    assert refused.value.cli_fix == f"metakg validate {path} --accept-changes"
    told = read_bundle(path, verify=False)  # validate --accept-changes reads it, and records the hashes
    write_bundle(path, told)
    assert read_bundle(path).nodes.height == small_bundle().nodes.height


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ([1, 2], "holds a JSON array, not an object"),
        ("text", "holds a JSON string, not an object"),
        ({"schema_version": 1.1}, "field 'schema_version' is a JSON number, not a string"),
        ({"sources": {"a": 1}}, "field 'sources' is a JSON object, not an array"),
        ({"content_hashes": ["nodes.parquet"]}, "field 'content_hashes' is a JSON array, not an object"),
        ({"content_sizes": {"nodes.parquet": "12"}}, r"content_sizes\['nodes.parquet'\] is not a valid size"),
        ({"embeddings": {"model": "m", "dim": "384"}}, "needs a string 'model' and a whole number 'dim'"),
    ],
)
def test_a_manifest_of_the_wrong_shape_is_a_clear_error(tmp_path: Path, manifest: object, message: str) -> None:
    path = tmp_path / "b"
    write_bundle(path, small_bundle())
    if isinstance(manifest, dict):
        edit_manifest(path, **manifest)
    else:
        (path / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match=message):
        read_bundle(path)


def test_a_table_column_of_the_wrong_type_is_named(tmp_path: Path) -> None:
    path = tmp_path / "b"
    write_bundle(path, small_bundle())
    edges = pl.read_parquet(path / EDGES_FILE).with_columns(pl.lit("very sure").alias("confidence"))
    edges.write_parquet(path / EDGES_FILE)
    with pytest.raises(BundleError, match=r"edges.parquet: edge column 'confidence' holds String"):
        read_bundle(path, verify=False)


def test_a_manifest_nested_too_deeply_or_with_garbage_sources_or_counts_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "b"
    write_bundle(path, small_bundle())
    good = (path / MANIFEST_FILE).read_text()
    (path / MANIFEST_FILE).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(BundleError, match="nests too deeply"):
        read_manifest(path)
    for change, message in (
        ({"sources": [1, 2]}, "'sources' must hold objects"),
        ({"counts": {"nodes": "lots"}}, "counts.nodes is not a count"),
        ({"counts": {"nodes": -5}}, "counts.nodes is not a count"),
        ({"counts": {"node_types": [1]}}, "counts.node_types must map names to counts"),
    ):
        (path / MANIFEST_FILE).write_text(good)
        edit_manifest(path, **change)
        with pytest.raises(BundleError, match=message):
            read_bundle(path)


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_table_that_is_not_a_file_is_named_and_never_waited_on(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "b"
    write_bundle(path, small_bundle())
    (path / NODES_FILE).unlink()
    if kind == "folder":
        (path / NODES_FILE).mkdir()
    else:
        os.mkfifo(path / NODES_FILE)  # opening it for reading would wait for a writer for ever
    with pytest.raises(BundleError, match=r"nodes.parquet is not a regular file"):
        read_bundle(path)


def test_a_users_files_in_a_bundle_folder_survive_rewrites_and_metakgs_temporary_files_do_not(tmp_path: Path) -> None:
    path = tmp_path / "b"
    write_bundle(path, small_bundle())
    (path / "draft.tmp").write_text("the user's")  # named like a temporary file, but not one of metakg's
    (path / "notes.md").write_text("the user's")
    (path / "nodes.parquet.tmp").write_text("left by an earlier metakg")
    (path / f"edges.parquet.{os.getpid()}-0123abcd.tmp").write_text("left by a killed writer")
    write_bundle(path, read_bundle(path))
    names = {p.name for p in path.iterdir()}
    assert {"draft.tmp", "notes.md"} <= names
    assert not any(n.endswith(".tmp") and n != "draft.tmp" for n in names)
