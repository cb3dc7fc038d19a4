"""Text hygiene every reader applies: a byte-order mark is dropped, invisible format characters are
removed, control characters are refused.

- A UTF-8 byte-order mark at the start of a file belongs to the encoding, not to the first field; a file in
  UTF-16 or UTF-32 with its mark, or gzip-compressed, is read as the text it holds (:func:`as_utf8`).
- Zero-width characters and bidirectional controls (U+200B, U+2060, U+FEFF, U+200E/F, U+202A-E,
  U+2066-9, U+061C) change no letter a reader sees but make two equal-looking names different: removed.
  Zero-width joiners (U+200C/D) are kept, as some scripts spell words with them.
- Control characters other than tab, newline and carriage return (NUL, BEL, ...) are refused with a
  reason by the reader that meets them.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import polars as pl

from metakg.errors import InputDataError

BOM = b"\xef\xbb\xbf"
INVISIBLE = "[\u200b\u2060\ufeff\u200e\u200f\u202a-\u202e\u2066-\u2069\u061c]"
CONTROL = "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"


#: byte-order marks of the encodings a file may be read in besides UTF-8 (UTF-32 first: its LE mark begins
#: with UTF-16's)
WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)


def as_utf8(data: bytes, path: Path) -> bytes:
    """A file's bytes as UTF-8 text: gzip-compressed data decompressed, UTF-16 or UTF-32 with a byte-order
    mark (what Windows tools write as "Unicode") re-encoded; anything else as it is.

    Raises:
        InputDataError: the data looks compressed or wide but cannot be read so, naming ``path``.
    """
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:  # a truncated stream ends in EOFError
            raise InputDataError(f"{path} looks gzip-compressed but cannot be decompressed: {e}.") from e
    for mark, encoding in WIDE_BOMS:
        if data.startswith(mark):
            try:
                return data.decode(encoding).encode("utf-8", errors="surrogateescape")
            except UnicodeError as e:
                raise InputDataError(f"{path} starts as {encoding.upper()} text but is not: {e}.") from e
    return data


def strip_bom(data: bytes) -> bytes:
    """``data`` without a leading UTF-8 byte-order mark."""
    return data[len(BOM) :] if data.startswith(BOM) else data


def without_invisible(expr: pl.Expr) -> pl.Expr:
    """``expr`` (text) with the invisible format characters removed."""
    return expr.str.replace_all(INVISIBLE, "")


def has_control(expr: pl.Expr) -> pl.Expr:
    """True where ``expr`` (text) holds a control character other than tab, newline or carriage return."""
    return expr.str.contains(CONTROL)
