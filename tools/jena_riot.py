"""Validate an RDF file with Apache Jena's parser, as ``riot --validate`` does (strict: any warning fails).

    python tools/jena_riot.py FILE      # prints VALID triples=N quads=N graphs=N, or INVALID <reason>

The jars come from Maven Central through Maven (tools/jena/pom.xml, into ~/.m2); a small launcher
(tools/jena/src/MetakgRiot.java) is compiled once into ``.jena/``. The tests use :func:`validate`.
"""

from __future__ import annotations

import fcntl
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent
POM = ROOT / "jena" / "pom.xml"
SOURCE = ROOT / "jena" / "src" / "MetakgRiot.java"
STATE = ROOT.parent / ".jena"


class JenaError(RuntimeError):
    """Jena could not be built or run."""


@dataclass
class Verdict:
    """What Jena made of a file."""

    valid: bool
    triples: int = 0
    quads: int = 0
    graphs: int = 0
    reason: str = ""


def build(work: Path = STATE) -> str:
    """Resolve the jars (Maven) and compile the launcher; returns the Java classpath.

    Test workers call this at once: a lock file makes one of them build while the others wait, and the
    class is compiled into a scratch folder and moved into place whole, so no reader sees it half written.
    """
    work.mkdir(parents=True, exist_ok=True)
    with open(work / ".lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_locked(work)


def _build_locked(work: Path) -> str:
    classpath_file = work / "classpath.txt"
    classes = work / "classes"
    if not classpath_file.exists() or classpath_file.stat().st_mtime < POM.stat().st_mtime:
        if shutil.which("mvn") is None:
            raise JenaError("Maven (mvn) is needed to fetch the Jena jars: apt-get install maven")
        done = subprocess.run(
            ["mvn", "-q", "-B", "-f", str(POM), "dependency:build-classpath", f"-Dmdep.outputFile={classpath_file}"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise JenaError(f"mvn could not resolve the Jena jars:\n{done.stdout}\n{done.stderr}")
    classpath = classpath_file.read_text(encoding="utf-8").strip()
    launcher = classes / "MetakgRiot.class"
    if not launcher.exists() or launcher.stat().st_mtime < SOURCE.stat().st_mtime:
        scratch = Path(tempfile.mkdtemp(prefix="classes.", dir=work))
        done = subprocess.run(["javac", "-cp", classpath, "-d", str(scratch), str(SOURCE)],
                              capture_output=True, text=True, check=False)  # fmt: skip
        if done.returncode != 0:
            shutil.rmtree(scratch, ignore_errors=True)
            raise JenaError(f"javac failed:\n{done.stderr}")
        classes.mkdir(exist_ok=True)
        for compiled in scratch.glob("*.class"):
            compiled.replace(classes / compiled.name)
        shutil.rmtree(scratch, ignore_errors=True)
    return f"{classes}:{classpath}"


def validate(path: Path) -> Verdict:
    """Jena's verdict on ``path`` (its format from its extension: .ttl, .nt, .nq, .trig)."""
    done = subprocess.run(["java", "-cp", build(), "MetakgRiot", str(path)], capture_output=True, text=True,
                          timeout=600, check=False)  # fmt: skip
    line = (done.stdout.strip().splitlines() or [""])[-1]
    found = re.match(r"VALID triples=(\d+) quads=(\d+) graphs=(\d+)", line)
    if found:
        return Verdict(True, *(int(n) for n in found.groups()))
    if line.startswith("INVALID"):
        return Verdict(False, reason=line.removeprefix("INVALID ").strip())
    raise JenaError(f"Jena did not run: {done.stdout}\n{done.stderr}")


if __name__ == "__main__":
    verdict = validate(Path(sys.argv[1]))
    print(verdict)
    sys.exit(0 if verdict.valid else 1)
