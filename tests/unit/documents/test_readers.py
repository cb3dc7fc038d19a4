"""Document readers and structural chunking on real documents (Debian's FAQ as PDF and HTML, python-docx's
sample Word files, its README in Markdown), and the files that must be refused, with their reasons."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from metakg.documents.model import Block
from metakg.documents.reader import chunk_blocks, chunk_ids, document_text, provenance, read_document, read_files
from metakg.ingest.datasets import read_documents


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def test_the_faq_pdf_is_read_page_by_page_with_its_sections(faq_files: dict[str, Path]) -> None:
    (read,) = read_files(faq_files["pdf"])
    assert read.rejected is None and read.format == "pdf" and read.pages == 73
    ids = chunk_ids(read.name, read.chunks)
    assert len(set(ids)) == len(ids) and all(re.fullmatch(r"debian-faq\.pdf#p\d+(\.\d+)?", i) for i in ids)
    pages = [c.first_page for c in read.chunks]
    assert pages == sorted(pages) and min(pages) >= 1 and max(c.last_page or 0 for c in read.chunks) <= 73
    # the answer about the codenames sits in its section, under its chapter, on its page
    (codenames,) = [c for c in read.chunks if "Buzz Lightyear" in c.text]
    assert codenames.section[0] == "The Debian archives"
    assert codenames.section[-1].startswith("6.2.2 Where do these codenames come from")
    assert provenance(read.name, codenames).startswith(f"debian-faq.pdf p. {codenames.pages}, 6.2.2 Where")
    # words hyphenated at a line's end are joined again, and words are never run together
    text = " ".join(c.text for c in read.chunks)
    assert "\ufffe" not in text and "de- tails" not in text and "fordetails" not in text.replace(" ", " ")


def test_the_pdf_text_recovers_most_of_the_plain_text_rendering(faq_files: dict[str, Path]) -> None:
    """The share of the plain-text rendering's words the PDF's chunks recover (a multiset overlap)."""
    (read,) = read_files(faq_files["pdf"])
    from collections import Counter

    got = Counter(_words(" ".join(c.text for c in read.chunks)))
    want = Counter(_words(faq_files["txt"].read_text(encoding="utf-8", errors="replace")))
    recovered = sum((got & want).values()) / sum(want.values())
    assert recovered > 0.9, recovered


def test_chunks_follow_the_structure_and_their_offsets_hold() -> None:
    blocks = [
        Block("heading", "1 Intro", 1, 1), Block("paragraph", "A" * 50, 1), Block("heading", "1.1 Scope", 1, 2),
        Block("paragraph", "Bees buzz. " * 80, 2), Block("item", "• one", 2), Block("table", "x | y\n" * 300, 3),
        Block("heading", "2 Next", 3, 1), Block("paragraph", "C.", 4),
    ]  # fmt: skip
    chunks = chunk_blocks(blocks, max_chars=600)
    text = document_text(blocks)
    assert all(text[c.start : c.end] == c.text for c in chunks)
    assert next(c.section for c in chunks) == ("1 Intro",)
    assert ("1 Intro", "1.1 Scope") in [c.section for c in chunks] and chunks[-1].section == ("2 Next",)
    assert chunks[-1].pages == "3-4"
    (table,) = [c for c in chunks if "x | y" in c.text]
    assert table.text.count("x | y") == 300  # a table stays whole, even past the chunk size
    # past the size only by the heading that opens a section
    assert all(len(c.text.removeprefix("1.1 Scope\n\n")) <= 600 for c in chunks if "x | y" not in c.text)


def test_the_faq_html_pages_lose_their_navigation_and_keep_their_sections(debian_faq: Path) -> None:
    doc = read_document(debian_faq / "basic-defs.en.html", "html")
    headings = [b.text for b in doc.blocks if b.kind == "heading"]
    assert "1.2. What is Debian GNU/Linux?" in headings
    chunks = chunk_blocks(doc.blocks)
    (what,) = [c for c in chunks if "is a particular distribution of the Linux operating" in c.text]
    assert what.section[-1] == "1.2. What is Debian GNU/Linux?" and what.pages is None
    assert not any(b.text in ("Next", "Prev", "Home") for b in doc.blocks)  # the navigation links are left out


def test_word_files_give_headings_lists_and_tables(docx_samples: Path) -> None:
    files = docx_samples / "features" / "steps" / "test_files"
    styles = read_document(files / "par-known-paragraphs.docx", "docx")
    assert [b.kind for b in styles.blocks][:2] == ["heading", "paragraph"]
    tables = read_document(files / "tbl-having-applied-style.docx", "docx")
    table = next(b for b in tables.blocks if b.kind == "table")
    assert table.text.splitlines()[0] == "foobar | barfoo"
    numbered = read_document(files / "num-having-numbering-part.docx", "docx")
    assert [b.kind for b in numbered.blocks] == ["item"]


def test_markdown_gives_headings_items_and_tables(docx_samples: Path) -> None:
    doc = read_document(docx_samples / "README.md", "markdown")
    kinds = {b.kind for b in doc.blocks}
    assert {"heading", "paragraph"} <= kinds


def test_a_folder_reads_what_it_can_and_refuses_the_rest_with_reasons(
    faq_files: dict[str, Path], debian_faq: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    pdf = faq_files["pdf"].read_bytes()
    (folder / "faq.pdf").write_bytes(pdf)
    (folder / "truncated.pdf").write_bytes(pdf[: len(pdf) // 3])
    (folder / "notes.pdf").write_text("just some notes, not a PDF at all\n")
    (folder / "basics.html").write_bytes((debian_faq / "basic-defs.en.html").read_bytes())
    (folder / "empty.md").write_text("")
    (folder / "readme.md").write_text("# Title\n\nSome text.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    (folder / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    (folder / "old.doc").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 64)
    (folder / "link.pdf").symlink_to(folder / "faq.pdf")
    (folder / "broken.txt").symlink_to(folder / "nowhere.txt")
    os.mkfifo(folder / "pipe.txt")
    data = read_documents(folder)
    assert data.files is not None
    by_name = {f["path"]: f for f in data.files}
    assert by_name["faq.pdf"]["rejected"] is None and by_name["faq.pdf"]["pages"] == 73
    assert by_name["link.pdf"].get("same_as") == "faq.pdf" and by_name["link.pdf"]["units"] == 0
    reasons = {f["path"]: f["rejected"] for f in data.files if f["rejected"]}
    assert set(reasons) == {"truncated.pdf", "notes.pdf", "empty.md", "image.png", "old.doc", "broken.txt", "pipe.txt"}
    assert "not a readable PDF" in reasons["truncated.pdf"] or "damaged" in reasons["truncated.pdf"]
    assert reasons["notes.pdf"].startswith("named .pdf but not a PDF")
    assert reasons["empty.md"] == "the file is empty" and "broken symbolic link" in reasons["broken.txt"]
    assert "FIFO" in reasons["pipe.txt"] and ".docx" in reasons["old.doc"]
    # every file is accepted or refused once; the rejects name the file and say why
    assert sorted(data.rejects["record"].to_list()) == sorted(reasons)
    assert data.read == len(data.files) - 1  # the link is read once, as faq.pdf
    table = data.records.filter(data.records["source"] == "readme.md")["text"].to_list()
    assert any("a | b\n1 | 2" in t for t in table)


def _blank_pdf(path: Path) -> Path:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument.new()
    try:
        for _ in range(3):
            pdf.new_page(612, 792)
        pdf.save(str(path))
    finally:
        pdf.close()
    return path


def test_a_scanned_pdf_and_an_encrypted_one_are_refused_saying_what_to_do(
    faq_files: dict[str, Path], tmp_path: Path
) -> None:
    scan = _blank_pdf(tmp_path / "scan.pdf")  # pages with no text layer, as a scanner makes them
    (read,) = read_files(scan)
    assert read.rejected is not None and "no text layer" in read.rejected and "OCR" in read.rejected
    pypdf = pytest.importorskip("pypdf")
    writer = pypdf.PdfWriter(clone_from=str(faq_files["pdf"]))
    writer.encrypt(user_password="secret", algorithm="AES-128")
    locked = tmp_path / "locked.pdf"
    with locked.open("wb") as fh:
        writer.write(fh)
    (read,) = read_files(locked)
    assert read.rejected is not None and "encrypted" in read.rejected


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_text("word " * 100_000)
    (read,) = read_files(big, max_bytes=100_000)
    assert read.rejected is not None and "max_document_mb" in read.rejected
