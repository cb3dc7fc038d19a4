"""The crash harness in its bounded form: each writing command killed at two points of its writing phase (as soon
as the staging folder appears, and a random share of the write later), and on a disk that fills during the
rewrite; the bundle must always read, with verified hashes, as the old version or the new one. ``make bench`` runs
it in full (``benchmarks/bench_crash.py``: 50 points per command, half of them anywhere in the run).

The kills are where harm can be done: a kill before the writing phase (most of a run is Python starting) cannot
tell a crash-safe writer from one that is not. A writer that stopped staging its new version fails here
(``during_write`` stays 0: checked once by making the bundle writer write in place, on ``ingest triples``,
``merge``, ``validate`` and the server's write)."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import crash_harness as harness
from tests.fault_server import FaultServer

POINTS = 2


@pytest.fixture(scope="module")
def llm() -> Iterator[str]:
    server = FaultServer().start()
    server.reply_for = lambda body: "thing\\relates to\\" + str(len(body["messages"][-1]["content"]))
    yield server.url
    server.stop()


def cases(llm: str) -> list[harness.Case]:
    chosen = [
        harness.ingest_case(20_000),
        harness.primekg_case(20_000),
        harness.merge_case(8_000),
        harness.validate_case(3_000),
        harness.extract_case(12, llm),
    ]
    if os.environ.get("METAKG_EMBEDDER__MODEL_DIR"):
        chosen.append(harness.embed_case(500, {}))
    return chosen


def assert_whole(outcome: harness.Outcome) -> None:
    assert outcome.unreadable == [], outcome.as_dict()
    assert outcome.old + outcome.new == outcome.points and outcome.recovered


@pytest.mark.parametrize("name", ["ingest triples", "ingest primekg", "merge", "validate", "extract", "embed"])
def test_a_killed_writer_leaves_the_old_or_the_new_version(name: str, llm: str, tmp_path: Path) -> None:
    found = [case for case in cases(llm) if case.name == name]
    if not found:
        pytest.skip("embed needs the ONNX model (METAKG_EMBEDDER__MODEL_DIR; make test sets it from ../shared)")
    outcome = harness.run_case(found[0], tmp_path, POINTS, random.Random(name), writing_only=True)
    assert_whole(outcome)
    assert outcome.during_write >= 1, outcome.as_dict()  # at least one kill landed while the new version was built


def test_a_killed_sync_leaves_the_old_or_the_new_version(sparql_endpoint: object, tmp_path: Path) -> None:
    spec = "name: q42\nseeds: [Q42]\nproperties: [P69, P19, P31]\nhops: 1\nlanguages: [en]\n"
    case = harness.sync_case(sparql_endpoint.endpoint, spec)  # type: ignore[attr-defined]
    assert_whole(harness.run_case(case, tmp_path, POINTS, random.Random(7), writing_only=True))


def test_a_killed_server_writing_triples_leaves_the_old_or_the_new_version(tmp_path: Path) -> None:
    outcome = harness.run_serve_case(tmp_path, POINTS, random.Random(3), 2_000, writing_only=True)
    assert outcome.unreadable == [] and outcome.old + outcome.new == POINTS, outcome.as_dict()
    assert outcome.during_write >= 1, outcome.as_dict()


@pytest.fixture(scope="module")
def disk(tmp_path_factory: pytest.TempPathFactory) -> None:
    why = harness.can_mount_tmpfs(tmp_path_factory.mktemp("probe"))
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the full-disk checks cannot run in CI: {why}")
        pytest.skip(f"full-disk checks skipped: {why}")


@pytest.mark.parametrize("free", [0.0, 0.5])
@pytest.mark.parametrize("name", ["ingest triples", "validate"])
def test_a_full_disk_leaves_the_old_version_and_says_so(
    disk: None, name: str, free: float, llm: str, tmp_path: Path
) -> None:
    [case] = [case for case in cases(llm) if case.name == name]
    outcome = harness.full_disk(case, tmp_path, free)
    assert outcome.verdict == "old" and outcome.exit_code == 1 and outcome.leftovers == 0, outcome.as_dict()
    assert "No space left on device" in outcome.message and "previous version is unchanged" in outcome.message


def test_a_full_disk_under_the_server_refuses_the_write_and_serves_the_old_graph(disk: None, tmp_path: Path) -> None:
    found = harness.serve_full_disk(tmp_path, 2_000, 0.3)
    assert found["status"] == 507 and "No space left on device" in found["error"], found
    assert found["bundle"] == "old" and not found["new_node_served"] and found["server_up"], found
    assert found["leftovers_beside"] == 0


def test_readers_while_other_processes_rewrite_never_fail(tmp_path: Path) -> None:
    found = harness.readers_during_rewrites(tmp_path, 8.0, 20_000)
    assert found["rewrites"] >= 2 and found["reads"] >= 10, found
    assert found["failed"] == 0, found  # once "not a bundle" for about 0.3 s of every rewrite
