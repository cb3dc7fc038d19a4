"""The crash harness: every command that writes a bundle is killed (SIGKILL) at random points while it rewrites
one, or runs out of disk (a small tmpfs), and the bundle must then read as the old version or the new one, with
every table matching the hashes of its manifest; never neither, never a mix.

Used in a bounded form by ``tests/integration/test_crash_harness.py`` (``make test``) and in full by
``benchmarks/bench_crash.py`` (``make bench``: 50 kill points per command and several disk sizes).

A case prepares the old version of the bundle and the inputs of the command, then the command is run to the
end twice (the second run is timed: caches are warm, as on the killed runs) to learn when it starts writing (the
staging folder ``.<name>.new-*`` appears beside the bundle) and when it ends. Half the kill points are drawn over
the whole run and half over its writing phase, where a kill can do harm.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from metakg.errors import BundleError
from metakg.schemas.bundle import read_bundle, read_embeddings, verify_bundle
from metakg.schemas.bundle_dir import token_of

METAKG = [sys.executable, "-c", "from metakg.cli.main import main; main()"]


@dataclass
class Case:
    """One writing command: ``prepare(work)`` writes the old version at ``work / "b"`` and the command's inputs,
    and returns the command's arguments (after ``metakg``); ``new_check`` tells whether a readable bundle is the
    new version (beyond a different manifest); ``env`` adds environment variables."""

    name: str
    prepare: Callable[[Path], list[str]]
    new_check: Callable[[Path], bool] = lambda _path: True
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Outcome:
    """What the kills of one case left: how many bundles read as the old version, as the new one, or not at all
    (with the reasons), how many kills landed while the command was writing, and leftovers beside the bundle."""

    case: str
    points: int = 0
    old: int = 0
    new: int = 0
    unreadable: list[str] = field(default_factory=list)
    during_write: int = 0
    leftovers: int = 0
    run_s: float = 0.0
    write_s: float = 0.0
    recovered: bool = True

    def record(self, verdict: str, delay: float, *, writing: bool, left: int) -> None:
        """Count one kill: what it left of the bundle, whether it came while the command wrote."""
        self.during_write += int(writing)
        self.leftovers += int(left > 0)
        if verdict == "old":
            self.old += 1
        elif verdict == "new":
            self.new += 1
        else:
            self.unreadable.append(f"kill at {delay:.3f} s: {verdict}")

    def as_dict(self) -> dict[str, Any]:
        """The JSON figures."""
        return {
            "case": self.case,
            "points": self.points,
            "old": self.old,
            "new": self.new,
            "unreadable": len(self.unreadable),
            "reasons": self.unreadable[:5],
            "kills_while_writing": self.during_write,
            "leftovers_beside": self.leftovers,
            "recovered_after": self.recovered,
            "run_s": round(self.run_s, 2),
            "write_s": round(self.write_s, 3),
        }


def fingerprint(path: Path) -> tuple[str | None, str]:
    """The token of the bundle at ``path`` and a digest of what it holds, after reading it with every check
    (tables against their hashes, side tables too); raises BundleError when it cannot be read so."""
    bundle = read_bundle(path)
    verify_bundle(path)
    if "embeddings" in bundle.manifest and read_embeddings(path, bundle) is None:
        raise BundleError(f"{path}: the manifest lists embeddings, the table is not there")
    nodes = bundle.nodes.select("id", "name", "type").sort("id")
    edges = bundle.edges.select("id", "src", "rel", "dst").sort("id")
    content = f"{nodes.hash_rows().sum()}-{edges.hash_rows().sum()}-{nodes.height}-{edges.height}"
    return token_of(path), content


def classify(path: Path, old: tuple[str | None, str], case: Case) -> str:
    """``old``, ``new`` or ``unreadable: <reason>`` for the bundle at ``path`` after a kill."""
    try:
        token, _content = fingerprint(path)
    except (BundleError, OSError, pl.exceptions.PolarsError) as e:
        return f"unreadable: {e}"
    if token == old[0]:
        return "old"
    if not case.new_check(path):
        return "unreadable: a version that is neither the old one nor the command's new one"
    return "new"


def staging_exists(bundle: Path) -> bool:
    """Whether a writer's staging folder is beside the bundle now."""
    prefix = f".{bundle.name}.new-"
    with contextlib.suppress(OSError):
        return any(p.name.startswith(prefix) for p in bundle.parent.iterdir())
    return False


