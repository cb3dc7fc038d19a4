"""HTML through lxml: the page's main text (navigation, headers, footers, scripts and forms left out), headings
h1-h6, paragraphs, list items, tables and preformatted text in reading order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metakg.documents.model import Block, Document, DocumentError

#: elements whose text is never part of the document's content
_DROP = ("script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form", "button", "svg")
_BLOCKS = {"p", "pre", "blockquote", "dd", "dt", "figcaption", "caption", "address"}
_CONTAINERS = {"div", "section", "article", "main", "body", "center", "dl", "details", "summary", "td", "th"}


def read_html(path: Path, data: bytes | None = None) -> Document:
    """The blocks of the HTML file at ``path`` (or its bytes ``data``).

    Raises:
        DocumentError: the file cannot be parsed as HTML or holds no text.
    """
    import lxml.etree
    import lxml.html

    raw = path.read_bytes() if data is None else data
    try:
        root = lxml.html.document_fromstring(raw)
    except (lxml.etree.ParserError, ValueError) as e:
        raise DocumentError(f"not readable as HTML ({e})") from None
    for element in [*root.iter(*_DROP), *root.iter(lxml.etree.Comment, lxml.etree.ProcessingInstruction)]:
        if element.getparent() is not None:
            element.drop_tree()
    main = next(
        (m for m in (root.find(".//main"), root.find(".//article"), root.find(".//body")) if m is not None), root
    )
    blocks: list[Block] = []
    _walk(main, blocks)
    return Document("html", None, blocks)


def _text(element: Any) -> str:
    return " ".join(element.text_content().split())


def _walk(element: Any, blocks: list[Block]) -> None:
    """Blocks of ``element``'s subtree: a block element becomes one block; a container gives its loose text
    as a paragraph and is walked into."""
    tag = element.tag if isinstance(element.tag, str) else ""
    tag = tag.lower()
    if len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
        if text := _text(element):
            blocks.append(Block("heading", text, level=int(tag[1])))
        return
    if tag == "li":
        nested = [child for child in element if isinstance(child.tag, str) and child.tag.lower() in ("ul", "ol")]
        for child in nested:
            child.drop_tree()
        if text := _text(element):
            blocks.append(Block("item", text))
        for child in nested:
            _walk(child, blocks)
        return
    if tag == "table":
        rows = []
        for row in element.iter("tr"):
            cells = [
                " ".join(c.text_content().split()) for c in row if isinstance(c.tag, str) and c.tag in ("td", "th")
            ]
            if any(cells):
                rows.append(" | ".join(cells))
        if rows:
            blocks.append(Block("table", "\n".join(rows)))
        return
    if tag in _BLOCKS:
        if text := (element.text_content().strip() if tag == "pre" else _text(element)):
            blocks.append(Block("paragraph", text))
        return
    loose: list[str] = []

    def spill() -> None:
        if text := " ".join(" ".join(loose).split()):
            blocks.append(Block("paragraph", text))
        loose.clear()

    if element.text:
        loose.append(element.text)
    for child in element:
        child_tag = child.tag.lower() if isinstance(child.tag, str) else ""
        if child_tag in _BLOCKS or child_tag in _CONTAINERS or child_tag in ("ul", "ol", "table", "li", "hr", "br"):
            if child_tag == "br":
                loose.append("\n")
            else:
                spill()
                _walk(child, blocks)
        elif child_tag and len(child_tag) == 2 and child_tag[0] == "h" and child_tag[1] in "123456":
            spill()
            _walk(child, blocks)
        else:
            loose.append(child.text_content() if child_tag else "")
        if child.tail:
            loose.append(child.tail)
    spill()
