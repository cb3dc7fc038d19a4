"""The web page of ``metakg serve`` in a real headless Chromium (Debian's, driven by Playwright): ask a
question, see the answer and the evidence graph drawn, click a node, expand it. Screenshots go to
``test-artifacts/`` (ignored by git)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

from metakg import api
from metakg.config import load_settings
from tests.conftest import small_bundle
from tests.integration.test_server import Served, start, stop

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.fail("Debian's chromium is needed for the browser tests: bash tools/ensure_system_packages.sh")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"], headless=True)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    bundle = tmp_path_factory.mktemp("web") / "kg"
    api.write_validated(bundle, small_bundle(), load_settings())
    server = start(["--bundle", str(bundle)], tmp_path_factory.mktemp("log") / "serve.log")
    yield server
    stop(server)


def test_ask_draws_the_evidence_and_a_clicked_node_expands(chromium: Browser, served: Served) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page = chromium.new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(served.url + "/")
    page.wait_for_function("document.getElementById('graph-info').textContent.includes('nodes')")
    page.fill("#question", "What does aspirin treat?")
    page.fill("#choices", "A: headache\nB: warfarin")
    page.uncheck("#use-llm")  # retrieval only: no LLM in this test
    page.click("#ask-button")
    page.wait_for_selector("#evidence li")
    drawn = page.evaluate("window.metakgGraph.nodes().length")
    assert drawn >= 2 and page.evaluate("window.metakgGraph.edges('.evidence').length") >= 1
    assert "aspirin" in page.inner_text("#evidence")
    page.screenshot(path=str(ARTIFACTS / "web-answer.png"))
    # click the first node where it is drawn, as a user would
    box = page.locator("#graph").bounding_box()
    assert box is not None
    position = page.evaluate(
        "(() => { const p = window.metakgGraph.nodes()[0].renderedPosition(); return [p.x, p.y]; })()"
    )
    page.mouse.click(box["x"] + position[0], box["y"] + position[1])
    page.wait_for_selector("#expand-button")
    page.click("#expand-button")
    page.wait_for_function(f"window.metakgGraph.nodes().length > {drawn}")
    page.screenshot(path=str(ARTIFACTS / "web-expanded.png"))
    with page.expect_popup() as report:
        page.click("#report-link")
    assert "Validation" in report.value.content()  # the bundle's validation report, served beside the page
    page.fill("#search-text", "pyrexia")
    page.click("#search-form button")
    page.wait_for_selector("#search-results li")
    assert "fever" in page.inner_text("#search-results")
    assert not errors, errors
    page.close()
