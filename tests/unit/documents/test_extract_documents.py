"""`metakg extract` over real documents and a folder of them, against a real HTTP endpoint on 127.0.0.1: each
edge names its file and page, files that cannot be read are refused with reasons while the rest go through,
the estimate plans file by file, and an update asks only about the chunks of the file that changed."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from metakg.schemas.bundle import read_bundle
from tests.fault_server import FaultServer
from tests.unit.cli.test_cli import run


def _text(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"])


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultServer]:
    """An endpoint stating one triple per prompt, its subject named by the prompt's hash (each chunk its own)."""
    running = FaultServer().start()
    running.reply_for = lambda body: (
        f"chunk {hashlib.sha256(_text(body).encode()).hexdigest()[:10]}\\is part of\\the corpus"
    )
    monkeypatch.setenv("METAKG_LLM__BASE_URL", running.url)
    monkeypatch.setenv("METAKG_LLM__MODEL", "m")
    monkeypatch.setenv("METAKG_LLM__CONCURRENCY", "8")
    monkeypatch.setenv("METAKG_EXTRACT__EMBEDDINGS", "false")
    yield running
    running.stop()


@pytest.fixture
def folder(faq_files: dict[str, Path], debian_faq: Path, tmp_path: Path) -> Path:
    """A real 73-page PDF and a real HTML page, beside a truncated PDF and a text file named .pdf."""
    docs = tmp_path / "docs"
    docs.mkdir()
    pdf = faq_files["pdf"].read_bytes()
    (docs / "faq.pdf").write_bytes(pdf)
    (docs / "truncated.pdf").write_bytes(pdf[: len(pdf) // 2])
    (docs / "notes.pdf").write_text("plain notes, named as a PDF\n")
    (docs / "basics.html").write_bytes((debian_faq / "basic-defs.en.html").read_bytes())
    return docs


def test_a_folder_is_planned_file_by_file_and_extracted_with_every_edge_naming_its_page(
    server: FaultServer, folder: Path, tmp_path: Path
) -> None:
    _, plan = run("extract", str(folder), "--estimate", "--json")
    files = {f["path"]: f for f in plan["files"]}
    assert set(files) == {"faq.pdf", "truncated.pdf", "notes.pdf", "basics.html"}
    assert files["faq.pdf"]["format"] == "pdf" and files["faq.pdf"]["pages"] == 73
    assert files["faq.pdf"]["units"] > 73 // 2 and files["faq.pdf"]["prompt_tokens"] > 10_000
    assert files["basics.html"]["format"] == "html" and files["basics.html"]["pages"] is None
    assert files["notes.pdf"]["rejected"].startswith("named .pdf but not a PDF") and files["notes.pdf"]["units"] == 0
    assert files["truncated.pdf"]["rejected"] and files["faq.pdf"]["rejected"] is None
    assert plan["calls"] == sum(f["units"] for f in plan["files"])
    assert not [r for r in server.requests if "messages" in r]  # no prompt sent, only token counts asked

    bundle_dir = tmp_path / "b"
    _, refused = run("extract", str(folder), "-o", str(bundle_dir), "--json", code=1)  # 2 files refused
    assert refused["files"] == 4 and refused["files_rejected"] == 2 and refused["validation_ok"]
    _, done = run("extract", str(folder), "-o", str(bundle_dir), "--max-rejects", "2", "--json")
    assert (
        done["llm_calls"]
        == done["cache_hits"]
        == done["units"]
        == files["faq.pdf"]["units"] + files["basics.html"]["units"]
    )
    bundle = read_bundle(bundle_dir)
    records = bundle.edges["record_ids"].explode()
    assert records.len() >= done["units"] and records.str.contains(r"^(faq\.pdf#p\d+(\.\d+)?|basics\.html#c\d+)$").all()
    pages = {int(m.group(1)) for r in records.to_list() if (m := re.match(r"faq\.pdf#p(\d+)", r))}
    assert max(pages) > 60  # the pages of the whole document
    refusals = bundle.rejects.filter(pl.col("check") == "bad_document")
    assert sorted(refusals["record"].to_list()) == ["notes.pdf", "truncated.pdf"]
    units = pl.read_parquet(bundle_dir / "extraction.parquet")
    cited = units.filter(pl.col("record_id").str.starts_with("faq.pdf"))["provenance"].to_list()
    assert all(re.match(r"faq\.pdf p\. \d+(-\d+)?(, .+)?$", c) for c in cited)
    assert any(", 6.2.2 Where do these codenames come from" in c for c in cited)


def test_an_update_asks_only_about_the_changed_files_chunks_and_retracts_a_removed_files_statements(
    server: FaultServer, debian_faq: Path, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for page in ("basic-defs", "kernel", "faqinfo"):
        (docs / f"{page}.html").write_bytes((debian_faq / f"{page}.en.html").read_bytes())
    first = tmp_path / "v1"
    _, one = run("extract", str(docs), "-o", str(first), "--json")
    assert one["files"] == 3 and one["llm_calls"] == one["units"]
    # one file changes (it now holds another page of the FAQ), one is removed
    (docs / "kernel.html").write_bytes((debian_faq / "nextrelease.en.html").read_bytes())
    (docs / "faqinfo.html").unlink()
    _, plan = run("extract", str(docs), "--update", str(first), "--estimate", "--json")
    kernel = next(f for f in plan["files"] if f["path"] == "kernel.html")
    asked = len(server.requests)
    _, update = run("extract", str(docs), "--update", str(first), "-o", str(tmp_path / "v2"), "--json")
    assert update["llm_calls"] - update["cache_hits"] == kernel["units"] == len(server.requests) - asked
    assert plan["calls"] == kernel["units"]
    assert update["records_changes"]["removed"] >= one["units"] - update["units"] - 1
    records = read_bundle(tmp_path / "v2").edges["record_ids"].explode().to_list()
    assert records and not any(r.startswith("faqinfo.html") for r in records)
    assert any(r.startswith("kernel.html") for r in records) and any(r.startswith("basic-defs.html") for r in records)


def test_an_answers_evidence_cites_the_file_page_and_section_it_comes_from(
    server: FaultServer, faq_files: dict[str, Path], tmp_path: Path
) -> None:
    """Each chunk states that its first heading covers a topic; asked about the topic, the evidence edges
    name the page and section of the chunks that state them."""

    def reply(body: dict[str, Any]) -> str:
        text = _text(body)
        if "Buzz Lightyear" in text:
            return "Debian codenames\\come from\\Toy Story"
        return f"chunk {hashlib.sha256(text.encode()).hexdigest()[:10]}\\is part of\\the corpus"

    server.reply_for = reply
    bundle = tmp_path / "faq"
    run("extract", str(faq_files["pdf"]), "-o", str(bundle), "--json")
    _, answer = run("ask", "Where do the Debian codenames come from?", "-b", str(bundle), "--no-llm", "--json")
    cited = [c for source in answer["sources"] for c in source["cited"]]
    assert any(re.fullmatch(r"debian-faq\.pdf p\. \d+(-\d+)?, 6\.2\.2 Where do these codenames come from\?", c)
               for c in cited), cited  # fmt: skip
    edge = next(s["edge"] for s in answer["sources"] if any("6.2.2" in c for c in s["cited"]))
    _, history = run("history", edge, "-g", str(bundle), "--json")
    assert any("6.2.2 Where do these codenames come from?" in c for c in history["versions"][0]["sources"])
    human, _ = run("history", edge, "-g", str(bundle))
    assert "from debian-faq.pdf p. " in human.stdout
    said, _ = run("ask", "Where do the Debian codenames come from?", "-b", str(bundle), "--no-llm")
    assert re.search(r"from debian-faq\.pdf p\. \d+(-\d+)?, 6\.2\.2 Where", said.stdout), said.stdout