def leftovers(bundle: Path) -> int:
    """Staging or retired folders beside the bundle."""
    names = (f".{bundle.name}.new-", f".{bundle.name}.old-")
    return sum(1 for p in bundle.parent.iterdir() if p.name.startswith(names))


class StagingWatch:
    """Watches, in a thread, for how long a writer's staging folder stands beside ``bundle``."""

    def __init__(self, bundle: Path) -> None:
        self._bundle = bundle
        self._appeared: list[float] = []
        self._gone: list[float] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> StagingWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._done.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._done.is_set() and not self._gone:
            staged = staging_exists(self._bundle)
            if staged and not self._appeared:
                self._appeared.append(time.perf_counter())
            elif self._appeared and not staged:
                self._gone.append(time.perf_counter())
            time.sleep(0.0005)

    @property
    def staged_s(self) -> float:
        """Seconds the staging folder stood there (0: never seen)."""
        if not self._appeared:
            return 0.0
        return (self._gone[0] if self._gone else time.perf_counter()) - self._appeared[0]


def kill_at_random(
    process: subprocess.Popen[Any], bundle: Path, point: int, rng: random.Random, run_s: float, write_s: float
) -> tuple[float, bool]:
    """SIGKILL ``process``: on even points anywhere in its run, on odd ones in its writing phase (once the
    staging folder appears: at once the first time, then a random share of the first half of the write later).
    Returns the delay and whether it was writing."""
    started = time.perf_counter()
    if point % 2 == 0:
        time.sleep(rng.uniform(0, run_s))
    else:
        while not staging_exists(bundle) and process.poll() is None and time.perf_counter() - started < 3 * run_s:
            time.sleep(0.0005)
        # the first such kill as soon as the staging folder appears (a write can take a few ms), the others in
        # the first half of the write: the kill must find it still writing
        time.sleep(0.0 if point == 1 else rng.uniform(0, write_s * 0.5))
    delay = time.perf_counter() - started
    writing = staging_exists(bundle)
    process.send_signal(signal.SIGKILL)
    process.wait()
    return delay, writing


