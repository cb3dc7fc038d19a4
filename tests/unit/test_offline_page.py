"""``metakg ask --html``'s page: one file, whatever the answer holds."""

from __future__ import annotations

import json
import re

from metakg.server.page import offline_page


def test_a_snapshot_cannot_end_its_script_and_reads_back_whole() -> None:
    hostile = {"name": "</script><script>alert(1)</script> <!-- & \u2028 \u2029 \\u003c", "n": [1, 2.5, None]}
    page = offline_page({"nodes": {"x": hostile}})
    literal = page.split("window.METAKG_SNAPSHOT = ", 1)[1].split(";</script>", 1)[0]
    assert json.loads(literal) == {"nodes": {"x": hostile}}
    assert "alert(1)</script>" not in page and "<!-- &" not in page
    assert page.count("<script>") == 3 and not re.search(r'<script src=|<link (?!rel="icon" href="data:,">)', page)
    assert "MIT" in page  # the drawing library's licence travels with it
