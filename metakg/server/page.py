"""The web page of ``metakg serve`` as one self-contained file (``metakg ask --html``): the same HTML, style
and script with the drawing library inlined, and one answer's snapshot (:func:`metakg.api.answer_snapshot`)
in place of the API, so it opens from disk with no server and no network."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from metakg.errors import ConfigError

STATIC = Path(__file__).with_name("static")
VENDOR = STATIC / "vendor"


def _script(text: str) -> str:
    """Text safe inside a ``<script>`` element: no ``</script`` or ``<!--`` can end or bend it."""
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


def _snapshot_json(snapshot: dict[str, Any]) -> str:
    """The snapshot as a JavaScript literal: JSON with ``<``, ``>``, ``&`` and the line separators escaped."""
    data = json.dumps(snapshot, ensure_ascii=False, default=str)
    for char in "<>&\u2028\u2029":
        data = data.replace(char, f"\\u{ord(char):04x}")
    return data


def offline_page(snapshot: dict[str, Any]) -> str:
    """The page with ``snapshot`` in it: one HTML file, nothing loaded from elsewhere.

    Raises:
        ConfigError: the drawing library was not vendored (``make install`` runs tools/vendor_js.sh).
    """
    library = VENDOR / "cytoscape.min.js"
    if not library.is_file():
        raise ConfigError(
            f"{library} is missing: the page's drawing library is fetched when metakg is installed "
            "(make install, or bash tools/vendor_js.sh metakg/server/static/vendor)."
        )
    licence = VENDOR / "cytoscape.LICENSE"
    notice = licence.read_text(encoding="utf-8").replace("--", "- -") if licence.is_file() else ""
    page = (STATIC / "index.html").read_text(encoding="utf-8")
    style = (STATIC / "page.css").read_text(encoding="utf-8")
    scripts = (
        f"<!-- cytoscape.js, MIT licence:\n{notice}-->\n"
        f"<script>{_script(library.read_text(encoding='utf-8'))}</script>\n"
        f"<script>window.METAKG_SNAPSHOT = {_snapshot_json(snapshot)};</script>\n"
        f"<script>{_script((STATIC / 'page.js').read_text(encoding='utf-8'))}</script>"
    )
    page = page.replace('<link rel="stylesheet" href="static/page.css">', f"<style>{style}</style>")
    page, count = re.subn(
        r'<script src="static/vendor/cytoscape.min.js"></script>\s*<script src="static/page.js"></script>',
        lambda _match: scripts,
        page,
    )
    if count != 1:
        raise ConfigError("the page template has changed: its two script tags were not found")
    return page
