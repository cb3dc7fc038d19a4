"""Shared primitives: choice parsing, questions, concepts (LLM and rules), entity matching, evidence lines."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from metakg.config import QASettings
from metakg.llm.embedder import Embedder
from metakg.llm.scripted import ScriptedClient
from metakg.loaders.embedded_store import EmbeddedStore
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import EvidencePath, Question, QuestionError
from metakg.qa_engine.primitives import (
    answer_prompt,
    concepts_by_rules,
    evidence_lines,
    extract_concepts,
    find_starts,
    grounded,
    match_entities,
    parse_choice,
    parse_concepts,
    parse_free_answer,
)
from metakg.qa_engine.services import LRUCache, QAServices, Similarity
from metakg.schemas.bundle import Bundle
from metakg.schemas.tables import match_key
from metakg.text_processing import PhraseIndex
from tests.conftest import small_bundle
from tests.unit.qa_engine.handmade import QUESTION, AxisEmbedder, store

MC = Question("Where do cars go?", (("A", "exit ramp"), ("B", "garage"), ("C", "kill animals")))


@pytest.mark.parametrize(
    ("reply", "letter"),
    [
        ("Answer: B", "B"),
        ("**Answer: C**", "C"),
        ("the answer is b.", "B"),
        ("(C)", "C"),
        ("B", "B"),
        ("B) garage", "B"),
        ("I pick option C please", "C"),
        ("The best choice is 'B'.", "B"),  # issue 56, item 3: a quoted letter after "choice is"
        ("The best choice is B.", "B"),
        ("The best choice is \u201cC\u201d", "C"),
        ("They would park in the garage.", "B"),  # names exactly one choice text
        ("The answer is a car", None),  # "a" is an article, not a letter
        ("A or B", None),
        ("Answer: Z", None),  # not a choice
        ("", None),
        ("exit ramp or garage", None),  # two choice texts: undecided
    ],
)
def test_parse_choice(reply: str, letter: str | None) -> None:
    assert parse_choice(reply, MC) == letter


def test_parse_free_answer() -> None:
    assert parse_free_answer("Sure.\nAnswer: take ibuprofen") == "take ibuprofen"
    assert parse_free_answer("\n\n rest and fluids \n") == "rest and fluids"


def test_choices_need_letters() -> None:
    assert Question.parse_choices(["A: exit ramp", "b) garage", "(C) road"]) == (
        ("A", "exit ramp"),
        ("B", "garage"),
        ("C", "road"),
    )
    with pytest.raises(QuestionError, match=r"choice 2 \('garage'\) has no letter"):
        Question.parse_choices(["A: exit ramp", "garage"])
    with pytest.raises(QuestionError, match="repeat"):
        Question.parse_choices(["A: x", "A: y"])
    with pytest.raises(QuestionError, match="empty"):
        Question("  ").check()
    with pytest.raises(QuestionError, match="capital letter"):
        Question("q?", (("1", "x"),)).check()


def test_parse_concepts_and_grounding() -> None:
    reply = 'Concepts:\n1. Alpha\n- beta.\n* "kitchen cupboard"\nHere are the concepts\n' + "x " * 10
    assert parse_concepts(reply, 8) == ["Alpha", "beta", "kitchen cupboard"]
    assert parse_concepts("a, b, a", 8) == ["a", "b"]
    assert parse_concepts("a\nb\nc", 2) == ["a", "b"]
    # an echo of the prompt's example shares no word with the question; plural and singular match
    assert grounded(["kitchen cupboard", "alpha", "cars"], "Where do alpha car owners go?") == ["alpha", "cars"]


def context(**qa: object) -> QAContext:
    return QAContext(store=store(), embedder=AxisEmbedder(), settings=QASettings(**qa))  # type: ignore[arg-type]


def test_concepts_by_rules_use_the_graph_names_and_content_phrases() -> None:
    ctx = context()
    found = concepts_by_rules(Question("Is decoy two near the zeta of alpha?"), ctx)
    assert found[:3] == ["decoy two", "zeta", "alpha"]  # longest graph names first found, in text order
    assert len(found) == len({c.lower() for c in found})


def test_extract_concepts_llm_then_rules() -> None:
    ctx = context()
    question = Question(QUESTION)
    client = ScriptedClient({"key concepts": "alpha\nbeta\nkitchen cupboard"})
    concepts, how = asyncio.run(extract_concepts(question, ctx, client))
    assert (concepts, how) == (["alpha", "beta"], "llm")
    silent = ScriptedClient({"key concepts": "plate\nwashing\nkitchen cupboard"})  # only the example echoed
    concepts, how = asyncio.run(extract_concepts(question, ctx, silent))
    assert how == "rules, the LLM giving none" and {"alpha", "beta"} <= set(concepts)
    concepts, how = asyncio.run(extract_concepts(question, context(concepts="rules"), client))
    assert how == "rules" and len(client.calls) == 1  # rules make no call


def test_match_entities_threshold_and_one_match_per_node() -> None:
    ctx = context()
    matches = match_entities(["alpha", "Alpha", "beta", "links alpha"], ctx)
    assert [(m.node.name, m.score, m.how) for m in matches] == [("alpha", 1.0, "exact"), ("beta", 1.0, "exact")]
    assert match_entities(["nothing like it"], ctx) == []  # embedding score 0 < tau_entity


def test_evidence_lines_dedupe_and_limit() -> None:
    one = EvidencePath(("a", "b"), ("e1",), (("a", "r", "b"),))
    two = EvidencePath(("b", "a", "c"), ("e1", "e2"), (("a", "r", "b"), ("a", "s", "c")))
    assert evidence_lines([one, two], 10) == ["Evidence 1: a r b", "Evidence 2: a s c"]
    assert evidence_lines([one, two], 1) == ["Evidence 1: a r b"]
    prompt = answer_prompt(MC, [])
    assert "(no evidence was found)" in prompt and "C: kill animals" in prompt and "Answer: X" in prompt
    assert "evidence" not in answer_prompt(MC, None).lower()


def test_similarity_cache_bound_keeps_answers_whole() -> None:
    graph = store()
    sim = Similarity(AxisEmbedder(), graph, max_entries=2)
    nodes = [n for n in (graph.get_node(f"kg:hand/{x}") for x in ("alpha", "decoy", "zeta")) if n is not None]
    first = sim.nodes_to(nodes[:2], ["alpha", "beta"])
    # the caches overflow on this call: the least recently used entries go, and every row is still there
    got = sim.nodes_to(nodes, ["alpha", "beta", QUESTION])
    assert got.shape == (3, 3) and got[0, 0] == pytest.approx(1.0)
    assert got[:2, :2] == pytest.approx(first)


def test_lru_cache_evicts_the_least_recently_used() -> None:
    cache: LRUCache[str, int] = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recent
    cache.put("c", 3)
    assert "b" not in cache and cache.get("a") == 1 and cache.get("c") == 3 and len(cache) == 2
    with pytest.raises(ValueError):
        LRUCache(0)


def test_a_comma_line_found_in_the_question_stays_one_concept() -> None:
    question = "who's the writer of No God, No Master"
    assert parse_concepts("No God, No Master\nwriter", 8, question) == ["No God, No Master", "writer"]
    assert parse_concepts("The writer of No God, No Master is unknown", 8, question) == [
        "The writer of No God",
        "No Master is unknown",
    ]  # not in the question as written: a list


def test_graph_names_in_the_question_come_before_llm_concepts() -> None:
    ctx = context()
    client = ScriptedClient({"key concepts": "the link of alpha\nbeta"})
    concepts, how = asyncio.run(extract_concepts(Question("Is decoy two linked to alpha?"), ctx, client))
    assert how == "llm" and concepts[:2] == ["decoy two", "alpha"] and "the link of alpha" in concepts


def test_long_names_are_found() -> None:
    name = "Journey to the Center of the Earth and Back Again"  # 10 tokens
    index = PhraseIndex([name, "Earth", "Center"])
    assert index.find("who in the world wrote journey to the center of the earth and back again") == [name]


def test_the_margin_drops_a_concept_close_to_several_entities() -> None:
    # the question's text embeds at 0.9 to decoy and 0.8 to decoy two: a margin of 0.1 over the runner-up
    assert [m.node.name for m in match_entities([QUESTION], context(tau_margin=0.05))] == ["decoy"]
    assert match_entities([QUESTION], context(tau_margin=0.2)) == []
    exact = match_entities(["alpha"], context(tau_margin=0.9))
    assert [m.node.name for m in exact] == ["alpha"]  # a name match needs no margin


def test_start_entities_prefer_the_ones_closest_to_the_question_and_choices() -> None:
    question = Question("alpha or beta?", (("A", "zeta"), ("B", "decoy")))
    matches, trace = asyncio.run(find_starts(question, context(), None))
    assert {m.node.name for m in matches} == {"alpha", "beta"} and trace["concept_method"] == "rules"
    assert [m.node.name for m in matches] == ["beta", "alpha"]  # both exact; beta is closer to zeta and decoy
    assert trace["concepts"][-2:] == ["zeta", "decoy"]


def test_snake_case_names_read_as_words() -> None:
    # LLM-built graphs often name nodes Panic_disorder: the question says "panic disorder"
    assert PhraseIndex(["Panic_disorder"]).find("Could it be a panic disorder?") == ["Panic_disorder"]
    assert match_key("Panic_disorder") == match_key("panic  disorder") == "panic disorder"


def test_chinese_names_are_found_in_running_text() -> None:
    index = PhraseIndex(["九一散", "外用", "药"])  # one-character names are too ambiguous to index
    assert index.find("九一散的正确用法是仅供外用") == ["九一散", "外用"]
    assert index.find("这种药") == []


def test_a_phrase_index_saved_and_loaded_finds_the_same_names(tmp_path: Path) -> None:
    names = ["New York City", "New York", "York", "Panic_disorder", "九一散", "the", "x"]
    built = PhraseIndex(names)
    built.save(tmp_path / "p.json")
    loaded = PhraseIndex.load(tmp_path / "p.json")
    assert loaded is not None and loaded.size == built.size == 5  # "the" (a stop word) and "x" (one character) are not
    text = "From new york city to York with a panic disorder and 九一散"
    assert loaded.find(text) == built.find(text) == ["New York City", "York", "Panic_disorder", "九一散"]
    (tmp_path / "bad.json").write_text('{"format": 0}', encoding="utf-8")
    assert PhraseIndex.load(tmp_path / "bad.json") is None and PhraseIndex.load(tmp_path / "none.json") is None


def test_the_services_keep_a_graphs_phrase_index_on_disk(tmp_path: Path, embedder: Embedder) -> None:
    store = EmbeddedStore.from_bundle(small_bundle(), embedder=embedder)
    first = QAServices(store, embedder, max_entries=10, cache_dir=tmp_path).phrases
    saved = list((tmp_path / "phrases").glob("*.json"))
    assert len(saved) == 1
    saved[0].write_text(
        saved[0].read_text(encoding="utf-8").replace('"fever": "fever"', '"fever": "pyrexia alert"'), "utf-8"
    )
    again = QAServices(store, embedder, max_entries=10, cache_dir=tmp_path).phrases  # read back, not rebuilt
    assert first.find("a fever") == ["fever"] and again.find("a fever") == ["pyrexia alert"]
    other = EmbeddedStore.from_bundle(Bundle(small_bundle().nodes.head(3), small_bundle().edges.head(0)))
    assert QAServices(other, embedder, max_entries=10, cache_dir=tmp_path).phrases.size == len(other.names())
    assert len(list((tmp_path / "phrases").glob("*.json"))) == 2


def test_steps_reach_a_listener_only_while_it_listens() -> None:
    from metakg.qa_engine.events import emit, listening

    heard: list[dict[str, object]] = []
    emit("before")
    with listening(heard.append):
        emit("concepts", concepts=["a"])

        async def inside_a_loop() -> None:
            time.sleep(0.01)
            emit("path", start="a")

        asyncio.run(inside_a_loop())  # the loop a strategy runs in inherits the listener
    emit("after")
    times = [step.pop("elapsed_ms") for step in heard]  # when each was taken, from the start of listening
    assert heard == [{"kind": "concepts", "concepts": ["a"]}, {"kind": "path", "start": "a"}]
    assert 0 <= times[0] < times[1] and times[1] >= 10


def test_services_are_shared_between_contexts_and_their_caches_between_threads() -> None:
    import sys
    import threading

    graph = store()
    first = QAContext(store=graph, embedder=AxisEmbedder())
    second = QAContext(store=graph, embedder=AxisEmbedder(), reuse=first.services)
    assert second.services is first.services and first.services.phrases is second.services.phrases
    cache: LRUCache[int, int] = LRUCache(8)
    failures: list[BaseException] = []

    def hammer(offset: int) -> None:
        try:
            for i in range(5000):
                cache.put(offset + i % 50, i)
                cache.get(offset + (i * 7) % 50)
        except BaseException as e:  # an unlocked OrderedDict raises KeyError under this
            failures.append(e)

    threads = [threading.Thread(target=hammer, args=(n * 10,)) for n in range(8)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, so a race shows (it does without the cache's lock)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert not failures and len(cache) == 8


def test_a_title_fragment_starts_nothing_when_the_whole_title_matched() -> None:
    from metakg.qa_engine.primitives import EntityMatch, without_fragments
    from metakg.schemas.graph_store import NodeRecord

    def match(concept: str, how: str) -> EntityMatch:
        return EntityMatch(concept, NodeRecord(f"kg:t/{concept}", concept, "concept", "t"), 1.0, how)

    found = [match("Shattered Glass", "exact"), match("glass", "exact"), match("glassware", "embedding")]
    assert [m.concept for m in without_fragments(found)] == ["Shattered Glass", "glassware"]
    # a fragment of a title found only by embedding is no reason to drop anything
    assert len(without_fragments([match("Shattered Glass", "embedding"), match("glass", "exact")])) == 2
