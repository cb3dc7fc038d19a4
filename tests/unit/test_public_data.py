"""The pinned public sources the tests fall back on without the shared data folder."""

from __future__ import annotations

import functools
import hashlib
import http.server
import re
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import conftest


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """A folder served over HTTP on 127.0.0.1 (the stand-in for the public source)."""
    root = tmp_path / "served"
    root.mkdir()
    (root / "right.txt").write_text("the original\n")
    (root / "changed.txt").write_text("not what the tests ran with\n")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_file_is_kept_only_when_its_checksum_matches(
    served: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(conftest, "_offline", [])  # an earlier offline attempt in this run must not count
    right = hashlib.sha256(b"the original\n").hexdigest()
    folder = tmp_path / "cache"
    files = {"a/right.txt": (f"{served}/right.txt", right), "changed.txt": (f"{served}/changed.txt", right)}
    assert conftest._fetch_pinned(folder, files) == 1
    assert (folder / "a" / "right.txt").read_text() == "the original\n" and not (folder / "changed.txt").exists()
    assert conftest._fetch_pinned(folder, {"a/right.txt": ("http://127.0.0.1:9/gone", right)}) == 1  # kept


def test_every_pinned_file_names_a_commit_and_matches_the_shared_copy() -> None:
    pinned = tomllib.loads(conftest.PUBLIC_DATA.read_text(encoding="utf-8"))["files"]
    assert len(pinned) >= 10
    for name, entry in pinned.items():
        assert re.search(r"/[0-9a-f]{40}/", entry["url"]), f"{name}: the URL must name a commit"
        shared = conftest.DATA / name
        if shared.is_file():  # without the shared folder, only the form is checked
            assert hashlib.sha256(shared.read_bytes()).hexdigest() == entry["sha256"], name