def _run(args: list[str], env: dict[str, str], watch: Path | None = None) -> tuple[int, float, float, str]:
    """Run ``metakg args`` to the end: exit code, wall seconds, seconds a staging folder stood beside ``watch``
    (0: never seen or not watched), stderr."""
    start = time.perf_counter()
    with StagingWatch(watch) if watch is not None else contextlib.nullcontext() as staged:
        process = subprocess.Popen([*METAKG, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, stderr = process.communicate(timeout=600)
    return process.returncode, time.perf_counter() - start, staged.staged_s if staged else 0.0, stderr


def environment(extra: dict[str, str]) -> dict[str, str]:
    """The environment of the commands: this one's (settings, cache) plus ``extra``."""
    return {**os.environ, **extra}


def run_case(case: Case, work: Path, points: int, rng: random.Random, *, writing_only: bool = False) -> Outcome:
    """Kill ``case``'s command at ``points`` random moments, each time over a fresh copy of the old version;
    with ``writing_only`` every kill is in its writing phase (the first as soon as it starts writing).

    Raises:
        AssertionError: the command fails when not killed (the case is wrong, not the bundle).
    """
    work.mkdir(parents=True, exist_ok=True)
    args = case.prepare(work)
    bundle = work / "b"
    pristine = work / "pristine"
    shutil.copytree(bundle, pristine, symlinks=True)
    old = fingerprint(bundle)
    env = environment(case.env)
    outcome = Outcome(case.name, points=points)
    # the last whole run is timed: after a first one its caches are as warm as the killed runs'. Kills in the
    # writing phase alone wait for the staging folder and need no warm timing: one run does.
    runs = 1 if writing_only else 2
    for attempt in range(runs):
        _restore(pristine, bundle)
        code, wall, staged, stderr = _run(args, env, watch=bundle)
        if code not in (0, 1) or "Traceback" in stderr:
            raise AssertionError(f"{case.name}: `metakg {' '.join(args)}` failed with {code}: {stderr[-2000:]}")
        if attempt == runs - 1:
            assert classify(bundle, old, case) == "new", f"{case.name}: a whole run did not write a new version"
            outcome.run_s = wall
            outcome.write_s = staged
    for point in range(points):
        _restore(pristine, bundle)
        process = subprocess.Popen([*METAKG, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        delay, writing = kill_at_random(
            process, bundle, _kind(point, writing_only), rng, outcome.run_s, outcome.write_s
        )
        outcome.record(classify(bundle, old, case), delay, writing=writing, left=leftovers(bundle))
    # after the last kill, the command run again finishes and tidies up what the killed writer left
    code, _wall, _staged, stderr = _run(args, env)
    outcome.recovered = code in (0, 1) and classify(bundle, old, case) == "new" and leftovers(bundle) == 0
    if not outcome.recovered:
        outcome.unreadable.append(f"the run after the kills did not recover (exit {code}): {stderr[-300:]}")
    _restore(pristine, bundle)
    return outcome


def _kind(point: int, writing_only: bool) -> int:
    """The point :func:`kill_at_random` is given: the same, or with ``writing_only`` its ``point``-th odd one (a
    kill in the writing phase)."""
    return 2 * point + 1 if writing_only else point


def _restore(pristine: Path, bundle: Path) -> None:
    """Put the old version back, and nothing beside it."""
    for entry in bundle.parent.iterdir():
        if entry.name.startswith((f".{bundle.name}.", bundle.name)) and entry.name != pristine.name:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    shutil.copytree(pristine, bundle, symlinks=True)


# ---------------------------------------------------------------------------------------------- the inputs


def triples(path: Path, n: int, salt: str) -> Path:
    """A triple file of ``n`` lines (the ``salt`` makes two versions differ)."""
    path.write_text("".join(f"head {i} {salt}\trelates to\ttail {i % 97}\n" for i in range(n)), encoding="utf-8")
    return path


def primekg_csv(path: Path, n: int, offset: int) -> Path:
    """A PrimeKG-format kg.csv of ``n`` protein-protein rows (ids shifted by ``offset``)."""
    header = "relation,display_relation,x_index,x_id,x_type,x_name,x_source,y_index,y_id,y_type,y_name,y_source\n"
    rows = (
        f"protein_protein,ppi,{i},{10_000 + offset + i},gene/protein,G{offset + i},NCBI,"
        f"{n + i},{50_000 + (i * 7) % n},gene/protein,H{(i * 7) % n},NCBI\n"
        for i in range(n)
    )
    path.write_text(header + "".join(rows), encoding="utf-8")
    return path


def _cli(*args: str, env: dict[str, str] | None = None) -> None:
    """Run a command that makes a case's old version: the CLI's own code, in this process (typer's runner), so
    each case does not start a Python and import its libraries once more only to set up; the commands a case
    kills run as processes of their own."""
    from typer.testing import CliRunner

    from metakg.cli.main import app

    result = CliRunner().invoke(app, list(args), env=env or {})
    failed = result.exception is not None and not isinstance(result.exception, SystemExit)
    if result.exit_code not in (0, 1) or failed:
        trace = "".join(traceback.format_exception(result.exception)) if failed and result.exception else ""
        raise AssertionError(f"metakg {' '.join(args)} failed ({result.exit_code}): {result.output[-2000:]}{trace}")


def ingest_case(size: int) -> Case:
    """``ingest triples`` replacing a bundle with the next version of the file."""

    def prepare(work: Path) -> list[str]:
        _cli("ingest", "triples", str(triples(work / "v1.txt", size, "v1")), "-d", "kg", "-o", str(work / "b"))
        return ["ingest", "triples", str(triples(work / "v2.txt", size, "v2")), "-d", "kg", "-o", str(work / "b")]

    return Case("ingest triples", prepare)


def primekg_case(size: int) -> Case:
    """``ingest primekg`` replacing a bundle with another release of the file."""

    def prepare(work: Path) -> list[str]:
        (work / "r1").mkdir(exist_ok=True)
        (work / "r2").mkdir(exist_ok=True)
        _cli("ingest", "primekg", str(primekg_csv(work / "r1" / "kg.csv", size, 0)), "-o", str(work / "b"))
        return ["ingest", "primekg", str(primekg_csv(work / "r2" / "kg.csv", size, 5)), "-o", str(work / "b")]

    return Case("ingest primekg", prepare)


def merge_case(size: int) -> Case:
    """``merge`` replacing its earlier output with a merge of other inputs."""

    def prepare(work: Path) -> list[str]:
        for name in ("a", "c", "d"):
            _cli(
                "ingest", "triples", str(triples(work / f"{name}.txt", size, name)), "-d", name, "-o", str(work / name)
            )
        _cli("merge", str(work / "a"), str(work / "c"), "-o", str(work / "b"))
        return ["merge", str(work / "a"), str(work / "d"), "-o", str(work / "b")]

    return Case("merge", prepare)


def validate_case(size: int) -> Case:
    """``validate`` rewriting a bundle in place (as every in-place rewrite, resolution among them, does)."""

    def prepare(work: Path) -> list[str]:
        _cli("ingest", "triples", str(triples(work / "v1.txt", size, "v1")), "-d", "kg", "-o", str(work / "b"))
        return ["validate", str(work / "b")]

    return Case("validate", prepare, new_check=lambda path: "validation" in read_bundle(path).manifest)


def embed_case(size: int, env: dict[str, str]) -> Case:
    """``embed`` adding name embeddings to a validated bundle in place."""

    def prepare(work: Path) -> list[str]:
        _cli("ingest", "triples", str(triples(work / "v1.txt", size, "v1")), "-d", "kg", "-o", str(work / "b"))
        _cli("validate", str(work / "b"))
        return ["embed", str(work / "b")]

    return Case("embed", prepare, new_check=lambda path: "embeddings" in read_bundle(path).manifest, env=env)


def extract_case(size: int, llm_url: str) -> Case:
    """``extract`` replacing a bundle with the extraction of a longer dataset (the LLM a local scripted
    OpenAI-compatible server)."""
    env = {
        "METAKG_LLM__BASE_URL": llm_url,
        "METAKG_LLM__MODEL": "m",
        "METAKG_EXTRACT__EMBEDDINGS": "false",
    }

    def records(path: Path, n: int) -> Path:
        path.write_text("".join(f'{{"id": "r{i}", "text": "Thing {i} relates to thing {i + 1}."}}\n' for i in range(n)))
        return path

    def prepare(work: Path) -> list[str]:
        _cli("extract", str(records(work / "v1.jsonl", size)), "-f", "jsonl", "-d", "x", "-o", str(work / "b"), env=env)
        return ["extract", str(records(work / "v2.jsonl", size + 5)), "-f", "jsonl", "-d", "x", "-o", str(work / "b")]

    return Case("extract", prepare, env=env)


def sync_case(endpoint: str, spec_text: str) -> Case:
    """``sync wikidata`` rewriting its bundle (a re-sync that fetched nothing still writes a new version)."""

    def prepare(work: Path) -> list[str]:
        spec = work / "subset.yaml"
        spec.write_text(spec_text)
        state = work / "state.json"
        args = ["sync", "wikidata", str(spec), "-o", str(work / "b"), "--endpoint", endpoint, "--state", str(state)]
        _cli(*args)
        shutil.copy2(state, work / "state.pristine")
        return args

    return Case("sync wikidata", prepare)


@contextlib.contextmanager
def tmpfs(path: Path, size_bytes: int) -> Iterator[Path]:
    """A tmpfs of ``size_bytes`` mounted at ``path`` for the block (needs root).

    Raises:
        PermissionError: it cannot be mounted here.
    """
    path.mkdir(parents=True, exist_ok=True)
    pages = max(1, -(-size_bytes // 4096))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={pages * 4096}", "tmpfs", str(path)], capture_output=True
    )
    if done.returncode != 0:
        raise PermissionError(f"cannot mount a tmpfs at {path}: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def can_mount_tmpfs(scratch: Path) -> str | None:
    """None when a tmpfs can be mounted here, else why not."""
    if os.geteuid() != 0:
        return "not root: a full disk is simulated with a small tmpfs, which only root can mount"
    try:
        with tmpfs(scratch / "probe", 1 << 20):
            return None
    except PermissionError as e:
        return str(e)


def folder_bytes(path: Path) -> int:
    """The bytes of the files under ``path`` (a tmpfs charges whole pages: each rounded up)."""
    return sum(-(-p.stat().st_size // 4096) * 4096 for p in path.rglob("*") if p.is_file()) + 4096


@dataclass
class DiskOutcome:
    """A command run with the bundle on a disk that fills during the rewrite."""

    case: str
    free_share: float
    exit_code: int
    verdict: str
    message: str
    leftovers: int

    def as_dict(self) -> dict[str, Any]:
        """The JSON figures."""
        return {
            "case": self.case,
            "free_share_of_new_version": self.free_share,
            "exit_code": self.exit_code,
            "bundle": self.verdict,
            "message": self.message[:300],
            "leftovers_beside": self.leftovers,
        }


def full_disk(case: Case, work: Path, free_share: float) -> DiskOutcome:
    """Run ``case``'s command with its bundle on a tmpfs holding the old version plus ``free_share`` of the
    new one's size: the rewrite runs out of space."""
    work.mkdir(parents=True, exist_ok=True)
    args = case.prepare(work)
    env = environment(case.env)
    _run(args, env)  # the new version, for its size (and warm caches)
    new_size = folder_bytes(work / "b")
    pristine = work / "pristine"
    if pristine.exists():
        shutil.rmtree(pristine)
    case.prepare(work)  # the old version again
    shutil.copytree(work / "b", pristine, symlinks=True)
    old = fingerprint(work / "b")
    mount = work / "disk"
    size = folder_bytes(pristine) + 8192 + int(new_size * free_share)
    with tmpfs(mount, size):
        shutil.copytree(pristine, mount / "b", symlinks=True)
        moved = [a.replace(str(work / "b"), str(mount / "b")) for a in args]
        code, _wall, _staged, stderr = _run(moved, env)
        verdict = classify(mount / "b", old, case)
        left = leftovers(mount / "b")
    message = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    if "Traceback" in stderr:
        message = "TRACEBACK: " + stderr[-500:]
    return DiskOutcome(case.name, free_share, code, verdict, message, left)


# ------------------------------------------------------------------------------ the served bundle's writes


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _http(method: str, url: str, body: dict[str, Any] | None = None, timeout: float = 60) -> tuple[int, Any]:
    import json
    import urllib.error
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


@contextlib.contextmanager
def served(bundle: Path, env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``metakg serve --allow-writes`` over ``bundle`` on a free port, up and answering, for the block."""
    port = _free_port()
    process = subprocess.Popen(
        [*METAKG, "serve", "--bundle", str(bundle), "--allow-writes", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise AssertionError(f"metakg serve exited with {process.returncode}")
            with contextlib.suppress(OSError):
                if _http("GET", f"{url}/api/health", timeout=2)[0] == 200:
                    break
            if time.monotonic() > deadline:
                raise AssertionError("metakg serve did not come up")
            time.sleep(0.1)
        yield process, url
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def _served_bundle(work: Path, size: int) -> Path:
    _cli("ingest", "triples", str(triples(work / "v1.txt", size, "v1")), "-d", "kg", "-o", str(work / "b"))
    _cli("validate", str(work / "b"))
    return work / "b"


NEW_TRIPLES = {"triples": [[f"posted {i}", "relates to", "tail 1"] for i in range(20)], "dataset": "kg"}


def _posted(path: Path) -> bool:
    return "kg:kg/posted_0" in set(read_bundle(path).nodes["id"].to_list())


def run_serve_case(work: Path, points: int, rng: random.Random, size: int, *, writing_only: bool = False) -> Outcome:
    """Kill ``metakg serve --allow-writes`` at random moments of a ``POST /api/triples`` (the served bundle is
    validated and rewritten), each time over a fresh copy of the old version; ``writing_only`` as for
    :func:`run_case`."""
    work.mkdir(parents=True, exist_ok=True)
    bundle = _served_bundle(work, size)
    pristine = work / "pristine"
    shutil.copytree(bundle, pristine, symlinks=True)
    old = fingerprint(bundle)
    case = Case("POST /api/triples", lambda _w: [], new_check=_posted)
    env = environment({})
    outcome = Outcome(case.name, points=points)
    with served(bundle, env) as (_process, url), StagingWatch(bundle) as staged:
        start = time.perf_counter()
        status, reply = _http("POST", f"{url}/api/triples", NEW_TRIPLES)
        outcome.run_s = time.perf_counter() - start
        assert status == 200, reply
    outcome.write_s = staged.staged_s
    assert classify(bundle, old, case) == "new"
    for point in range(points):
        _restore(pristine, bundle)
        with served(bundle, env) as (process, url):
            threading.Thread(target=_try_post, args=(url,), daemon=True).start()
            delay, writing = kill_at_random(
                process, bundle, _kind(point, writing_only), rng, outcome.run_s, outcome.write_s
            )
        outcome.record(classify(bundle, old, case), delay, writing=writing, left=leftovers(bundle))
    _restore(pristine, bundle)
    return outcome


def _try_post(url: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        _http("POST", f"{url}/api/triples", NEW_TRIPLES, timeout=30)


def serve_full_disk(work: Path, size: int, free_share: float) -> dict[str, Any]:
    """``POST /api/triples`` with the served bundle on a disk that fills during the rewrite: the reply is an
    error, the bundle stays the old version, and the server still serves the old graph (not the new node)."""
    work.mkdir(parents=True, exist_ok=True)
    bundle = _served_bundle(work, size)
    old = fingerprint(bundle)
    mount = work / "disk"
    size_bytes = folder_bytes(bundle) + 8192 + int(folder_bytes(bundle) * free_share)
    with tmpfs(mount, size_bytes):
        shutil.copytree(bundle, mount / "b", symlinks=True)
        with served(mount / "b", environment({})) as (_process, url):
            status, reply = _http("POST", f"{url}/api/triples", NEW_TRIPLES)
            ghost, _ = _http("GET", f"{url}/api/nodes/kg:kg/posted_0")
            health, _ = _http("GET", f"{url}/api/health")
        verdict = classify(mount / "b", old, Case("POST /api/triples", lambda _w: []))
        left = leftovers(mount / "b")
    return {
        "case": "POST /api/triples",
        "free_share_of_new_version": free_share,
        "status": status,
        "error": (reply or {}).get("error", "") if isinstance(reply, dict) else str(reply),
        "new_node_served": ghost == 200,
        "server_up": health == 200,
        "bundle": verdict,
        "leftovers_beside": left,
    }


def readers_during_rewrites(work: Path, seconds: float, size: int) -> dict[str, Any]:
    """Read the bundle (every check) in a loop while other processes rewrite it back to back for ``seconds``:
    how many reads there were, and how many failed or saw a mix of versions (the target is 0)."""
    work.mkdir(parents=True, exist_ok=True)
    sources = [triples(work / f"v{i}.txt", size + 1000 * i, f"v{i}") for i in range(2)]
    bundle = work / "b"
    _cli("ingest", "triples", str(sources[0]), "-d", "kg", "-o", str(bundle))
    env = environment({})
    stop = threading.Event()
    writes = [0]

    def rewrite() -> None:
        while not stop.is_set():
            source = sources[writes[0] % 2]
            subprocess.run([*METAKG, "ingest", "triples", str(source), "-d", "kg", "-o", str(bundle)], env=env,
                           capture_output=True, check=False)  # fmt: skip
            writes[0] += 1

    writer = threading.Thread(target=rewrite, daemon=True)
    writer.start()
    reads, failures = 0, []
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            try:
                read = read_bundle(bundle)
            except BundleError as e:
                failures.append(str(e)[:200])
                continue
            reads += 1
            if read.manifest["counts"]["edges"] != read.edges.height:
                failures.append(f"a mix: {read.edges.height} edges under a manifest counting {read.manifest['counts']}")
    finally:
        stop.set()
        writer.join()
    return {"reads": reads, "failed": len(failures), "rewrites": writes[0], "examples": failures[:3]}
