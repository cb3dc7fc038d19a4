"""The bytes of a text file as UTF-8: what the readers of triple files, QA sets, documents and identity
gold files do before they split lines (PrimeKG, read by polars as it streams, only drops the UTF-8 mark).

- A gzip-compressed file is read as the text it holds.
- A file in UTF-16 or UTF-32 with its byte-order mark (what Windows tools write as "Unicode") is re-encoded.
- A UTF-8 byte-order mark at the start belongs to the encoding, not to the first field: :func:`strip_bom`.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from metakg.errors import InputDataError

BOM = b"\xef\xbb\xbf"

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
    mark re-encoded; anything else as it is.

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
