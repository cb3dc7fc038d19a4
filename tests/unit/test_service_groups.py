"""Under ``make test`` (pytest-xdist, ``--dist loadgroup``) the tests of one shared service run on one worker, so
the service starts once. Checked on a small suite in a subprocess: a pytest or xdist release that stopped reading
the groups would let every worker start its own Neo4j and its own local model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import module_groups, service_group

REPO = Path(__file__).resolve().parents[2]

CONFTEST = """
import os
import pytest
from tests.conftest import pytest_collection_modifyitems  # the hook under test

def worker() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")

@pytest.fixture(scope="session")
def neo4j_settings() -> str:
    return worker()

@pytest.fixture(scope="session")
def local_llm() -> str:
    return worker()
"""

TESTS = """
import os
import time
from pathlib import Path
import pytest

def record(kind: str) -> None:
    with (Path(os.environ["RECORD_DIR"]) / kind).open("a") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "main") + "\\n")
    time.sleep(0.2)

@pytest.mark.parametrize("i", range(4))
def test_neo4j(neo4j_settings: str, i: int) -> None:
    record("neo4j")

@pytest.mark.parametrize("i", range(4))
def test_llm(local_llm: str, i: int) -> None:
    record("llm")

@pytest.mark.parametrize("i", range(8))
def test_plain(i: int) -> None:
    record("plain")
"""


def test_a_test_joins_the_group_of_the_first_service_it_uses() -> None:
    assert service_group(["tmp_path", "local_llm", "neo4j_settings"]) == "neo4j"
    assert service_group(["qa_sparql_endpoint", "local_llm"], "tests.a") == "llm"  # one worker runs the model
    assert service_group(["sparql_endpoint"], "tests.a") == "sparql-tests.a"  # one endpoint per module
    assert service_group(["tmp_path", "neo4j_driver"]) is None  # the closure names neo4j_settings too, in a run


def test_a_modules_tests_of_its_own_endpoint_share_a_group_so_it_starts_once() -> None:
    tests = [
        ("tests.a", ["sources", "sparql_endpoint"]),
        ("tests.a", ["sources", "sparql_endpoint", "local_llm"]),  # takes the model's group, and the module with it
        ("tests.a", ["tmp_path"]),
        ("tests.b", ["qa_sparql_endpoint"]),
        ("tests.c", ["local_llm"]),
    ]
    assert module_groups(tests) == ["llm", "llm", None, "sparql-tests.b", "llm"]


def test_each_services_tests_run_on_one_worker_under_loadgroup(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_grouped.py").write_text(TESTS)
    records = tmp_path / "records"
    records.mkdir()
    env = {**os.environ, "RECORD_DIR": str(records), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "3", "--dist", "loadgroup", "-p", "no:cacheprovider", "-q",
         "--rootdir", str(suite), str(suite)],
        capture_output=True, text=True, env=env, cwd=suite, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    workers = {kind: (records / kind).read_text().split() for kind in ("neo4j", "llm", "plain")}
    assert len(workers["neo4j"]) == 4 and len(set(workers["neo4j"])) == 1, workers
    assert len(workers["llm"]) == 4 and len(set(workers["llm"])) == 1, workers
    assert len(workers["plain"]) == 8 and all(w.startswith("gw") for w in workers["plain"])
