"""Build and run a Neo4j 5.26 Community server from the Maven Central jars (no Docker, no tarball).

    python tools/neo4j_server.py up [--port 7687] [--home .neo4j/data]   # start in the background
    METAKG_NEO4J_PASSWORD=... python tools/neo4j_server.py up           # the same, with authentication on
    python tools/neo4j_server.py down [--port 7687]                     # stop it
    python tools/neo4j_server.py status [--port 7687]
    python tools/neo4j_server.py import [--port 7687] -- --nodes=... --relationships=... neo4j
        # neo4j-admin database import full into that server's home (stopped: `down` first), from the same
        # jars: this setup has no neo4j-admin executable; give the arguments `metakg export neo4j-admin` prints

Each port has its own data folder (``.neo4j/data`` for 7687, ``.neo4j/data-PORT`` otherwise) and pid file, so
two servers can run at once.

The jars are resolved by Maven into ~/.m2 (tools/neo4j/pom.xml); a 30-line Java launcher
(tools/neo4j/src/MetakgNeo4j.java) starts the database with the Bolt connector on 127.0.0.1 and
authentication off (on, for the user neo4j, when ``METAKG_NEO4J_PASSWORD`` holds a password), serving APOC
core's procedures (from Maven Central too) out of ``HOME/plugins``.
Tests use :func:`start` and :func:`stop` directly.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent
POM = ROOT / "neo4j" / "pom.xml"
SOURCE = ROOT / "neo4j" / "src" / "MetakgNeo4j.java"
STATE = ROOT.parent / ".neo4j"


#: JVM options for the short-lived servers of the tests: the first JIT tier only. C2, the optimising compiler,
#: took a third of a test server's CPU time in a run of the suite (1 min 42 s of 4 min 45 s) on work that ends
#: before it pays off; on two cores beside other test workers that time is taken from them.
TEST_JVM = ("-XX:TieredStopAtLevel=1",)


class Neo4jServerError(RuntimeError):
    """The server could not be built or started."""


@dataclass
class Server:
    """A running server process and its Bolt URI."""

    process: subprocess.Popen[bytes] | None
    pid: int
    uri: str
    home: Path


def build(work: Path = STATE) -> str:
    """Resolve the jars (Maven) and compile the launcher; returns the Java classpath. Several processes may call
    it at once (test workers): one builds, the others wait for it and reuse what it built."""
    work.mkdir(parents=True, exist_ok=True)
    with (work / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        return _build(work)


def _build(work: Path) -> str:
    classpath_file = work / "classpath.txt"
    classes = work / "classes"
    if not classpath_file.exists() or classpath_file.stat().st_mtime < POM.stat().st_mtime:
        if shutil.which("mvn") is None:
            raise Neo4jServerError("Maven (mvn) is needed to fetch the Neo4j jars: apt-get install maven")
        result = subprocess.run(
            ["mvn", "-q", "-B", "-f", str(POM), "dependency:build-classpath", f"-Dmdep.outputFile={classpath_file}"],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise Neo4jServerError(f"mvn could not resolve the Neo4j jars:\n{result.stdout}\n{result.stderr}")
    classpath = classpath_file.read_text(encoding="utf-8").strip()
    launcher = classes / "MetakgNeo4j.class"
    if not launcher.exists() or launcher.stat().st_mtime < SOURCE.stat().st_mtime:
        result = subprocess.run(
            ["javac", "-cp", classpath, "-d", str(classes), str(SOURCE)], capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise Neo4jServerError(f"javac failed:\n{result.stderr}")
    return f"{classes}{os.pathsep}{classpath}"


def plugin_dir(home: Path, classpath: str) -> Path:
    """``home/plugins`` holding the APOC core and common jars Maven resolved (copies: Neo4j loads procedures
    from a plugin folder, not from the classpath)."""
    jars = [Path(p) for p in classpath.split(os.pathsep) if Path(p).name.startswith(("apoc-core-", "apoc-common-"))]
    if len(jars) != 2:
        raise Neo4jServerError(f"APOC core and common are not among the jars of {POM}")
    plugins = home / "plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    for stale in plugins.glob("apoc-*.jar"):
        if stale.name not in {jar.name for jar in jars}:
            stale.unlink()
    for jar in jars:
        if not (plugins / jar.name).is_file():
            shutil.copy2(jar, plugins / jar.name)
    return plugins


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def start(
    home: Path,
    port: int,
    *,
    heap: str = "2g",
    pagecache_mb: int = 512,
    timeout: float = 180.0,
    detach: bool = False,
    log: Path | None = None,
    apoc: bool = True,
    jvm: Sequence[str] = (),
) -> Server:
    """Start a server on 127.0.0.1:``port`` with its data under ``home``; waits until Bolt answers. With
    ``apoc``, APOC core's procedures are served (neo4j-graphrag's ``get_schema`` needs them). ``jvm`` adds options
    to the Java command line (the tests pass :data:`TEST_JVM`)."""
    if _listening(port):
        raise Neo4jServerError(f"port {port} is already in use on 127.0.0.1")
    classpath = build()
    home.mkdir(parents=True, exist_ok=True)
    log = log or home / "neo4j.log"
    command = ["java", f"-Xmx{heap}", *jvm, "-cp", classpath, "MetakgNeo4j", str(home), str(port), str(pagecache_mb)]
    if apoc:
        command.append(str(plugin_dir(home, classpath)))
    with log.open("ab") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=detach
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise Neo4jServerError(f"Neo4j exited with status {process.returncode}; see {log}")
        if _listening(port) and "READY" in log.read_text(encoding="utf-8", errors="replace"):
            return Server(process=process, pid=process.pid, uri=f"bolt://127.0.0.1:{port}", home=home)
        time.sleep(0.5)
    process.kill()
    raise Neo4jServerError(f"Neo4j did not start within {timeout:.0f} s; see {log}")


def stop(server: Server, timeout: float = 60.0) -> None:
    """Stop the server cleanly (SIGTERM runs the shutdown hook), killing it if it hangs."""
    try:
        os.kill(server.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if not _gone(server, timeout):
        os.kill(server.pid, signal.SIGKILL)


def discard(server: Server) -> None:
    """Kill a server whose data is thrown away (SIGKILL, no shutdown hook: a test's imported database), and wait
    for it; a clean stop would first write a checkpoint nobody reads (about 10 s on a busy machine)."""
    try:
        os.kill(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    _gone(server, 30.0)


def _gone(server: Server, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the server's process to end; whether it did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process is not None and server.process.poll() is not None:
            return True
        try:
            os.kill(server.pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def admin_import(
    home: Path, arguments: list[str], timeout: float = 3600.0, *, prefix: Sequence[str] = ()
) -> subprocess.CompletedProcess[str]:
    """Run ``neo4j-admin database import full ARGUMENTS`` from the same jars, with ``home`` as NEO4J_HOME
    (``prefix``: a command the java command is given to, such as a benchmark's memory meter).

    A server started afterwards with the same ``home`` serves the imported database.
    """
    (home / "conf").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "NEO4J_HOME": str(home), "NEO4J_CONF": str(home / "conf")}
    command = [*prefix, "java", "-cp", build(), "org.neo4j.cli.AdminTool", "database", "import", "full", *arguments]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["up", "down", "status", "import"])
    parser.add_argument("--port", type=int, default=7687)
    parser.add_argument("--home", type=Path, default=None, help="default: .neo4j/data (.neo4j/data-PORT)")
    parser.add_argument("--heap", default="2g")
    parser.add_argument("arguments", nargs="*", help="import: the arguments of neo4j-admin database import full")
    args = parser.parse_intermixed_args()  # options also after the action: `import --port P --home H -- ARGS`
    if args.home is None:
        args.home = STATE / ("data" if args.port == 7687 else f"data-{args.port}")
    pid_file = STATE / ("server.pid" if args.port == 7687 else f"server-{args.port}.pid")
    if args.action == "import":
        if pid_file.exists():
            print("the server is running: stop it first (`make neo4j-down`), import, then start it", file=sys.stderr)
            sys.exit(1)
        done = admin_import(args.home, list(args.arguments))
        print(done.stdout + done.stderr, end="")
        sys.exit(done.returncode)
    if args.action == "up":
        if pid_file.exists():
            print(f"already running (pid {pid_file.read_text().strip()}); `make neo4j-down` first", file=sys.stderr)
            sys.exit(1)
        try:
            server = start(args.home, args.port, heap=args.heap, detach=True)
        except Neo4jServerError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(1)
        pid_file.write_text(f"{server.pid}\n{server.uri}\n", encoding="utf-8")
        print(f"Neo4j 5 Community is running (pid {server.pid}, data in {args.home}). Settings that reach it:")
        print(f"export NEO4J_URI={server.uri}")
        print("export NEO4J_DATABASE=neo4j")
        if os.environ.get("METAKG_NEO4J_PASSWORD"):
            print("export NEO4J_USERNAME=neo4j NEO4J_USER=neo4j")
            print("export NEO4J_PASSWORD=...  # the METAKG_NEO4J_PASSWORD it was started with (never printed)")
        else:
            # both empty: how LangChain's Neo4jGraph and neo4j-graphrag are told that authentication is off
            print("export NEO4J_USERNAME= NEO4J_USER= NEO4J_PASSWORD=  # authentication is off on this server")
            if args.port == 7687:
                print("(metakg's defaults: the CLI reaches this server without any setting)")
    elif args.action == "down":
        if not pid_file.exists():
            print("not running")
            return
        pid, uri = pid_file.read_text().split()
        stop(Server(process=None, pid=int(pid), uri=uri, home=args.home))
        pid_file.unlink()
        print(f"stopped Neo4j (pid {pid})")
    else:
        print(pid_file.read_text() if pid_file.exists() else "not running")


if __name__ == "__main__":
    main()
