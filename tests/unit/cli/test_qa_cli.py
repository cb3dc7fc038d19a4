"""`metakg ask` and `metakg eval` through the CLI, against an OpenAI-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from metakg.schemas.bundle import read_bundle, write_bundle
from tests.conftest import small_bundle
from tests.fault_server import FaultServer
from tests.unit.cli.test_cli import run

QUESTION = "What does aspirin treat?"
SWITCHES = ("no_completeness", "no_relevance", "no_restart", "no_cycle")
CHOICES = ("-c", "A: warfarin", "-c", "B: headache")


@pytest.fixture
def bundle(tmp_path: Path, any_embedder: None) -> Path:
    path = tmp_path / "kg"
    write_bundle(path, small_bundle())
    return path


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultServer]:
    running = FaultServer().start()
    running.reply = "Answer: B"
    for key, value in {"BASE_URL": running.url, "MODEL": "m", "TIMEOUT_S": "2", "BACKOFF_S": "0.01"}.items():
        monkeypatch.setenv(f"METAKG_LLM__{key}", value)
    monkeypatch.setenv("METAKG_QA__CONCEPTS", "rules")
    yield running
    running.stop()


def test_a_start_entity_alone_reads_as_itself_in_the_evidence(bundle: Path) -> None:
    result, _ = run("ask", "What is isolated?", "--bundle", str(bundle), "--no-llm")
    evidence = result.stdout.split("evidence (", 1)[1].splitlines()[1:]
    assert evidence[0].strip().endswith("(a start entity alone: no edge)") and all(line.strip() for line in evidence)


def test_a_strategy_that_needs_an_llm_is_refused_without_one_and_says_so(bundle: Path) -> None:
    _, refused = run("ask", "What is isolated?", "--bundle", str(bundle), "--no-llm", "-s", "medcog", "--json", code=2)
    assert "medcog needs an LLM" in refused["error"] and "kg_rag, metakgrag" in refused["error"]
    listed = {s["name"]: s for s in run("strategies", "--json")[1]["strategies"]}
    assert listed["medcog"]["needs_llm"] and not listed["metakgrag"]["needs_llm"]


def test_ask_retrieval_only_with_an_evidence_page(bundle: Path, tmp_path: Path) -> None:
    page = tmp_path / "answer.html"
    _, payload = run("ask", QUESTION, *CHOICES, "--bundle", str(bundle), "--no-llm", "--html", str(page), "--json")
    assert payload["status"] == "fail" and "retrieval only" in payload["reason"]
    assert payload["usage"]["llm_calls"] == 0
    ids = set(read_bundle(bundle).nodes["id"].to_list())
    edges = set(read_bundle(bundle).edges["id"].to_list())
    assert payload["evidence"]
    for path in payload["evidence"]:
        assert set(path["nodes"]) <= ids and set(path["edges"]) <= edges
    assert payload["trace"]["start_entities"][0]["name"] == "aspirin"
    text = page.read_text()
    literal = text.split("window.METAKG_SNAPSHOT = ", 1)[1].split(";</script>", 1)[0]
    snapshot = json.loads(literal)  # the answer, its steps and the evidence nodes' records, for offline use
    assert snapshot["answer"]["evidence"] == payload["evidence"]
    assert [step["kind"] for step in snapshot["steps"]][:1] == ["concepts"]
    evidence_nodes = {n for path in payload["evidence"] for n in path["nodes"]}
    assert evidence_nodes <= set(snapshot["nodes"]) and evidence_nodes == set(snapshot["neighbours"])
    assert "</script" not in literal and 'src="static/' not in text  # one file: nothing to fetch


def test_ask_with_an_llm(server: FaultServer, bundle: Path) -> None:
    _, payload = run("ask", QUESTION, *CHOICES, "--bundle", str(bundle), "--strategy", "kg_rag", "--json")
    assert (payload["status"], payload["choice"], payload["text"]) == ("ok", "B", "headache")
    assert payload["usage"]["llm_calls"] == 1 and len(server.requests) == 1  # concepts by rules
    prompt = server.requests[0]["messages"][-1]["content"]
    assert "Evidence 1: aspirin" in prompt and ": aspirin treats headache" in prompt
    result, _ = run("ask", QUESTION, *CHOICES, "--bundle", str(bundle))
    assert "answer B: headache" in result.stdout and "evidence" in result.stdout and "cycle 1" in result.stdout


def test_ask_failures_are_clear(server: FaultServer, bundle: Path) -> None:
    result, _ = run("ask", QUESTION, "-c", "A: warfarin", "-c", "headache", "--bundle", str(bundle), code=2)
    assert "choice 2 ('headache') has no letter" in result.stdout + result.stderr
    result, _ = run("ask", QUESTION, code=2)
    assert "give a bundle (--bundle DIR" in result.stdout + result.stderr
    result, _ = run("ask", QUESTION, "--bundle", str(bundle), "--strategy", "magic", code=2)
    assert "unknown strategy" in result.stdout + result.stderr
    _, payload = run("ask", "  ", "--bundle", str(bundle), "--json", code=1)
    assert payload["status"] == "fail" and "empty" in payload["reason"]
    _, payload = run("ask", "Is the moon made of cheese?", "--bundle", str(bundle), "--json", code=1)
    assert "no graph entity matches" in payload["reason"]
    server.reply = "I am not sure."
    _, payload = run("ask", QUESTION, *CHOICES, "--bundle", str(bundle), "--json", code=1)
    assert "names no choice letter" in payload["reason"]


def pilot_file(tmp_path: Path) -> Path:
    path = tmp_path / "questions.json"
    rows = [
        {"question": "What does aspirin treat?\nA: warfarin\nB: headache", "answer": "B\n"},
        {"question": "What does sumatriptan treat?\nA: migraine\nB: flu", "answer": "A\n"},
        {"question": "What is fever a symptom of?\nA: flu\nB: thrombosis", "answer": "A\n"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n{not json\n")
    return path


def test_eval_compares_strategies_and_resumes(server: FaultServer, bundle: Path, tmp_path: Path) -> None:
    questions, out = pilot_file(tmp_path), tmp_path / "report"
    args = ("eval", str(questions), "--format", "pilot", "--bundle", str(bundle), "-o", str(out))
    summary = run(*args, "--strategy", "llm_only,kg_rag,metakgrag", "--ablation", "no_cycle", "--json")[1]["runs"]
    assert set(summary) == {"llm_only", "kg_rag", "metakgrag", "metakgrag[no_cycle]", "ORACLE"}
    oracle = summary.pop("ORACLE")  # every run answers "B", right for the same question
    assert (oracle["correct"], oracle["questions"]) == (1, 3)
    for figures in summary.values():
        assert figures["questions"] == 3 and figures["correct"] == 1  # every reply is "B"
        for key in ("accuracy", "fail", "evidence_recall", "llm_calls", "tokens", "latency_p50_ms"):
            assert key in figures
    assert "prr" in summary["metakgrag"] and "prr" not in summary["kg_rag"]
    paired = summary["metakgrag[no_cycle]"]["versus"]  # the ablation against the full run, question by question
    assert paired["run"] == "metakgrag" and paired["correct"]["questions"] == 3
    assert paired["correct"]["lost"] == paired["correct"]["gained"] == 0  # every reply is "B"
    assert "versus" not in summary["metakgrag"] and "versus" not in summary["kg_rag"]
    assert summary["kg_rag"]["evidence_recall"] == 1.0  # every gold answer is next to the question's entity
    assert summary["llm_only"]["llm_calls"] == 3
    assert (out / "rejects.csv").read_text().count("not json") + (out / "rejects.csv").read_text().count("{") >= 1
    assert {p.name for p in out.iterdir()} >= {"summary.json", "comparison.md", "answers-metakgrag[no_cycle].jsonl"}
    calls = len(server.requests)
    result, _ = run(*args, "--strategy", "llm_only,kg_rag,metakgrag", "--ablation", "no_cycle")
    assert len(server.requests) == calls  # resumed: nothing asked again
    assert "| metakgrag[no_cycle] | 3 |" in result.stdout and "12 answer(s) reused" in result.stdout
    ledger = Path(os.environ["METAKG_PATHS__CACHE_DIR"]) / "llm" / "ledger.jsonl"
    before = len(ledger.read_text().splitlines())
    fresh = run(*args, "--strategy", "metakgrag", "--fresh", "--json")[1]["runs"]
    # answered again, each prompt served from the LLM response cache: every call a hit, nothing billed
    figures = fresh["metakgrag"]
    assert figures["reused"] == 0 and figures["cache_hits"] == figures["llm_calls"] == 3
    assert figures["cost_usd"] == 0 and figures["tokens"] == 0 and figures["saved_tokens"] > 0
    assert len(server.requests) == calls
    # the ledger agrees: the run's three calls, each cached at $0
    entries = [json.loads(line) for line in ledger.read_text().splitlines()[before:]]
    assert len(entries) == 3 and all(e["cached"] and e["cost_usd"] == 0 for e in entries)


def test_eval_prices_by_list_cost_and_reads_a_users_scaling_reference(
    server: FaultServer, bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("METAKG_LLM__PRICES_PER_MTOK", '{"m": [2.5, 10.0]}')
    reference = tmp_path / "mine.csv"
    reference.write_text("method,accuracy,cost_usd\ncheap,0.2,0.00001\ndear,0.5,0.01\n")
    questions, out = pilot_file(tmp_path), tmp_path / "report"
    base = ("eval", str(questions), "--format", "pilot", "--bundle", str(bundle), "--strategy", "llm_only,kg_rag")
    args = (*base, "-o", str(out), "--scaling", str(reference), "--iie-reference", "llm_only")
    first = run(*args, "--json")[1]["runs"]
    kg = first["kg_rag"]
    assert kg["cost_usd"] > 0 and kg["cost_per_question"] == pytest.approx(kg["list_cost_usd"] / 3, abs=1e-6)
    assert kg["iie_reference"] == "llm_only" and kg["scaling_fit"]["reference"] == "mine" and "iie" in kg
    assert kg["scaling_fit"]["r2"] == 1.0 and kg["inference_density"] is not None
    notes = (out / "comparison.md").read_text()
    assert "inference density against mine" in notes and "IIE: accuracy gained per extra USD" in notes
    calls = len(server.requests)
    again = run(*args, "--fresh", "--json")[1]["runs"]  # every reply cached: nothing billed, the method costs the same
    assert len(server.requests) == calls and again["kg_rag"]["cost_usd"] == 0
    assert again["kg_rag"]["cost_per_question"] == kg["cost_per_question"]
    assert again["kg_rag"]["inference_density"] == kg["inference_density"]
    # the user's own earlier runs as the reference: this report's two runs make no rising curve (one
    # accuracy), so it is refused before any question is asked
    result, _ = run(*base, "--scaling", str(out), "-o", str(tmp_path / "r2"), code=1)
    assert "scaling reference report: a scaling curve needs" in result.stderr and len(server.requests) == calls
    summary = json.loads((out / "summary.json").read_text())
    summary["kg_rag"].update(accuracy=0.9, cost_per_question=0.01)  # a dearer run that did better: a curve
    (out / "summary.json").write_text(json.dumps(summary))
    own = run(*base, "--scaling", str(out), "-o", str(tmp_path / "r3"), "--json")[1]["runs"]
    assert own["kg_rag"]["scaling_fit"]["source"] == f"the runs in {out / 'summary.json'}"


def test_eval_retrieval_only(bundle: Path, tmp_path: Path) -> None:
    questions, out = pilot_file(tmp_path), tmp_path / "retrieval"
    args = ("eval", str(questions), "--format", "pilot", "--bundle", str(bundle), "-o", str(out), "--no-llm")
    result, _ = run(*args, "--strategy", "llm_only,medcog,kg_rag,metakgrag", "--ablation", "all")
    assert "left out without an LLM: llm_only, medcog" in result.stderr + result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == {"kg_rag", "metakgrag", *(f"metakgrag[{s}]" for s in SWITCHES)}
    for figures in summary.values():
        assert figures["llm_calls"] == 0 and figures["fail"] == 3  # no answer without an LLM
        assert figures["accuracy"] is None and figures["correct"] is None
        assert figures["evidence_recall"] is not None and figures["retrieval_p50_ms"] is not None
    assert summary["kg_rag"]["evidence_recall"] == 1.0


def test_strategies_lists_names_settings_and_switches() -> None:
    result, payload = run("strategies", "--json")
    by_name = {s["name"]: s for s in payload["strategies"]}
    assert list(by_name) == ["llm_only", "kg_rag", "metakgrag", "medcog", "robodata"]
    assert by_name["metakgrag"]["switches"] == list(SWITCHES)
    n_max = next(f for f in by_name["metakgrag"]["settings"] if f["key"] == "n_max")
    assert n_max["default"] == 3 and n_max["type"] == "int" and "cycles" in n_max["description"]
    result, _ = run("strategies")
    assert "[qa.kg_rag] neighbours = 10" in result.stdout


def test_eval_refuses_bad_options(bundle: Path, tmp_path: Path) -> None:
    questions = pilot_file(tmp_path)
    base = ("eval", str(questions), "--bundle", str(bundle), "-o", str(tmp_path / "r"))
    result, _ = run(*base, "--format", "text", code=2)
    assert "unknown benchmark format" in result.stdout + result.stderr
    result, _ = run(*base, "--format", "pilot", "--limit", "-1", code=2)
    assert "--limit must be at least 1, got -1" in result.stdout + result.stderr
    result, _ = run(*base, "--format", "pilot", "--ablation", "no_magic", code=2)
    assert "unknown switch in 'no_magic'" in result.stdout + result.stderr
    result, _ = run(*base, "--format", "pilot", "--scaling", "gpt5-curve", code=2)
    assert "unknown scaling reference 'gpt5-curve'" in result.stdout + result.stderr
    result, _ = run(*base, "--format", "pilot", "--strategy", "llm_only", "--iie-reference", "cot", code=2)
    assert "the IIE reference run 'cot' is not among the runs (llm_only)" in result.stdout + result.stderr
    result, _ = run(
        *base, "--format", "pilot", "--strategy", "llm_only", "--iie-reference", "medcog[route=scot]", code=2
    )
    assert "'medcog[route=scot]' is not among" in result.stderr  # brackets in a message are not markup
    (tmp_path / "none.jsonl").write_text('{"question": "q?", "options": ["a", "b"], "answer_idx": "A"}\n')
    _, out = run("eval", str(tmp_path / "none.jsonl"), "-f", "medagents", "-b", str(bundle), "--no-llm", "-o",
                 str(tmp_path / "n"), "--json", code=1)  # fmt: skip
    assert "(1 records rejected; the first, none.jsonl:1: options is a list" in out["error"]
    assert f"every one with its reason in {tmp_path / 'n' / 'rejects.csv'}" in out["error"]


def test_eval_against_an_unreachable_llm_fails_and_a_rerun_asks_again(
    server: FaultServer, bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    questions, out = pilot_file(tmp_path), tmp_path / "down"
    args = ("eval", str(questions), "--format", "pilot", "--bundle", str(bundle), "-o", str(out), "-s", "llm_only")
    monkeypatch.setenv("METAKG_LLM__BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
    monkeypatch.setenv("METAKG_LLM__MAX_RETRIES", "0")
    result, _ = run(*args, code=1)
    assert "every answer of llm_only failed" in result.stderr
    monkeypatch.setenv("METAKG_LLM__BASE_URL", server.url)  # the LLM is back
    kept = run(*args, "--keep-failed", "--json", code=1)[1]["runs"]
    assert kept["llm_only"]["reused"] == 3 and len(server.requests) == 0
    _, payload = run(*args, "--keep-failed", "--json", code=1)
    assert payload["ok"] is False and payload["failed_runs"] == ["llm_only"]  # ok is false exactly when exit is 1
    summary = run(*args, "--json")[1]["runs"]
    assert summary["llm_only"]["reused"] == 0 and summary["llm_only"]["fail"] == 0 and len(server.requests) == 3


def test_eval_skip_and_budget(bundle: Path, tmp_path: Path) -> None:
    questions, out = pilot_file(tmp_path), tmp_path / "held-out"
    args = ("eval", str(questions), "--format", "pilot", "--bundle", str(bundle), "-o", str(out), "--no-llm")
    summary = run(*args, "--strategy", "kg_rag", "--skip", "1", "--budget", "1", "--json")[1]["runs"]
    figures = summary["kg_rag"]
    assert figures["questions"] == 2 and figures["budget"] == 1
    assert figures["recall_at_budget"] <= figures["evidence_recall"]
    assert figures["evidence_triples_per_question"] > 0 and figures["evidence_tokens_per_question"] > 0


def test_tune_ranks_every_combination(bundle: Path, tmp_path: Path) -> None:
    questions, out = pilot_file(tmp_path), tmp_path / "tune"
    args = ("tune", str(questions), "--format", "pilot", "--bundle", str(bundle), "-o", str(out))
    _, payload = run(*args, "--grid", "path_hops=1,2", "--grid", "qa.max_starts=1,3", "--json")
    runs = payload["runs"]
    assert len(runs) == 4 and payload["questions"] == 3
    assert {(r["settings"]["metakgrag.path_hops"], r["settings"]["qa.max_starts"]) for r in runs} == {
        (1, 1), (1, 3), (2, 1), (2, 3)
    }  # fmt: skip
    keys = [(-(r["recall_at_budget"] or 0), -(r["evidence_recall"] or 0)) for r in runs]
    assert keys == sorted(keys)  # best first
    assert (out / "tune.md").read_text().count("\n") == 2 + 4 and (out / "run-1" / "summary.json").is_file()
    result, _ = run(*args, "--grid", "path_hops=0", code=2)
    assert "path_hops" in result.stderr + result.stdout
    result, _ = run(*args, "--grid", "path_hops", code=2)
    assert "key=value1,value2" in result.stderr + result.stdout
    _, medcog = run(*args, "-s", "medcog", "--grid", "tau_c=0.1,0.9", "--json", code=2)  # once ranked all zeros
    assert "needs an LLM at every step" in medcog["error"]
    _, strategy = run(*args, "--grid", "qa.strategy=kg_rag,llm_only", "--json", code=2)  # once run as metakgrag
    assert "the strategy tuned is --strategy" in strategy["error"]
    (out / "run-2").rename(out / "run-2.kept")
    (out / "run-2").write_text("mine")  # a file where a run's folder goes: once a traceback mid-way
    _, taken = run(*args, "--grid", "path_hops=1,2", "--json", code=2)
    assert "is a file" in taken["error"] and (out / "run-2").read_text() == "mine"


def test_calibrate_medcog_writes_the_best_thresholds(server: FaultServer, bundle: Path, tmp_path: Path) -> None:
    def reply(body: dict[str, object]) -> str:
        prompt = str(body["messages"][-1]["content"])  # type: ignore[index]
        if "rate the question" in prompt:  # the first question reads as easy, the others as fact-heavy
            easy = "aspirin" in prompt.split("Question:", 1)[1].splitlines()[0].lower()
            return '{"complexity": 0.1, "familiarity": 0.1, "knowledge_density": %s}' % (0.1 if easy else 0.9)
        if "query | hypothesis" in prompt:
            return "aspirin | aspirin treats headache"
        if "Are these paths enough" in prompt:
            return "yes"
        return "Answer: B"

    server.reply_for = reply
    questions, out = pilot_file(tmp_path), tmp_path / "calibration"
    result, payload = run(
        "calibrate", "medcog", str(questions), "--format", "pilot", "--bundle", str(bundle), "-o", str(out),
        "--grid", "0,0.5,1", "--json",
    )  # fmt: skip
    best = payload["best"]
    assert payload["questions"] == 3 and payload["unrated"] == 0 and len(payload["top"]) == 10
    assert sum(best["routes"].values()) == 3 and best["accuracy"] == max(r["accuracy"] for r in payload["top"])
    written = (out / "medcog.toml").read_text()
    assert f"tau_c = {best['tau_c']}" in written and "[qa.medcog]" in written
    assert {p.name for p in out.iterdir()} >= {"calibration.json", "answers-medcog[route=scot_kg].jsonl"}
    result, _ = run("calibrate", "medcog", str(questions), "--format", "pilot", "-o", str(out), "--grid", "2", code=2)
    assert "[0, 1]" in result.stdout + result.stderr


def test_calibrate_with_the_llm_down_says_so(bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAKG_LLM__BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
    monkeypatch.setenv("METAKG_LLM__MAX_RETRIES", "0")
    questions, out = pilot_file(tmp_path), tmp_path / "down"
    args = ("calibrate", "medcog", str(questions), "--format", "pilot", "-b", str(bundle), "-o", str(out), "--json")
    (tmp_path / "taken.toml").mkdir()
    _, late = run(*args, "--settings-out", str(tmp_path / "taken.toml"), code=1)
    assert "is a folder" in late["error"] and not out.exists()  # refused before any question, not after all
    _, refused = run(*args, code=1)  # once: "3 monitoring replies unparseable"
    assert "monitoring answers failed, the first:" in refused["error"] and "127.0.0.1:9" in refused["error"]


def test_casebank_build_grows_a_bank(server: FaultServer, bundle: Path, tmp_path: Path, any_embedder: None) -> None:
    server.reply = "Facts:\naspirin -> treats -> headache\nReasoning: aspirin treats headache.\nAnswer: B"
    questions, bank = pilot_file(tmp_path), tmp_path / "bank"
    args = ("casebank", "build", str(questions), "--format", "pilot", "-b", str(bundle), "-o", str(bank), "--json")
    _, first = run(*args, "--limit", "2")
    assert (first["added"], first["correct"], first["cases"]) == (2, 1, 2)  # gold B, then A
    _, grown = run(*args)
    assert grown["added"] == 3 and grown["cases"] == 3  # the two cases already there are replaced, one is new
    manifest = json.loads((bank / "manifest.json").read_text())
    assert manifest["cases"] == 3 and manifest["correct"] == 1
    result, _ = run(*args, "--route", "zero_shot", code=2)
    assert "scot or scot_kg" in result.stdout + result.stderr
    # the SCoT route reads no graph: no bundle needed; scot_kg still needs one
    _, graphless = run("casebank", "build", str(questions), "--format", "pilot", "-o", str(tmp_path / "b2"), "--json")
    assert graphless["added"] == 3
    result, _ = run("casebank", "build", str(questions), "--format", "pilot", "-o", str(tmp_path / "b3"), "--route",
                    "scot_kg", code=2)  # fmt: skip
    assert "give a bundle" in result.stdout + result.stderr


def test_a_second_grow_round_recalls_the_first(
    server: FaultServer, bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.reply = "Facts:\naspirin -> treats -> headache\nReasoning: as shown.\nAnswer: B"
    questions, bank = pilot_file(tmp_path), tmp_path / "bank"
    monkeypatch.setenv("METAKG_QA__MEDCOG__ROUTE", "scot_mem")
    monkeypatch.setenv("METAKG_QA__MEDCOG__CASEBANK", str(bank))
    base = ("eval", str(questions), "--format", "pilot", "--bundle", str(bundle), "--strategy", "medcog")
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    _, refused = run(*base, "-o", str(tmp_path / "round0"), "--grow", str(notes), "--json", code=2)
    assert "is a file" in refused["error"] and notes.read_text() == "mine"  # once replaced by the bank folder
    assert not (tmp_path / "round0").exists() and not server.requests  # refused before any question
    first, _ = run(*base, "-o", str(tmp_path / "round1"), "--grow", str(bank), "--json")
    assert "3 cases added" in first.stderr and (bank / "manifest.json").is_file()
    rows = [json.loads(x) for x in (tmp_path / "round1" / "answers-medcog.jsonl").read_text().splitlines()]
    assert all("not built yet" in r["trace"]["memory"] for r in rows)  # round 1: the bank did not exist yet
    run(*base, "-o", str(tmp_path / "round2"), "--grow", str(bank), "--json")
    rows = [json.loads(x) for x in (tmp_path / "round2" / "answers-medcog.jsonl").read_text().splitlines()]
    by_id = {r["question_id"]: r for r in rows}
    for question_id, row in by_id.items():  # round 2 recalls round 1's cases, its own question first
        assert row["trace"]["cases"][0]["id"] == question_id and len(row["trace"]["cases"]) == 3
