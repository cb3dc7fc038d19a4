"""Keeping secrets out of messages and printed settings."""

from __future__ import annotations

import re

_URL_SECRET = re.compile(r"^([a-z][a-z0-9+.-]*://[^/@:\s]*):[^/@\s]*@", re.I)


def mask_url(value: str) -> str:
    """``value`` with the password of a ``scheme://user:password@host`` URL replaced by ``***``."""
    return _URL_SECRET.sub(r"\1:***@", value)
