"""Files and folders of documents into chunk records: each file's format picked by its extension and its
first bytes, read into blocks, and cut along its structure (:func:`chunk_blocks`). A file that cannot be read
is a rejected file with its reason; the others go on."""

from __future__ import annotations

import os
import re
import stat
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from metakg.documents.model import Block, Document, DocumentError
from metakg.textfiles import strip_bom

#: the document formats and the extensions that name them
EXTENSIONS: dict[str, str] = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".html": "html", ".htm": "html", ".xhtml": "html",
    ".md": "markdown", ".markdown": "markdown",
    ".txt": "text", ".text": "text", ".rst": "text",
}  # fmt: skip
DOCUMENT_FORMATS = ("pdf", "docx", "html", "markdown")
#: a file larger than this is refused unread (``extract.max_document_mb`` sets it)
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an old .doc, or a password-protected Office file
_HTML_START = re.compile(rb"^\s*(<\?xml[^>]*>\s*)?(<!--.*?-->\s*)*<(!doctype\s+html|html|head|body)", re.I | re.S)


@dataclass(frozen=True)
class Chunk:
    """A piece of a document sent in one prompt: its text (``full[start:end]`` of the document's text), the
    pages it spans (None where the format has none) and the headings above it (outermost first)."""

    text: str
    start: int
    end: int
    first_page: int | None
    last_page: int | None
    section: tuple[str, ...]

    @property
    def pages(self) -> str | None:
        """``"12"`` or ``"12-13"``; None without pages."""
        if self.first_page is None:
            return None
        last = self.last_page or self.first_page
        return str(self.first_page) if last == self.first_page else f"{self.first_page}-{last}"


@dataclass(frozen=True)
class FileRead:
    """One input file of a documents run: its path as the records name it, the format read, its pages, its
    chunks, or why it was refused (``rejected``; no chunks then)."""

    name: str
    format: str | None
    pages: int | None
    chunks: list[Chunk]
    rejected: str | None = None
    same_as: str | None = None  # a link to a file the run reads under this other name: read once


def provenance(name: str, chunk: Chunk) -> str:
    """How a chunk is cited: ``report.pdf p. 12, 3.2 Methods`` (pages and section where known)."""
    parts = [name]
    if chunk.pages is not None:
        parts[0] += f" p. {chunk.pages}"
    if chunk.section:
        parts.append(chunk.section[-1])
    return ", ".join(parts)


_CHUNK_ID = re.compile(r"^(?P<file>.+)#(?:p(?P<page>\d+)(?:\.\d+)?|c\d+)$")


def cite(record_id: str, provenance: dict[str, str] | None = None) -> str:
    """How a record is shown: its provenance when known (``report.pdf p. 12, 3.2 Methods``), a document
    chunk's file and page read from its id (``report.pdf#p12.2`` -> ``report.pdf p. 12``), else the id."""
    if provenance and record_id in provenance:
        return provenance[record_id]
    match = _CHUNK_ID.match(record_id)
    if match is None:
        return record_id
    return f"{match['file']} p. {match['page']}" if match["page"] else match["file"]


def sniff(path: Path, head: bytes, wanted: str = "auto") -> str:
    """The format of the file at ``path`` whose first bytes are ``head``: ``wanted`` checked against the
    bytes, or with ``auto`` the extension's format checked against them, else the bytes' own.

    Raises:
        DocumentError: the bytes belie the extension or the format asked for, or are no document metakg reads.
    """
    by_name = EXTENSIONS.get(path.suffix.lower())
    claimed = by_name if wanted == "auto" else wanted
    if not head:
        raise DocumentError("the file is empty")
    if head.startswith(_OLE2):
        raise DocumentError(
            "an old Word .doc or a password-protected Office file (an OLE2 container): save it as .docx without a "
            "password"
        )
    if head.startswith(b"\x1f\x8b"):
        raise DocumentError("a gzip-compressed file: decompress it first (gunzip)")
    found = _by_bytes(path, head)
    if claimed is None:
        if found in ("pdf", "docx", "html"):
            return found
        kind = "no extension" if not path.suffix else f"the extension {path.suffix}"
        raise DocumentError(
            f"{kind} names no document format ({_described(head)}); metakg reads PDF, Word .docx, HTML, "
            "Markdown and plain text (.txt)"
        )
    if claimed in ("pdf", "docx") and found != claimed:
        named = f"named {path.suffix}" if wanted == "auto" else f"given as {wanted}"
        raise DocumentError(f"{named} but not a {claimed.upper() if claimed == 'pdf' else 'Word .docx'} file "
                            f"({_described(head)})")  # fmt: skip
    if claimed in ("html", "markdown", "text") and found in ("pdf", "docx", "binary"):
        raise DocumentError(f"named {path.suffix or 'without an extension'} but {_described(head)}")
    if claimed in ("markdown", "text") and found == "not-utf8":
        raise DocumentError(
            "not UTF-8 text (a Latin-1 or other 8-bit file?); convert it, e.g. iconv -f latin1 -t utf-8"
        )
    return claimed


