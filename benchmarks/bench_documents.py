"""Reading documents: pages (or files) per second and peak memory per format, each format in its own process,
and the share of the text recovered against a plain-text rendering where one exists.

Run: ``make bench`` or ``python -m benchmarks.bench_documents``. Inputs are REAL public documents: Debian's FAQ
(the Debian package debian-faq: a 73-page PDF, its 22 HTML pages and its plain-text rendering) and the sample
Word files and README of python-docx 1.2.0's source distribution (``pip download``). The PDF is also read with
pypdf and pdfminer.six, where installed, for the choice of library (docs/formats.md).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path

from benchmarks.common import WORK, record, run_measured

FAQ = Path("/usr/share/doc/debian/FAQ")

#: run in a process of its own: read every file given, print the pages, chunks and text as JSON
READ = """
import json, sys, time
from pathlib import Path
from metakg.documents.reader import read_files
paths = [Path(p) for p in sys.argv[1:]]
start = time.perf_counter()
pages = chunks = files = 0
text = []
for path in paths:
    for f in read_files(path):
        if f.rejected is None and f.same_as is None:
            files += 1
            pages += f.pages or 0
            chunks += len(f.chunks)
            text.extend(c.text for c in f.chunks)
print(json.dumps({"seconds": time.perf_counter() - start, "files": files, "pages": pages, "chunks": chunks,
                  "text": "\\n".join(text)}))
"""

OTHERS = {
    "pypdf": "import sys, time; from pypdf import PdfReader; t = time.perf_counter(); r = PdfReader(sys.argv[1]); "
    "s = [p.extract_text() for p in r.pages]; print(time.perf_counter() - t); print('\\n'.join(s))",
    "pdfminer.six": "import sys, time; from pdfminer.high_level import extract_text; t = time.perf_counter(); "
    "s = extract_text(sys.argv[1]); print(time.perf_counter() - t); print(s)",
}


def words(text: str) -> Counter[str]:
    return Counter(re.findall(r"[a-z0-9]+", text.lower()))


def recovered(text: str, reference: str) -> float:
    """The share of the reference's words (with their counts) found in ``text``."""
    want = words(reference)
    return round(sum((words(text) & want).values()) / max(1, sum(want.values())), 4)


def inputs() -> dict[str, list[Path]]:
    if not (FAQ / "debian-faq.en.pdf.gz").is_file():
        sys.exit(f"needs Debian's FAQ at {FAQ}: apt-get install debian-faq")
    work = WORK / "documents"
    work.mkdir(parents=True, exist_ok=True)
    for kind in ("pdf", "txt"):
        (work / f"debian-faq.{kind}").write_bytes(gzip.decompress((FAQ / f"debian-faq.en.{kind}.gz").read_bytes()))
    html = work / "html"
    html.mkdir(exist_ok=True)
    for page in sorted(FAQ.glob("*.en.html")):
        (html / page.name).write_bytes(page.read_bytes())
    sdist = work / "python_docx-1.2.0.tar.gz"
    if not sdist.is_file():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
             "python-docx==1.2.0", "-d", str(work)], check=True,
        )  # fmt: skip
    with tarfile.open(sdist) as tar:
        tar.extractall(work, filter="data")
    samples = work / "python_docx-1.2.0"
    return {
        "pdf": [work / "debian-faq.pdf"],
        "html": [html],
        "docx": sorted((samples / "features" / "steps" / "test_files").glob("*.docx")),
        "markdown": [samples / "README.md"],
    }


def main() -> None:
    argparse.ArgumentParser(description=__doc__).parse_args()
    files = inputs()
    reference = (WORK / "documents" / "debian-faq.txt").read_text(encoding="utf-8", errors="replace")
    print("documents benchmark: REAL public documents (Debian's FAQ, python-docx's samples), each format alone")
    figures: dict[str, dict[str, object]] = {}
    for fmt, paths in files.items():
        measured = run_measured([sys.executable, "-c", READ, *map(str, paths)])
        got = json.loads(measured.stdout.strip().splitlines()[-1])
        row: dict[str, object] = {
            "files": got["files"], "pages": got["pages"], "chunks": got["chunks"],
            "read_s": round(got["seconds"], 3), "process_s": round(measured.seconds, 2),
            "peak_mib": round(measured.peak_mib), "chars": len(got["text"]),
        }  # fmt: skip
        if got["pages"]:
            row["pages_per_s"] = round(got["pages"] / got["seconds"], 1)
        row["files_per_s"] = round(got["files"] / got["seconds"], 1)
        if fmt in ("pdf", "html"):
            row["recovered_vs_plain_text"] = recovered(got["text"], reference)
        figures[fmt] = row
        print(f"  {fmt:<9} {json.dumps(row)}")
    pdf = files["pdf"][0]
    others: dict[str, dict[str, float]] = {}
    for name, code in OTHERS.items():
        done = subprocess.run([sys.executable, "-c", code, str(pdf)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"  {name}: not installed, not compared")
            continue
        seconds, _, text = done.stdout.partition("\n")
        others[name] = {"read_s": round(float(seconds), 2), "recovered_vs_plain_text": recovered(text, reference)}
        print(f"  PDF with {name}: {others[name]}")
    record("documents", {"formats": figures, "pdf_libraries": others}, synthetic_data=False)


if __name__ == "__main__":
    main()
