"""A local SPARQL endpoint for tests and `make sparql-up`: Debian's Virtuoso (virtuoso-opensource 7) on 127.0.0.1.

``start`` writes a small ``virtuoso.ini`` into a home folder, starts ``virtuoso-t`` in the foreground as a
child process, waits for the HTTP endpoint and allows SPARQL Update for the anonymous SPARQL user (tests
edit the data through the endpoint). ``load`` bulk-loads N-Triples/Turtle files into a named graph with
``isql-vt``. The endpoint is ``http://127.0.0.1:<http_port>/sparql``.

Usage: ``python tools/sparql_server.py up [--port 8890]`` (loads the Wikidata test data) / ``down [--port 8890]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script too: tools/ is a package at the repository root
from tools.neo4j_server import free_port  # noqa: E402
from tools.wikidata_testdata import write_test_rdf  # noqa: E402

GRAPH = "http://www.wikidata.org/"
STATE_DIR = ROOT / ".sparql"


class SparqlServerError(RuntimeError):
    """Virtuoso is missing, did not start, or refused a load."""


@dataclass
class Server:
    """A running Virtuoso."""

    process: subprocess.Popen[bytes]
    home: Path
    http_port: int
    sql_port: int

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/sparql"


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise SparqlServerError(
            f"{name} not found: install Debian's virtuoso-opensource (tools/ensure_system_packages.sh does)"
        )
    return path


_INI = """[Database]
DatabaseFile = {home}/virtuoso.db
ErrorLogFile = {home}/virtuoso.log
LockFile = {home}/virtuoso.lck
TransactionFile = {home}/virtuoso.trx
xa_persistent_file = {home}/virtuoso.pxa
ErrorLogLevel = 7
FileExtend = 200
Striping = 0
TempStorage = TempDatabase
[TempDatabase]
DatabaseFile = {home}/virtuoso-temp.db
TransactionFile = {home}/virtuoso-temp.trx
[Parameters]
ServerPort = 127.0.0.1:{sql_port}
DisableUnixSocket = 1
CheckpointInterval = 60
CaseMode = 2
DirsAllowed = ., {dirs}
NumberOfBuffers = 20000
MaxDirtyBuffers = 15000
MaxQueryMem = 512M
ThreadsPerQuery = 2
MaxSortedTopRows = 1000000
[HTTPServer]
ServerPort = 127.0.0.1:{http_port}
ServerRoot = {home}
ServerThreads = 8
MaxClientConnections = 8
Charset = UTF-8
EnabledGzipContent = 0
[SPARQL]
ResultSetMaxRows = 100000
MaxQueryCostEstimationTime = 400
MaxQueryExecutionTime = 60
"""


def _ready(endpoint: str) -> bool:
    query = urllib.parse.quote("ASK {}")
    try:
        with urllib.request.urlopen(f"{endpoint}?query={query}", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def isql(server: Server, statement: str, timeout: float = 600) -> str:
    """Run one SQL statement through isql-vt; raises on an error."""
    result = subprocess.run(
        [_binary("isql-vt"), f"127.0.0.1:{server.sql_port}", "dba", "dba", f"exec={statement}"],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    output = result.stdout + result.stderr
    if result.returncode != 0 or "*** Error" in output:
        raise SparqlServerError(f"isql failed: {statement[:120]}: {output.strip()[:500]}")
    return output


def start(home: Path, http_port: int | None = None, data_dirs: tuple[Path, ...] = (), timeout: float = 90) -> Server:
    """Start Virtuoso with its database in ``home`` (created; an old database there is reused)."""
    binary = _binary("virtuoso-t")
    home.mkdir(parents=True, exist_ok=True)
    http_port = http_port or free_port()
    sql_port = free_port()
    dirs = ", ".join(str(d.resolve()) for d in (home, *data_dirs))
    (home / "virtuoso.ini").write_text(
        _INI.format(home=home.resolve(), sql_port=sql_port, http_port=http_port, dirs=dirs)
    )
    log = (home / "stdout.log").open("ab")
    process = subprocess.Popen(
        [binary, "+foreground", "+configfile", str(home / "virtuoso.ini")],
        cwd=home,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    server = Server(process, home, http_port, sql_port)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = (
                (home / "virtuoso.log").read_text(errors="replace")[-1500:] if (home / "virtuoso.log").exists() else ""
            )
            raise SparqlServerError(f"virtuoso exited with status {process.returncode}: {tail}")
        if _ready(server.endpoint):
            isql(server, 'GRANT SPARQL_UPDATE TO "SPARQL"')
            isql(server, "DB.DBA.RDF_DEFAULT_USER_PERMS_SET ('nobody', 7)")
            return server
        time.sleep(0.5)
    stop(server)
    raise SparqlServerError(f"virtuoso did not answer on {server.endpoint} within {timeout:.0f} s")


def load(server: Server, path: Path, graph: str = GRAPH) -> None:
    """Bulk-load an N-Triples or Turtle file into ``graph``."""
    literal = str(path.resolve()).replace("'", "''")
    isql(server, f"DB.DBA.TTLP_MT (file_to_string_output ('{literal}'), '', '{graph}', 0)")
    isql(server, "checkpoint")


def stop(server: Server, timeout: float = 30) -> None:
    """Stop the server (SIGTERM, then SIGKILL)."""
    if server.process.poll() is None:
        os.killpg(server.process.pid, signal.SIGTERM)
        try:
            server.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(server.process.pid, signal.SIGKILL)
            server.process.wait()


def _shared_wikidata() -> Path:
    """The `wikidata/` folder of the data directory (`paths.data_dir`), else of the test data folder."""
    from metakg.config import load_settings  # here only: starting a server for the tests needs no settings

    data_dir = load_settings().paths.data_dir
    tests = Path(os.environ.get("METAKG_SHARED_DIR", ROOT.parent / "shared")) / "data" / "wikidata"
    candidates = [data_dir / "wikidata", tests] if data_dir else [tests]
    for folder in candidates:
        if folder.is_dir():
            return folder
    raise SparqlServerError(
        f"{candidates[0]} not found: set paths.data_dir (METAKG_PATHS__DATA_DIR) to a data directory holding the "
        "wikidata/ test files (Q42_wbgetentities.json, Q42_neighbour_labels.json, the KGTK subset)"
    )


def state_dir(http_port: int) -> Path:
    """The folder of the endpoint on ``http_port``: ``.sparql`` for 8890, ``.sparql-PORT`` otherwise (two
    endpoints can run at once)."""
    return STATE_DIR if http_port == 8890 else STATE_DIR.with_name(f".sparql-{http_port}")


def up(http_port: int) -> None:
    """Start a server in :func:`state_dir` with the Wikidata test data and leave it running (`make sparql-up`)."""
    state = state_dir(http_port)
    if (state / "pid").exists():
        print(f"already running (pid {(state / 'pid').read_text().strip()}); `make sparql-down` stops it")
        return
    shutil.rmtree(state, ignore_errors=True)
    source = _shared_wikidata()
    server = start(state, http_port, data_dirs=(source,))
    for path in write_test_rdf(source, state, questions=True):
        load(server, path)
    (state / "pid").write_text(str(server.process.pid))
    print(f"SPARQL endpoint at {server.endpoint} (Virtuoso pid {server.process.pid}); `make sparql-down` stops it")


def down(http_port: int) -> None:
    """Stop the server on ``http_port`` (`make sparql-down`)."""
    pid_file = state_dir(http_port) / "pid"
    if not pid_file.exists():
        print("not running")
        return
    pid = int(pid_file.read_text())
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    pid_file.unlink()
    print(f"stopped Virtuoso (pid {pid})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["up", "down"])
    parser.add_argument("--port", type=int, default=8890)
    args = parser.parse_args()
    try:
        up(args.port) if args.command == "up" else down(args.port)
    except SparqlServerError as e:
        raise SystemExit(f"error: {e}") from None