def _by_bytes(path: Path, head: bytes) -> str | None:
    """The format the first bytes show: pdf, docx, html, text, ``binary``; None for an unknown zip."""
    if head[:1024].lstrip().startswith(b"%PDF-") or b"%PDF-" in head[:1024]:
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(path) as z:
                return "docx" if "word/document.xml" in z.namelist() else None
        except (zipfile.BadZipFile, OSError):
            return None
    text = strip_bom(head)
    if b"\x00" in text[:4096]:
        return "binary"
    if _HTML_START.match(text[:4096]):
        return "html"
    try:
        text[:4096].decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(text[:4096]) - 4:  # not merely a character cut by the 4 KiB window
            return "not-utf8"
    return "text"


def _described(head: bytes) -> str:
    if head.startswith(b"PK\x03\x04"):
        return "a zip archive"
    if head[:4096].count(b"\x00") or _by_bytes(Path("-"), head) in ("binary", "not-utf8"):
        return f"binary data starting {head[:8].hex(' ')}"
    return f"text starting {head[:24].decode('utf-8', errors='replace')!r}"


def read_document(path: Path, fmt: str) -> Document:
    """The blocks of one file in the format ``fmt`` (as :func:`sniff` found it).

    Raises:
        DocumentError: the file cannot be read in that format.
    """
    if fmt == "pdf":
        from metakg.documents.pdf import read_pdf

        return read_pdf(path)
    if fmt == "docx":
        from metakg.documents.docx import read_docx

        return read_docx(path)
    data = strip_bom(path.read_bytes())
    if fmt == "html":
        from metakg.documents.html import read_html

        return read_html(path, data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DocumentError(
            f"not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); convert it, e.g. iconv -f latin1 "
            "-t utf-8"
        ) from None
    if fmt == "markdown":
        from metakg.documents.markdown import read_markdown

        return read_markdown(text)
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
    return Document("text", None, [Block("paragraph", p) for p in paragraphs if p])


def chunk_blocks(blocks: list[Block], *, max_chars: int = 1500) -> list[Chunk]:
    """Chunks along the document's structure: a heading starts a new chunk (and its section), paragraphs and
    list items gather until the next would pass ``max_chars``, a table stays whole, a paragraph longer than
    ``max_chars`` is cut between sentences. The document's text is the blocks' texts joined by blank lines;
    each chunk's ``text`` is ``text[start:end]`` of it."""
    from metakg.text_processing import chunk_text

    full = document_text(blocks)
    pieces: list[tuple[Block, int, int]] = []  # each piece with its offsets in ``full``
    offset = 0
    for block in blocks:
        if block.kind in ("paragraph", "item") and len(block.text) > max_chars:
            for part in chunk_text(block.text, max_chars=max_chars):
                at = block.text.index(part.text, part.start)
                pieces.append((Block(block.kind, part.text, block.page), offset + at, offset + at + len(part.text)))
        else:
            pieces.append((block, offset, offset + len(block.text)))
        offset += len(block.text) + 2
    chunks: list[Chunk] = []
    path: list[tuple[int, str]] = []
    current: list[tuple[Block, int, int]] = []

    def flush() -> None:
        if current:
            start, end = current[0][1], current[-1][2]
            pages = [b.page for b, _, _ in current if b.page is not None]
            section = tuple(title for _, title in path)
            chunks.append(
                Chunk(full[start:end], start, end, min(pages, default=None), max(pages, default=None), section)
            )
            current.clear()

    for piece in pieces:
        block, _start, end = piece
        if block.kind == "heading":
            if not all(b.kind == "heading" for b, _, _ in current):
                flush()
            while path and path[-1][0] >= block.level:
                path.pop()
            path.append((block.level, block.text))
            current.append(piece)
            continue
        only_headings = all(b.kind == "heading" for b, _, _ in current)
        if current and not only_headings and end - current[0][1] > max_chars:
            flush()
        current.append(piece)
        if block.kind == "table" and len(block.text) > max_chars:
            flush()
    flush()
    return chunks


def document_text(blocks: list[Block]) -> str:
    """The document's text as chunk offsets count it: the blocks' texts joined by blank lines."""
    return "\n\n".join(b.text for b in blocks)


def _entries(root: Path) -> Iterator[tuple[Path, str | None]]:
    """The files under ``root`` in name order (hidden names left out), each with why it cannot be read
    (None when it can): a broken link, a folder that cannot be listed, a FIFO or device."""

    def fail(error: OSError) -> None:
        failures.append(error)

    failures: list[OSError] = []
    for folder, dirs, files in os.walk(root, onerror=fail, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = Path(folder) / name
            yield path, _unreadable(path)
        for error in failures:
            yield Path(error.filename or folder), f"the folder cannot be listed ({error.strerror})"
        failures.clear()


def _unreadable(path: Path) -> str | None:
    try:
        mode = path.stat().st_mode
    except OSError as e:
        return "a broken symbolic link" if path.is_symlink() else f"cannot be read ({e.strerror})"
    if not stat.S_ISREG(mode):
        return "not a regular file (a FIFO, socket or device): never opened"
    if not os.access(path, os.R_OK):
        return "cannot be read (permission denied)"
    return None


def read_files(
    path: Path, fmt: str = "auto", *, max_chars: int = 1500, max_bytes: int = DEFAULT_MAX_BYTES
) -> list[FileRead]:
    """Every file of ``path`` (a file or a folder, walked in name order), read and chunked, or refused with its
    reason. Names are relative to the folder (the file's own name for a file)."""
    if path.is_dir():
        base = path
        entries = list(_entries(path))
    else:
        base = path.parent
        entries = [(path, _unreadable(path))]
    reads: list[FileRead] = []
    seen: dict[str, str] = {}
    for file, problem in entries:
        name = file.relative_to(base).as_posix() if file.is_relative_to(base) else file.name
        real = os.path.realpath(file)
        if problem is None and real in seen:
            reads.append(FileRead(name, None, None, [], same_as=seen[real]))
        elif problem is None:
            seen[real] = name
            reads.append(_read_file(file, name, fmt, max_chars, max_bytes))
        else:
            reads.append(FileRead(name, None, None, [], problem))
    return reads


def _read_file(file: Path, name: str, fmt: str, max_chars: int, max_bytes: int) -> FileRead:
    found: str | None = None
    try:
        size = file.stat().st_size
        if size > max_bytes:
            raise DocumentError(
                f"{size / 2**20:,.0f} MiB, more than extract.max_document_mb ({max_bytes / 2**20:,.0f} MiB)"
            )
        with file.open("rb") as fh:
            head = fh.read(8192)
        found = sniff(file, head, fmt)
        document = read_document(file, found)
        chunks = chunk_blocks(document.blocks, max_chars=max_chars)
        if not chunks:
            raise DocumentError("no text in the file")
        return FileRead(name, found, document.pages, chunks)
    except DocumentError as e:
        return FileRead(name, found, None, [], str(e))
    except OSError as e:
        return FileRead(name, found, None, [], f"cannot be read ({e.strerror or e})")
    except RecursionError:
        return FileRead(name, found, None, [], "nested too deeply to read")


def chunk_ids(name: str, chunks: list[Chunk]) -> list[str]:
    """Each chunk's record id: ``report.pdf#p12`` by its first page (``#p12.2`` for the second chunk starting
    there), ``notes.md#c3`` by its place where the format has no pages."""
    ids: list[str] = []
    seen: dict[str, int] = {}
    for number, chunk in enumerate(chunks, start=1):
        base = f"{name}#p{chunk.first_page}" if chunk.first_page is not None else f"{name}#c{number}"
        seen[base] = seen.get(base, 0) + 1
        ids.append(base if seen[base] == 1 else f"{base}.{seen[base]}")
    return ids
