"""A benchmark part's peak memory is its own: not the memory of the process that started it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks.common import run_measured

ALLOCATE = "import sys; block = bytearray(int(sys.argv[1]) * 2**20); block[::4096] = b'x' * len(block[::4096])"


def test_a_part_reads_its_own_peak_not_its_starters() -> None:
    held = bytearray(400 * 2**20)
    held[::4096] = b"x" * len(held[::4096])  # this process now holds 400 MiB more
    small = run_measured([sys.executable, "-c", ALLOCATE, "1"])
    large = run_measured([sys.executable, "-c", ALLOCATE, "300"])
    assert small.peak_mib < 150, small  # a child's ru_maxrss read directly would carry the 400 MiB held here
    assert 300 <= large.peak_mib < 450, large
    assert held[0] == ord("x")


def test_a_failing_part_says_so_with_its_output() -> None:
    with pytest.raises(RuntimeError, match="boom"):
        run_measured([sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"])


def test_a_record_says_whether_its_data_is_synthetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from benchmarks import common

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    with pytest.raises(TypeError):
        common.record("no_say", {"x": 1})  # type: ignore[call-arg]  # each benchmark must say which
    # a figure of the same name cannot stand in for what the benchmark said
    path = common.record("real", {"x": 1, "synthetic_data": True}, synthetic_data=False)
    assert json.loads(path.read_text(encoding="utf-8"))["synthetic_data"] is False
    assert not (tmp_path / "no_say.json").exists()
