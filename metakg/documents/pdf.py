"""PDF through pypdfium2 (PDFium, the PDF engine of Chromium): the text layer page by page, headings from
the document's outline (bookmarks) where it has one, else from numbered heading lines.

Chosen over pypdf and pdfminer.six by measurement on the Debian FAQ (73 pages): 0.2 s against 4.9 s and 7.1
s, and words kept apart where pypdf ran them together (docs/formats.md).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from metakg.documents.model import Block, Document, DocumentError

#: a page whose text layer holds fewer characters than this (on average) has none worth the name: a scan
MIN_CHARS_PER_PAGE = 16
_BULLET = re.compile(r"^\s*([•◦▪‣∙·●○■□–\-*]|\(?[0-9]{1,2}[.)]|\(?[a-z][.)])\s+")
_NUMBERED = re.compile(r"^(\d+(?:\.\d+)*)\.?\s+(\S.{0,100})$")
_SPACE = re.compile(r"\s+")
_QUOTES = str.maketrans({"’": "'", "‘": "'", "”": '"', "“": '"', "″": '"'})
_LEADER = re.compile(r"(\.\s?){4,}")  # the dot leaders of a table of contents


def _key(text: str) -> str:
    """A line or title compared without its section number, blanks and case."""
    text = re.sub(r"^\s*(chapter\s+)?\d+(\.\d+)*\.?\s*", "", text, flags=re.IGNORECASE)
    return _SPACE.sub("", text.translate(_QUOTES)).casefold()


def read_pdf(path: Path) -> Document:
    """The blocks of the PDF at ``path``.

    Raises:
        DocumentError: the file is encrypted, damaged or not a PDF, or has no text layer (a scan).
    """
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as e:
        why = str(e)
        if "password" in why.lower():
            raise DocumentError("the PDF is encrypted (password protected); decrypt it first") from None
        raise DocumentError(f"not a readable PDF ({why.removeprefix('Failed to load document ')})") from None
    try:
        pages = len(pdf)
        if pages == 0:
            raise DocumentError("the PDF has no pages")
        texts: list[str] = []
        for index in range(pages):
            page = pdf[index]
            try:
                textpage = page.get_textpage()
                try:
                    texts.append(textpage.get_text_range())
                finally:
                    textpage.close()
            finally:
                page.close()
        outline = [(b.get_title() or "", b.level, b.get_dest()) for b in pdf.get_toc()]
        titles = [(title, level, dest.get_index() if dest is not None else None) for title, level, dest in outline]
    except pdfium.PdfiumError as e:
        raise DocumentError(f"the PDF is damaged ({e})") from None
    finally:
        pdf.close()
    if sum(len(t.strip()) for t in texts) < MIN_CHARS_PER_PAGE * pages:
        raise DocumentError(
            f"the PDF has no text layer ({pages} pages, {sum(len(t.strip()) for t in texts)} characters): a scan. "
            "Run OCR on it first (for example `ocrmypdf IN.pdf OUT.pdf`) and give the result"
        )
    return Document("pdf", pages, _blocks(texts, titles))


def _running_lines(pages: list[list[str]]) -> set[str]:
    """Lines repeated at the top or the bottom of many pages (running heads, page numbers), digits ignored."""
    if len(pages) < 3:
        return set()
    seen: Counter[str] = Counter()
    for lines in pages:
        edge = {re.sub(r"\d+", "#", line.strip()) for line in lines[:2] + lines[-2:]}
        seen.update(e for e in edge if e)
    least = max(3, len(pages) * 3 // 10)
    return {line for line, n in seen.items() if n >= least}


def _blocks(texts: list[str], titles: list[tuple[str, int, int | None]]) -> list[Block]:
    """Blocks from each page's text lines: headings (by the outline, or numbered lines), list items,
    paragraphs (lines joined until one ends a sentence short of the page's width)."""
    # PDFium marks a word hyphenated at a line's end with U+FFFE (or U+0002): the word is joined again
    texts = [re.sub(r"[\ufffe\x02]\r?\n", "", t).replace("\ufffe", "") for t in texts]
    pages = [[line.rstrip() for line in t.replace("\r\n", "\n").split("\n")] for t in texts]
    running = _running_lines(pages)
    by_page: dict[int, list[tuple[str, int]]] = {}
    for title, level, index in titles:
        if index is not None and title.strip():
            by_page.setdefault(index, []).append((_key(title), level + 1))
    blocks: list[Block] = []
    for index, raw in enumerate(pages):
        lines = [line for line in raw if line.strip() and re.sub(r"\d+", "#", line.strip()) not in running]
        wanted = by_page.get(index, []) + by_page.get(index - 1, [])
        width = max((len(line) for line in lines), default=0)
        paragraph: list[str] = []
        kind = "paragraph"

        def flush(page: int = index + 1) -> None:
            nonlocal paragraph, kind
            if paragraph:
                text = _SPACE.sub(" ", " ".join(paragraph)).strip()
                if text:
                    blocks.append(Block(kind, text, page))  # type: ignore[arg-type]
            paragraph, kind = [], "paragraph"

        i = 0
        while i < len(lines):
            heading = _heading_at(lines, i, wanted, outline=bool(by_page))
            if heading is not None:
                flush()
                text, level, used = heading
                blocks.append(Block("heading", text, index + 1, level))
                i += used
                continue
            line = lines[i].strip()
            if _BULLET.match(line):
                flush()
                kind = "item"
            paragraph.append(line)
            if line.endswith((".", "!", "?", ":")) and len(lines[i]) < 0.8 * width:
                flush()
            i += 1
        flush()
    return blocks


def _heading_at(
    lines: list[str], i: int, wanted: list[tuple[str, int]], *, outline: bool
) -> tuple[str, int, int] | None:
    """The heading starting at line ``i``: one to three lines that spell an outline title of the page (its
    text, level and the lines it takes), or, where the document has no outline, a short numbered line."""
    if outline:
        joined = ""
        for used in range(1, 4):
            if i + used > len(lines):
                break
            joined += _key(lines[i + used - 1])
            if not joined:
                return None
            for key, level in wanted:
                if key and joined == key:
                    return _SPACE.sub(" ", " ".join(x.strip() for x in lines[i : i + used])), level, used
            if not any(key.startswith(joined) for key, _ in wanted):
                return None
        return None
    match = _NUMBERED.match(lines[i].strip())
    if (
        match
        and _LEADER.search(match.group(2)) is None
        and not match.group(2).endswith((".", ",", ";"))
        and match.group(2)[:1].isupper()
    ):
        return lines[i].strip(), match.group(1).count(".") + 1, 1
    return None
