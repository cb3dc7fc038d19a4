"""Word (.docx) through python-docx: the body's paragraphs and tables in reading order, headings by their
style (Title, Heading 1-9), list items by their style or numbering. A .docx has no pages of its own (Word
lays them out when it shows the file); a page is known only where Word recorded its breaks when it last
saved the file, so pages stay unknown (None) and each chunk is placed by its section."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any

from metakg.documents.model import Block, Document, DocumentError

_HEADING = re.compile(r"^(?:heading\s*(\d)|title)$", re.IGNORECASE)


def read_docx(path: Path) -> Document:
    """The blocks of the Word file at ``path``.

    Raises:
        DocumentError: the file is not a readable .docx (damaged, encrypted, or another format).
    """
    import docx
    from docx.opc.exceptions import PackageNotFoundError
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(str(path))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as e:
        raise DocumentError(f"not a readable Word .docx file ({e or type(e).__name__})") from None
    except Exception as e:  # lxml's XMLSyntaxError and the like: a damaged part
        raise DocumentError(f"the Word file is damaged ({type(e).__name__}: {e})") from None
    blocks: list[Block] = []
    for item in document.iter_inner_content():
        if isinstance(item, Paragraph):
            block = _paragraph(item)
            if block is not None:
                blocks.append(block)
        elif isinstance(item, Table):
            text = _table(item)
            if text:
                blocks.append(Block("table", text))
    return Document("docx", None, blocks)


def _paragraph(paragraph: Any) -> Block | None:
    text = " ".join(paragraph.text.split())
    if not text:
        return None
    style = (paragraph.style.name if paragraph.style is not None else "") or ""
    heading = _HEADING.match(style.strip())
    if heading:
        return Block("heading", text, level=int(heading.group(1) or 1))
    numbered = paragraph._p.pPr is not None and paragraph._p.pPr.numPr is not None
    if numbered or style.lower().startswith("list"):
        return Block("item", text)
    return Block("paragraph", text)


def _table(table: Any) -> str:
    """A table's rows as lines, cells joined by `` | `` (a merged cell once)."""
    rows = []
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            text = " ".join(cell.text.split())
            if not cells or cells[-1] != text:
                cells.append(text)
        if any(cells):
            rows.append(" | ".join(cells))
    return "\n".join(rows)
