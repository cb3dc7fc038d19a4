"""The web page of ``metakg serve`` in a real headless Chromium (Debian's, driven by Playwright): ask a
question, see the answer and the evidence graph drawn, click a node, expand it. Screenshots go to
``test-artifacts/`` (ignored by git)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from metakg import api
from metakg.config import load_settings
from tests.conftest import small_bundle
from tests.integration.test_server import METAKG, Served, start, stop

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
    steps = page.locator("#trace .step")  # the streamed trace, a line per step as it was taken
    assert steps.count() >= 2 and page.locator("#trace .step-concepts").count() == 1
    assert page.locator("#trace .step-path").count() >= 1 and "Path from" in page.inner_text("#trace")
    page.click("#trace .step-path summary")
    assert page.locator("#trace .step-path pre").first.is_visible()  # a step's details fold out
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
    report.value.wait_for_function("document.body && document.body.innerText.includes('Validation')")
    report.value.close()  # the bundle's validation report, served beside the page
    # MedCoG's and RoboData's steps get their own timeline lines (their strategies need an LLM to run)
    page.evaluate("""() => {
        addStep({kind: "route", route: "scot_kg", routed_by: "scores", complexity: 0.2, familiarity: 0.3,
                 knowledge_density: 0.9});
        addStep({kind: "verification", round: 1, pairs: [["a", "b"]], paths: ["a -[x]-> b"], evaluation: "yes"});
        addStep({kind: "state", turn: 2, state: "remote_exploration", next_state: "remote_evaluation",
                 tool_calls: [{tool: "entity_info"}]});
    }""")
    timeline = page.inner_text("#trace")
    assert (
        "Route scot_kg (scores: complexity 0.2" in timeline
        and "Verification round 1: 1 check(s), 1 path(s)" in timeline
    )
    assert "Turn 2: remote_exploration → remote_evaluation, 1 tool call(s)" in timeline
    page.fill("#search-text", "pyrexia")
    page.click("#search-form button")
    page.wait_for_selector("#search-results li")
    assert "fever" in page.inner_text("#search-results")
    assert not errors, errors
    page.close()


def click_node(page: Page, index: int) -> None:
    box = page.locator("#graph").bounding_box()
    assert box is not None
    position = page.evaluate(
        f"(() => {{ const p = window.metakgGraph.nodes()[{index}].renderedPosition(); return [p.x, p.y]; }})()"
    )
    page.mouse.click(box["x"] + position[0], box["y"] + position[1])


def test_ask_html_writes_the_same_page_as_one_file_that_works_offline(chromium: Browser, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    bundle = tmp_path / "kg"
    api.write_validated(bundle, small_bundle(), load_settings())
    written = tmp_path / "answer.html"
    done = subprocess.run(
        [str(METAKG), "ask", "What does aspirin treat?", "-c", "A: headache", "-c", "B: warfarin",
         "--bundle", str(bundle), "--no-llm", "--html", str(written)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = written.read_text(encoding="utf-8")
    assert "static/" not in text and "http://" not in text.split("cytoscape.js, MIT licence")[0]
    page = chromium.new_page(viewport={"width": 1280, "height": 800})
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(written.as_uri())
    page.wait_for_selector("#evidence li")
    assert "aspirin" in page.inner_text("#evidence") and "written by metakg ask --html" in page.inner_text("header")
    assert page.locator("#trace .step-concepts").count() == 1 and page.locator("#trace .step-path").count() >= 1
    assert page.is_disabled("#ask-button")
    drawn = page.evaluate("window.metakgGraph.nodes().length")
    assert drawn >= 2 and page.evaluate("window.metakgGraph.edges('.evidence').length") >= 1
    aspirin = page.evaluate("window.metakgGraph.nodes().map((n) => n.data('label')).indexOf('aspirin')")
    click_node(page, aspirin)
    page.wait_for_selector("#expand-button")
    assert '"name": "aspirin"' in page.inner_text("#record pre")
    page.click("#expand-button")
    page.wait_for_function(f"window.metakgGraph.nodes().length > {drawn}")  # neighbours from the file itself
    page.fill("#search-text", "aspir")
    page.click("#search-form button")
    page.wait_for_selector("#search-results li")
    assert "aspirin" in page.inner_text("#search-results")
    page.screenshot(path=str(ARTIFACTS / "offline-answer.png"))
    assert all(url.startswith(("file:", "data:")) for url in requests), requests  # nothing from a network
    assert not errors, errors
    page.close()


def test_the_page_asks_for_the_api_key_and_sends_it(chromium: Browser, tmp_path: Path) -> None:
    bundle = tmp_path / "kg"
    api.write_validated(bundle, small_bundle(), load_settings())
    server = start(["--bundle", str(bundle)], tmp_path / "keyed.log", env={"METAKG_SERVER__API_KEY": "page-key-42"})
    try:
        assert server.get("/api/graph").status_code == 401
        page = chromium.new_page()
        asked: list[str] = []

        def answer(dialog: Any) -> None:
            asked.append(dialog.message)
            dialog.accept("page-key-42")

        page.on("dialog", answer)
        page.goto(server.url + "/")
        page.wait_for_function("document.getElementById('graph-info').textContent.includes('nodes')")
        assert asked == ["This metakg server needs its API key:"]  # asked once, then kept for the tab
        page.fill("#search-text", "pyrexia")
        page.click("#search-form button")
        page.wait_for_selector("#search-results li")
        assert "fever" in page.inner_text("#search-results") and len(asked) == 1
        page.close()
    finally:
        stop(server)


@pytest.mark.parametrize(
    ("path", "drawn"),
    [
        ("/docs", "document.querySelectorAll('.opblock').length"),  # Swagger UI: a block per operation
        ("/redoc", "document.querySelectorAll('[data-section-id^=\"operation/\"]').length"),  # ReDoc: one per operation
    ],
)
def test_the_api_reference_pages_draw_offline(chromium: Browser, served: Served, path: str, drawn: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page = chromium.new_page(viewport={"width": 1280, "height": 800})
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.route(  # the machine is offline for the page: anything not from the server fails
        "**/*", lambda route: route.continue_() if route.request.url.startswith(served.url) else route.abort()
    )
    page.goto(served.url + path)
    page.wait_for_function(f"{drawn} >= 10", timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / f"api-reference{path.replace('/', '-')}.png"))
    assert page.get_by_text("/api/ask").count() >= 1
    assert [url for url in asked if not url.startswith(served.url)] == []  # nothing fetched from elsewhere
    page.close()
