"""Keeping secrets out of messages and printed settings."""

from __future__ import annotations

import base64
import re
import urllib.parse
from collections.abc import Sequence

# scheme, any slashes, then the user; the password runs to the last "@" before the path (an unencoded "@" or a
# blank in it must not leave its tail shown)
_URL_SECRET = re.compile(r"^(\s*[a-z][a-z0-9+.-]*:/*[^/@:]*):[^/]*@", re.I)
# a user part alone is often a token (https://TOKEN@host): masked whole
_URL_TOKEN = re.compile(r"^(\s*[a-z][a-z0-9+.-]*:/*)[^/@:]+@", re.I)


def mask_url(value: str) -> str:
    """``value`` with the secrets of a URL replaced by ``***``: the password of ``scheme://user:password@host``
    (any scheme and case; an unencoded ``@`` or blank in it masked too), a user part alone
    (``https://TOKEN@host``), and the values of secret-looking query parameters (``?key=...``)."""
    masked = _URL_SECRET.sub(r"\1:***@", value)
    if masked == value:
        masked = _URL_TOKEN.sub(r"\1***@", value)
    return mask_query(masked) if "?" in masked else masked


#: query parameter names whose values are secrets (compared without case, "-" read as "_", percent-escapes
#: decoded); a name ending in one of them (``x_api_key``) counts too
SECRET_PARAMETERS = (
    "api_key", "apikey", "key", "token", "access_token", "password", "passwd", "secret", "auth", "authorization",
    "credential", "credentials", "session", "sig", "signature",
)  # fmt: skip
_PAIR = re.compile(r"([?&;])([^=&;#\s]*)=([^&;#\s]*)")


def _secret_name(name: str) -> bool:
    plain = urllib.parse.unquote_plus(name).strip().lower().replace("-", "_")
    plain = re.sub(r"\[[^\]]*\]$", "", plain)  # an array form: api_key[] or api_key[0]
    return any(plain == secret or plain.endswith(f"_{secret}") for secret in SECRET_PARAMETERS)


def secret_pattern(secret: str) -> re.Pattern[str]:
    """A pattern that finds ``secret`` in a URL however it was written: each character as itself or
    percent-encoded (every byte of it), in either case of hex digit, once or twice encoded (``%2B``, ``%2b``,
    ``%252B``), a blank also as ``+``, and every mix of these (a key with ``+`` or ``/`` in it is re-quoted
    differently by each client and server)."""

    def escaped(byte: int) -> str:
        return "%(?:25)?" + "".join(f"[{h}{h.lower()}]" if h.isalpha() else h for h in f"{byte:02X}")

    parts = []
    for ch in secret:
        forms = [re.escape(ch), "".join(escaped(b) for b in ch.encode("utf-8"))] + ([r"\+"] if ch == " " else [])
        parts.append("(?:" + "|".join(forms) + ")")
    return re.compile("".join(parts))


def mask_query(target: str) -> str:
    """A request target (``/path?query``) with the values of secret-looking parameters replaced by ``***``
    (``api_key``, ``X-API-Key``, ``api%5Fkey``, ``token``, ...; pairs split by ``&`` or ``;``)."""
    return _PAIR.sub(lambda m: f"{m[1]}{m[2]}=***" if _secret_name(m[2]) else m[0], target)


def check_url(value: str, setting: str, schemes: tuple[str, ...] = ("http", "https")) -> str:
    """``value`` when it is a URL of one of ``schemes`` with a host and, if any, a numeric port.

    Raises:
        ValueError: naming ``setting``, never showing a password the URL holds (a ``/`` or ``@`` in a password
            must be percent-encoded, else the URL is not one).
    """
    shown = mask_url(value)
    if any((ord(ch) < 32 and not ch.isspace()) or ord(ch) == 127 for ch in value):
        raise ValueError(f"{setting} holds a control character; a URL has none")
    if value != value.strip() or any(ch.isspace() for ch in value):
        raise ValueError(f"{setting} holds blanks; a URL has none (a password with a blank must be percent-encoded)")
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018 - raises for a port that is not a number (a password with a "/" in it)
    except ValueError:
        raise ValueError(  # not shown at all: where its password ends cannot be told
            f"{setting} is not a valid URL (its port is not a number); a password with / or @ in it must be "
            "percent-encoded (%2F, %40)"
        ) from None
    if parts.scheme.lower() not in schemes or not parts.hostname:
        wanted = " or ".join(f"{scheme}://" for scheme in schemes)
        raise ValueError(f"{setting} {shown!r} must start with {wanted} and name a host")
    return value


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


def credentials_in(authorization: str | None, *keys: str | None) -> list[str]:
    """The secrets a client sends, as they may come back in an endpoint's error text: API keys, and an HTTP
    ``Authorization`` value (``Basic <base64>``) with the token, the ``user:password`` pair and the password it
    encodes. Blank or one-character values are left out (they would mask every occurrence of a letter)."""
    found = [k for k in keys if k and len(k.strip()) > 1]
    if authorization:
        token = authorization.split(" ", 1)[-1].strip()
        found.append(token)
        try:
            pair = base64.b64decode(token, validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            pair = ""
        _user, _, password = pair.partition(":")
        found += [p for p in (pair, password) if len(p) > 1]
    return found


def scrub(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every one of ``secrets`` (longest first) written as ``***``: an endpoint's error reply may
    echo the request's ``Authorization`` header or key, which must not reach a message, a log or an answer."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text
