"""Where metakg writes: bundle folders that cannot be resolved, that hold a mount point, and output files that
are links or FIFOs are refused by name; removing an old version never reaches into a mounted file system."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from metakg.errors import OutputError, UsageError
from metakg.schemas.bundle_dir import bundle_path, check_bundle_folder, mounts_under, remove_tree, writing
from metakg.schemas.locks import open_output, write_output


def test_a_loop_of_links_and_the_root_are_no_bundle_folder(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(UsageError, match="cannot be resolved"):
        bundle_path(tmp_path / "a")
    with pytest.raises(UsageError, match="root of the file system"):
        bundle_path(Path("/"))
    with pytest.raises(UsageError, match="root of the file system"), writing(Path("/")):
        pass


def test_a_folder_of_other_files_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(UsageError, match=r"holds other files \(notes.txt\) and no bundle"):
        check_bundle_folder(tmp_path, tmp_path)
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine"


@contextlib.contextmanager
def tmpfs(point: Path) -> Iterator[Path]:
    point.mkdir(parents=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "none", str(point)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"SKIPPED LOUDLY: cannot mount a tmpfs here (needs root): {done.stderr.decode().strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def test_a_mount_point_inside_a_bundle_folder_is_refused_and_never_emptied(tmp_path: Path) -> None:
    bundle = tmp_path / "kg"
    with tmpfs(bundle / "data") as data:
        (data / "precious.txt").write_text("keep", encoding="utf-8")
        (bundle / "manifest.json").write_text("{}", encoding="utf-8")  # a bundle, someone mounted a folder in
        assert mounts_under(bundle) == [data]
        with pytest.raises(UsageError, match=r"holds a mount point .*data"):
            check_bundle_folder(bundle, bundle)
        remove_tree(bundle)  # what an old version's removal does: the mount and the folders above it stay
        assert (data / "precious.txt").read_text(encoding="utf-8") == "keep"
        assert mounts_under(tmp_path) == [data]


def test_remove_tree_removes_everything_else_and_never_follows_links(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "theirs.txt").write_text("x", encoding="utf-8")
    old = tmp_path / "old"
    (old / "nodes").mkdir(parents=True)
    (old / "nodes" / "part.parquet").write_bytes(b"1")
    (old / "link").symlink_to(outside, target_is_directory=True)
    remove_tree(old)
    assert not old.exists() and (outside / "theirs.txt").exists()


def test_an_output_is_never_written_through_a_link_nor_into_a_fifo(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched", encoding="utf-8")
    link = tmp_path / "report.json"
    link.symlink_to(victim)
    with pytest.raises(OutputError, match="is a symbolic link"):
        write_output(link, "{}")
    assert victim.read_text(encoding="utf-8") == "untouched"
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="is a FIFO"):  # at once: nobody reads it, so waiting would hang
        open_output(fifo)
    with pytest.raises(OutputError, match="not a regular file"):
        open_output(Path("/dev/null"))
    plain = tmp_path / "plain.json"
    plain.write_text("a much longer earlier content", encoding="utf-8")
    write_output(plain, "{}")
    assert plain.read_text(encoding="utf-8") == "{}"  # written from its start, nothing of the old left


def test_a_local_graph_is_never_made_in_a_folder_of_other_files(tmp_path: Path) -> None:
    from metakg import api
    from metakg.config import Settings

    (tmp_path / "thesis.tex").write_text("mine", encoding="utf-8")
    settings = Settings()
    settings.qa.local_kg = str(tmp_path)
    with pytest.raises(UsageError, match=r"holds other files \(thesis.tex\)"), api.local_graph(settings):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thesis.tex"]
