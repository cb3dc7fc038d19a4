"""Text hygiene every reader applies once the file is UTF-8 text (:mod:`metakg.textfiles`): invisible
format characters are removed, control characters are refused.

- Zero-width characters and bidirectional controls (U+200B, U+2060, U+FEFF, U+200E/F, U+202A-E,
  U+2066-9, U+061C) change no letter a reader sees but make two equal-looking names different: removed.
  Zero-width joiners (U+200C/D) are kept, as some scripts spell words with them.
- Control characters other than tab, newline and carriage return (NUL, BEL, ...) are refused with a
  reason by the reader that meets them.
"""

from __future__ import annotations

import polars as pl

INVISIBLE = "[\u200b\u2060\ufeff\u200e\u200f\u202a-\u202e\u2066-\u2069\u061c]"
CONTROL = "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"


def without_invisible(expr: pl.Expr) -> pl.Expr:
    """``expr`` (text) with the invisible format characters removed."""
    return expr.str.replace_all(INVISIBLE, "")


def has_control(expr: pl.Expr) -> pl.Expr:
    """True where ``expr`` (text) holds a control character other than tab, newline or carriage return."""
    return expr.str.contains(CONTROL)
