"""Keeping secrets out of messages and printed settings."""

from __future__ import annotations

import re

_URL_SECRET = re.compile(r"^([a-z][a-z0-9+.-]*://[^/@:\s]*):[^/@\s]*@", re.I)


def mask_url(value: str) -> str:
    """``value`` with the password of a ``scheme://user:password@host`` URL replaced by ``***``."""
    return _URL_SECRET.sub(r"\1:***@", value)


#: query parameters whose values are secrets (matched without case): never written to a log
SECRET_PARAMETERS = ("api_key", "apikey", "api-key", "key", "token", "access_token", "password", "secret")
_QUERY_SECRET = re.compile(r"([?&](?:" + "|".join(re.escape(p) for p in SECRET_PARAMETERS) + r")=)[^&#\s]*", re.I)


def mask_query(target: str) -> str:
    """A request target (``/path?query``) with the values of secret-looking parameters replaced by ``***``."""
    return _QUERY_SECRET.sub(r"\1***", target)
