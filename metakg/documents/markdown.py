"""Markdown through markdown-it-py (CommonMark with GitHub's tables): headings, paragraphs, list items,
tables and code blocks in reading order; front matter between ``---`` lines at the top is left out."""

from __future__ import annotations

import re

from metakg.documents.model import Block, Document

_FRONT_MATTER = re.compile(r"\A---\r?\n.*?\r?\n(---|\.\.\.)\r?\n", re.DOTALL)


def read_markdown(text: str) -> Document:
    """The blocks of a Markdown text."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(_FRONT_MATTER.sub("", text))
    blocks: list[Block] = []
    heading = 0
    in_item = 0
    table: list[list[str]] = []
    cell = False
    for token in tokens:
        kind = token.type
        if kind == "heading_open":
            heading = int(token.tag[1])
        elif kind == "list_item_open":
            in_item += 1
        elif kind == "list_item_close":
            in_item -= 1
        elif kind == "table_open":
            table = []
        elif kind == "tr_open":
            table.append([])
        elif kind in ("th_open", "td_open", "th_close", "td_close"):
            cell = kind.endswith("_open")
        elif kind == "inline" and cell and table:
            table[-1].append(" ".join(token.content.split()))
        elif kind == "table_close":
            rows = [" | ".join(cells) for cells in table if any(cells)]
            if rows:
                blocks.append(Block("table", "\n".join(rows)))
            table = []
        elif kind == "inline":
            text = " ".join(token.content.split())
            if not text:
                continue
            if heading:
                blocks.append(Block("heading", text, level=heading))
            else:
                blocks.append(Block("item" if in_item else "paragraph", text))
        elif kind == "heading_close":
            heading = 0
        elif kind in ("fence", "code_block") and token.content.strip():
            blocks.append(Block("paragraph", token.content.strip()))
    return Document("markdown", None, blocks)
