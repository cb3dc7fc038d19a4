"""What a document reader returns: the document as blocks in reading order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

BlockKind = Literal["heading", "paragraph", "item", "table"]


class DocumentError(ValueError):
    """A document cannot be read; the message is the reason stored with the rejected file."""


@dataclass(frozen=True)
class Block:
    """One structural piece of a document: a ``heading`` (with its ``level``, 1 the highest), a ``paragraph``,
    a list ``item`` or a ``table`` (its rows as text, cells joined by `` | ``), on ``page`` (1-based; None
    where the format has no pages)."""

    kind: BlockKind
    text: str
    page: int | None = None
    level: int = 0


@dataclass
class Document:
    """A read document: its ``format``, its number of ``pages`` (None where the format has none) and its
    ``blocks`` in reading order."""

    format: str
    pages: int | None
    blocks: list[Block] = field(default_factory=list)
