"""Helpers shared by the benchmarks: timing, peak memory, synthetic graphs, result files."""

from __future__ import annotations

import json
import os
import platform
import resource
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

WORK = Path(__file__).resolve().parent / ".work"
RESULTS = Path(__file__).resolve().parent / "results"


#: ``python -c PEAK_OF command...`` runs the command and writes its peak resident memory last on stderr, as
#: ``peak_kib N``. A child's ``ru_maxrss`` carries the high-water mark of the process that forked it (Linux
#: copies it at exec), so a part started by a benchmark that holds gigabytes (a generated input) would read
#: them as its own; started from this small process, the figure is the part's own, on a first run as on a
#: repeated one.
PEAK_OF = (
    "import os, subprocess, sys; child = subprocess.Popen(sys.argv[1:]); _, status, usage = os.wait4(child.pid, 0); "
    "print(f'peak_kib {usage.ru_maxrss}', file=sys.stderr); sys.exit(os.waitstatus_to_exitcode(status))"
)


@dataclass(frozen=True)
class Measured:
    """A command run on its own: wall seconds, its own peak resident memory, its output."""

    seconds: float
    peak_mib: float
    stdout: str
    stderr: str


def run_measured(command: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> Measured:
    """Run ``command`` through :data:`PEAK_OF` and return its time, peak memory and output.

    Raises:
        RuntimeError: the command failed (the end of its output is in the message).
    """
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", PEAK_OF, *command], capture_output=True, text=True, cwd=cwd, env=env, check=False
    )
    seconds = time.perf_counter() - start
    lines = done.stderr.rstrip().splitlines()
    peak = lines.pop() if lines and lines[-1].startswith("peak_kib ") else None
    if done.returncode != 0 or peak is None:
        raise RuntimeError(f"{shlex.join(command[:4])} ... failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return Measured(seconds, int(peak.removeprefix("peak_kib ")) / 1024, done.stdout, "\n".join(lines))


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far (MiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@contextmanager
def timed(label: str, sink: dict[str, float]) -> Iterator[None]:
    """Store the wall time of the block in ``sink[label]`` (seconds) and print it."""
    start = time.perf_counter()
    yield
    sink[label] = time.perf_counter() - start
    print(f"  {label:<44} {sink[label]:9.3f} s", flush=True)


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``fn`` over ``repeats`` calls, in milliseconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1000)


def skewed_endpoints(rng: np.random.Generator, n_nodes: int, n_edges: int) -> tuple[np.ndarray, np.ndarray]:
    """Edge endpoints with a heavy-tailed degree distribution (a few hubs, many leaves), like real KGs."""
    weights = 1.0 / np.power(np.arange(n_nodes) + 10.0, 0.8)
    weights /= weights.sum()
    src = rng.choice(n_nodes, n_edges, p=weights)
    dst = rng.integers(0, n_nodes, n_edges)
    perm = rng.permutation(n_nodes)  # hubs are not the low ids
    return perm[src], perm[dst]


def settings_and_data(purpose: str = "") -> tuple[Any, Path]:
    """The settings and the shared data directory; exits with a message when no data directory is set."""
    from metakg.config import load_settings

    settings = load_settings()
    if settings.paths.data_dir is None:
        sys.exit(f"needs the shared data directory (METAKG_PATHS__DATA_DIR){purpose}")
    return settings, settings.paths.data_dir


def record(name: str, figures: dict[str, Any], *, synthetic_data: bool) -> Path:
    """Write the figures to benchmarks/results/<name>.json (with the machine and time) and return the path.

    ``synthetic_data`` is true when any figure rests on generated data (a synthetic graph, random edges or
    rows), false when every input is a real public dataset; each benchmark says which."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {
        "benchmark": name,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        **figures,
        "synthetic_data": synthetic_data,
    }
    path.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    print(f"  figures recorded in {path}")
    return path


def fresh_server(name: str, *, heap: str = "2g", pagecache_mb: int = 1024) -> Any:
    """A Neo4j server on a new, empty database under ``WORK/neo4j/<name>`` (an earlier one there is removed);
    the caller stops it."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tools import neo4j_server

    home = WORK / "neo4j" / name
    shutil.rmtree(home, ignore_errors=True)
    return neo4j_server.start(home, neo4j_server.free_port(), heap=heap, pagecache_mb=pagecache_mb)


@contextmanager
def neo4j_with(bundle: Path, settings: Any, name: str, *, reuse: bool = False) -> Iterator[tuple[Any, Any, float]]:
    """A Neo4j server (under ``WORK/neo4j/<name>``) with ``bundle`` loaded by ``metakg load neo4j``'s batched
    loader: yields (settings pointing at it, an open store, load seconds); stops the server after.

    A fresh database each time, unless ``reuse``: then a database an earlier run loaded with the same bundle
    is served again, with the load time that run measured (a 4M-edge load takes many minutes)."""
    from metakg import api

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tools import neo4j_server

    home = WORK / "neo4j" / name
    marker = home / "metakg-bench-loaded.json"
    loaded = json.loads(marker.read_text()) if reuse and marker.is_file() else None
    if loaded is not None and loaded.get("bundle") != str(bundle.resolve()):
        loaded = None
    server = (
        fresh_server(name, heap="3g", pagecache_mb=2048)
        if loaded is None
        else neo4j_server.start(home, neo4j_server.free_port(), heap="3g", pagecache_mb=2048)
    )
    try:
        neo = settings.model_copy(update={"neo4j": settings.neo4j.model_copy(update={"uri": server.uri})})
        if loaded is None:
            started = time.perf_counter()
            api.load_neo4j(bundle, neo)
            loaded = {"bundle": str(bundle.resolve()), "load_s": time.perf_counter() - started}
            marker.write_text(json.dumps(loaded), encoding="utf-8")
        with api.open_store(neo, neo4j=True) as store:
            yield neo, store, float(loaded["load_s"])
    finally:
        neo4j_server.stop(server)


@contextmanager
def serving(bundle: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``metakg serve --bundle bundle`` on a free port, once it answers its health check: (its URL, the
    process); stopped on leaving."""
    import httpx

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tools.neo4j_server import free_port

    port = free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("metakg")), "serve", "--bundle", str(bundle), "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ),
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(url + "/api/health", timeout=2)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("metakg serve did not start") from None
                time.sleep(0.3)
        yield url, server
    finally:
        server.terminate()
        server.wait(timeout=30)
