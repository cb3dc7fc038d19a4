"""Keeping secrets out of messages and printed settings."""

from __future__ import annotations

import base64
import re
import urllib.parse

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


def split_credentials(url: str) -> tuple[str, str | None]:
    """``url`` without a ``user:password@`` part, and that part as an HTTP basic ``Authorization`` value
    (None when the URL has none). Percent-escapes in the user and password are decoded (``%40`` is ``@``)."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode()
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), "Basic " + base64.b64encode(pair).decode("ascii")
