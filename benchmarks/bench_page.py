"""The page of ``metakg serve`` opening a node with 2,000 neighbours, in Debian's headless Chromium.

The graph is the small hand-made one plus a node ``hub`` with 2,000 neighbours (``tests.conftest.hub_bundle``),
served by the real ``metakg serve`` on a free port. Each repeat opens a fresh page, finds ``hub``, expands it
(the first 200) and then asks for all of them, as a person would; the figure is the page's own measure of the
second expansion (placing 1,801 new nodes on rings around the hub, adding 2,001 edges, the first frame drawn
with them), and the time to fetch them. Side by side in the same run: what the page did before, a global
force-directed (``cose``) layout of the same 2,002 nodes, which the field saw freeze a page for 30 s. For
each, the pairs of nodes whose boxes (labels included) overlap.

Run: ``make bench`` or ``python -m benchmarks.bench_page [--leaves 2000 --repeats 3]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import record, serving

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.conftest import hub_bundle  # noqa: E402
from tests.integration.test_web_page import OVERLAPS  # noqa: E402


def expand_hub(page: Any, url: str, leaves: int) -> dict[str, Any]:
    page.goto(url + "/")
    page.wait_for_function("document.getElementById('graph-info').textContent.includes('nodes')")
    page.fill("#search-text", "hub")
    page.click("#search-form button")
    page.locator("#search-results li", has_text="hub").first.click()
    page.wait_for_selector("#expand-button")
    page.click("#expand-button")
    page.wait_for_selector("#more-button")
    page.click("#more-button")
    page.wait_for_function(f"window.metakgLastExpansion && window.metakgLastExpansion.neighbours === {leaves + 1}")
    figures: dict[str, Any] = page.evaluate("window.metakgLastExpansion")
    drawn = page.evaluate("window.metakgGraph.nodes().map((n) => n.id())")
    figures["overlapping_pairs"] = len(page.evaluate(OVERLAPS, drawn))
    return figures


def global_cose(page: Any) -> dict[str, Any]:
    """The earlier page's answer to an expansion: every drawn node laid out again by cose."""
    ms = page.evaluate("""() => { const t = performance.now();
        window.metakgGraph.layout({ name: "cose", animate: false, nodeRepulsion: 9000, idealEdgeLength: 90,
                                    fit: true, padding: 30 }).run();
        return performance.now() - t; }""")
    overlaps = len(page.evaluate(OVERLAPS, page.evaluate("window.metakgGraph.nodes().map((n) => n.id())")))
    return {"ms": round(ms, 1), "overlapping_pairs": overlaps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--leaves", type=int, default=2000, help="Neighbours of the hub node.")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from metakg import api
    from metakg.config import load_settings

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        sys.exit("bench_page needs Debian's chromium: bash tools/ensure_system_packages.sh")
    work = Path(tempfile.mkdtemp(prefix="metakg-bench-page-"))
    bundle = work / "hub"
    api.write_validated(bundle, hub_bundle(args.leaves), load_settings())
    try:
        with serving(bundle) as (url, _server), sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"], headless=True)
            try:
                runs = []
                for _ in range(args.repeats):
                    page = browser.new_page(viewport={"width": 1280, "height": 800})
                    runs.append(expand_hub(page, url, args.leaves))
                    page.close()
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                expand_hub(page, url, args.leaves)
                before = global_cose(page)
                page.close()
            finally:
                browser.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ms = statistics.median(run["ms"] for run in runs)
    fetch = statistics.median(run["fetch_ms"] for run in runs)
    print(
        f"expanding a node with {args.leaves:,} neighbours in Chromium: placed and drawn in {ms:.0f} ms "
        f"(median of {args.repeats}; fetch {fetch:.0f} ms), overlapping pairs {runs[0]['overlapping_pairs']}; "
        f"a global cose layout of the same nodes (the page before): {before['ms']:.0f} ms, overlapping pairs "
        f"{before['overlapping_pairs']}; ratio {before['ms'] / ms:.1f}x"
    )
    record(
        "page",
        {
            "leaves": args.leaves,
            "expansion_ms_median": round(ms, 1),
            "fetch_ms_median": round(fetch, 1),
            "runs": runs,
            "global_cose": before,
            "cose_over_rings": round(before["ms"] / ms, 1),
        },
        synthetic_data=True,
    )


if __name__ == "__main__":
    main()
