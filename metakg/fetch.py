"""One way to download a file: to a ``.part`` name first, renamed when complete, nothing left on failure."""

from __future__ import annotations

import contextlib
import shutil
import urllib.error
import urllib.request
from pathlib import Path

from metakg import __version__
from metakg.errors import MetakgError
from metakg.redact import mask_url

USER_AGENT = f"metakg/{__version__} (python urllib)"


def download(url: str, target: Path, *, error: type[MetakgError], hint: str, timeout: float = 60.0) -> Path:
    """Fetch ``url`` into ``target`` (parent folders created).

    Args:
        url: what to fetch.
        target: where the complete file ends up.
        error: the exception raised on failure (the caller's failure domain).
        hint: appended to the failure message: what the user can do instead.
        timeout: seconds without an answer before giving up.

    Returns:
        ``target``.

    Raises:
        error: the download failed; no partial file is left behind.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".part")
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response, tmp.open("wb") as fh:
            shutil.copyfileobj(response, fh)
    except (urllib.error.URLError, OSError, TimeoutError) as e:
        with contextlib.suppress(OSError):  # a folder it could not write holds no part to remove
            tmp.unlink(missing_ok=True)
        raise error(f"the download of {mask_url(url)} failed ({e}). {hint}") from e
    tmp.replace(target)
    return target
