"""Regression tests of the trace patterns held-out MetaQA-style questions showed (real KB rows, real MiniLM,
retrieval only): relation words were never covered, +0.01 corrections replaced right paths, generic words
started paths at film titles, and one greedy path per start kept one neighbour."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from metakg import api
from metakg.config import QASettings, load_settings
from metakg.llm.embedder import OnnxEmbedder
from metakg.loaders.embedded_store import EmbeddedStore
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import Answer
from metakg.qa_engine.metrics import entity_order
from metakg.qa_engine.strategies import REGISTRY
from metakg.qa_engine.strategies.metakgrag.strategy import MetaKGRAGSettings
from metakg.schemas.bundle import read_bundle

# rows of the MetaQA KB subset (kb_subset_8107.txt), as they are there
ROWS = """Priest|written_by|Jimmy McGovern
Priest|directed_by|Antonia Bird
Priest|starred_actors|Linus Roache
Priest|has_tags|catholic
Priest|release_year|1994
Letters to Father Jacob|has_tags|priest
Letters to Father Jacob|directed_by|Klaus Härö
Movie Movie|has_genre|Musical
Movie Movie|directed_by|Stanley Donen
The Rocky Horror Picture Show|written_by|Richard O'Brien
The Rocky Horror Picture Show|directed_by|Jim Sharman
The Rocky Horror Picture Show|has_genre|Comedy
The Rocky Horror Picture Show|starred_actors|Tim Curry
The Rocky Horror Picture Show|starred_actors|Susan Sarandon
Shock Treatment|written_by|Richard O'Brien
Shock Treatment|directed_by|Jim Sharman
Shock Treatment|has_genre|Musical
Bewitched|has_genre|Comedy
Bewitched|directed_by|Nora Ephron
Tangled Ever After|written_by|Byron Howard
Tangled Ever After|directed_by|Nathan Greno
Tangled Ever After|starred_actors|Mandy Moore
Shattered Glass|directed_by|Billy Ray
Glass|directed_by|M. Night Shyamalan
The Sweetest Thing|directed_by|Roger Kumble
Just Friends|directed_by|Roger Kumble
Just Friends|starred_actors|Ryan Reynolds
Saw|directed_by|James Wan
Saw|release_year|2004
Shock Treatment|release_year|1981
Priest|has_tags|cast
"""


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory, minilm: OnnxEmbedder) -> EmbeddedStore:
    return store_of(ROWS, tmp_path_factory.mktemp("kb"), minilm)


def store_of(rows: str, folder: Path, embedder: OnnxEmbedder) -> EmbeddedStore:
    """An embedded store over KB ``rows`` (``head|relation|tail``), ingested as metakg ingests MetaQA."""
    (folder / "kb.txt").write_text(rows, encoding="utf-8")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("METAKG_PATHS__CACHE_DIR", str(folder / "cache"))
        api.ingest_triples(folder / "kb.txt", "metaqa", folder / "bundle", load_settings(), separator="|")
    return EmbeddedStore.from_bundle(read_bundle(folder / "bundle"), embedder=embedder)


def ask(store: EmbeddedStore, embedder: OnnxEmbedder, text: str, **metakgrag: object) -> Answer:
    settings = QASettings.model_validate({"concepts": "rules", "metakgrag": metakgrag})
    ctx = QAContext(store=store, embedder=embedder, settings=settings)
    question = api.make_question(text)
    return asyncio.run(REGISTRY.create("metakgrag", settings).answer(question, ctx))  # no LLM: retrieval only


def one_path(answer: Answer) -> dict[str, Any]:
    """The trace of the answer's one start (the questions below have one)."""
    (path,) = answer.trace["paths"]
    return path


def names(answer: Answer) -> list[str]:
    return entity_order(answer.evidence)


def test_a_relation_word_is_covered_by_the_paths_relation(kb: EmbeddedStore, minilm: OnnxEmbedder) -> None:
    answer = ask(kb, minilm, "who directed the films written by [Jimmy McGovern]")
    assert "antonia bird" in names(answer)
    path = one_path(answer)
    first = path["cycles"][0]
    assert first["covered_by"]["directed"].startswith("relation: directed")
    assert "directed" not in first["missing_concepts"]
    # the old judgement: relation words stay missing, and the cycle trades the path for a detour
    old = ask(kb, minilm, "who directed the films written by [Jimmy McGovern]", preset="paper", path_hops=2)
    assert "directed" in old.trace["paths"][0]["cycles"][0]["missing_concepts"]


def test_steps_follow_the_relation_words_in_order(kb: EmbeddedStore, minilm: OnnxEmbedder) -> None:
    for text, gold, wrong in (
        ("who directed the films written by [Byron Howard]", "nathan greno", "mandy moore"),
        ("who directed the films written by [Richard O'Brien]", "jim sharman", "bewitched"),
    ):
        answer = ask(kb, minilm, text)
        path = one_path(answer)
        assert gold in [n.lower() for n in path["initial_path"]], path
        assert wrong not in [n.lower() for n in path["final_path"]]
        assert path["relation_words"][0] == "films written"  # nearest the topic first


def test_a_correction_needs_the_margin(kb: EmbeddedStore, minilm: OnnxEmbedder) -> None:
    for margin in (0.0, 0.05):
        text = "who directed the films written by [Richard O'Brien]"
        answer = ask(kb, minilm, text, relation_coverage=False, keep_margin=margin)
        judged = [c for p in answer.trace["paths"] for c in p["cycles"] if "coverage_change" in c]
        assert judged
        for cycle in judged:
            if cycle.get("rejected"):  # the change is rounded to 4 places in the trace
                assert cycle["coverage_change"] < margin + 1e-4
            else:
                assert cycle["coverage_change"] > margin - 1e-4


def test_generic_words_start_nothing_when_the_topic_is_marked(kb: EmbeddedStore, minilm: OnnxEmbedder) -> None:
    answer = ask(kb, minilm, "what movies did [Stanley Donen] direct")
    starts = [s["name"] for s in answer.trace["start_entities"]]
    assert starts == ["Stanley Donen"]  # "movies" does not start at the film Movie Movie
    assert "movie movie" in names(answer)  # the answer one edge away


def test_a_title_fragment_starts_nothing(kb: EmbeddedStore, minilm: OnnxEmbedder) -> None:
    answer = ask(kb, minilm, "who directed Shattered Glass")
    assert [s["name"] for s in answer.trace["start_entities"]] == ["Shattered Glass"]


def test_the_answers_one_edge_away_stay_beside_the_path(kb: EmbeddedStore, minilm: OnnxEmbedder) -> None:
    answer = ask(kb, minilm, "what films did [Richard O'Brien] write")
    found = names(answer)
    assert {"rocky horror picture show", "shock treatment"} <= set(found), found
    single = ask(kb, minilm, "what films did [Richard O'Brien] write", neighbourhood=0, n_max=0)
    assert len({"rocky horror picture show", "shock treatment"} & set(names(single))) == 1


def test_the_trace_says_why_a_concept_is_missing(kb: EmbeddedStore, minilm: OnnxEmbedder) -> None:
    answer = ask(kb, minilm, "which catholic films did [Antonia Bird] make in the nineties")
    strategy = REGISTRY.create("metakgrag", QASettings())
    lines = "\n".join(strategy.trace_lines(answer))
    missing = [c for p in answer.trace["paths"] for cycle in p["cycles"] for c in cycle["missing_concepts"]]
    assert missing and f"{missing[0]} (best " in lines  # what covered it best, and how well


def test_a_first_step_into_a_dead_end_is_stepped_back_from(kb: EmbeddedStore, minilm: OnnxEmbedder) -> None:
    from metakg.qa_engine.services import QAServices
    from metakg.qa_engine.walk import Walker, WalkPath

    nodes = kb.bundle().nodes
    start = kb.get_node(nodes.filter(pl.col("name") == "Roger Kumble")["id"][0])
    assert start is not None
    # the question draws the first step to The Sweetest Thing, which leads nowhere but back
    walker = Walker(kb, QAServices(kb, minilm, max_entries=1000), "The Sweetest Thing", max_neighbours=50)
    plain = walker.extend(WalkPath([start]), 2, {})
    stepped = walker.extend(WalkPath([start]), 2, {}, step_back=3)
    assert [n.name for n in plain.nodes] == ["Roger Kumble", "The Sweetest Thing"]
    assert [n.name for n in stepped.nodes] == ["Roger Kumble", "Just Friends", "Ryan Reynolds"]


def test_a_missing_relation_word_restarts_at_the_start(kb: EmbeddedStore, minilm: OnnxEmbedder) -> None:
    answer = ask(kb, minilm, "what genres are the films written by [Richard O'Brien]")
    restarts = [
        c for p in answer.trace["paths"] for c in p["cycles"] if "only relation words" in c.get("pivot_reason", "")
    ]
    for cycle in restarts:
        assert cycle["pivot"] == "Richard O'Brien"
    assert {"comedy", "musical"} & set(names(answer))


@pytest.mark.parametrize("ablated", [False, True])
def test_the_strategic_restart_steps_back_and_the_ablation_does_not(
    kb: EmbeddedStore, minilm: OnnxEmbedder, ablated: bool
) -> None:
    from metakg.qa_engine.services import QAServices
    from metakg.qa_engine.strategies.metakgrag.strategy import Concepts, MetaKGRAGSettings, refine
    from metakg.qa_engine.walk import Walker, WalkPath

    nodes = kb.bundle().nodes
    start = kb.get_node(nodes.filter(pl.col("name") == "Roger Kumble")["id"][0])
    assert start is not None
    walker = Walker(kb, QAServices(kb, minilm, max_entries=1000), "The Sweetest Thing", max_neighbours=50)
    walker.guide_by(["starred"])
    initial = walker.extend(WalkPath([start]), 2, {})  # plain greedy: into The Sweetest Thing, a dead end
    assert [n.name for n in initial.nodes] == ["Roger Kumble", "The Sweetest Thing"]
    _, final, trace, *_ = refine(  # tau_support 0.1: the completeness check alone
        initial, Concepts(["Roger Kumble", "starred"]), walker, MetaKGRAGSettings(no_restart=ablated, tau_support=0.1)
    )
    assert trace["cycles"][0]["missing_concepts"] == ["starred"]
    if ablated:  # the plain restart walks into the same dead end: nothing is refined
        assert [n.name for n in final.nodes] == ["Roger Kumble", "The Sweetest Thing"]
        assert trace["cycles"][0]["new_path"] == ["Roger Kumble", "The Sweetest Thing"] and not trace["refined"]
    else:
        assert [n.name for n in final.nodes] == ["Roger Kumble", "Just Friends", "Ryan Reynolds"]
        assert "only relation words" in trace["cycles"][0]["pivot_reason"]


def test_a_common_word_written_otherwise_than_a_title_starts_nothing(kb: EmbeddedStore, minilm: OnnxEmbedder) -> None:
    answer = ask(kb, minilm, "what years saw releases of films helmed by [Jim Sharman]")
    assert [s["name"] for s in answer.trace["start_entities"]] == ["Jim Sharman"]  # "saw" is not the film Saw
    assert "1981" in names(answer)


def test_a_phrase_stops_at_the_marked_topic(kb: EmbeddedStore, minilm: OnnxEmbedder) -> None:
    answer = ask(kb, minilm, "[Richard O'Brien] wrote some films: who were their directors")
    assert answer.trace["question_concepts"][:2] == ["Richard O'Brien", "wrote"]  # not "Richard O'Brien wrote"


def test_a_hyphenated_word_is_one_concept(kb: EmbeddedStore, minilm: OnnxEmbedder) -> None:
    answer = ask(kb, minilm, "who were the co-stars of [Susan Sarandon]")
    assert answer.trace["question_concepts"] == ["Susan Sarandon", "co-stars"]  # not "co" and "stars"
    assert "tim curry" in names(answer)


def test_another_starts_concept_still_guides_the_topics_path(kb: EmbeddedStore, minilm: OnnxEmbedder) -> None:
    answer = ask(kb, minilm, "who was cast in the films by the director of [Priest]")
    assert {s["name"] for s in answer.trace["start_entities"]} == {"Priest", "cast"}  # the tag "cast", as written
    (topic,) = [p for p in answer.trace["paths"] if p["start"] == "Priest"]
    assert "cast" in topic["relation_words"]
    (other,) = [p for p in answer.trace["paths"] if p["start"] == "cast"]
    assert "cast" not in other["relation_words"]


def test_an_entity_reached_by_a_relation_the_question_names_is_not_misleading(
    kb: EmbeddedStore, minilm: OnnxEmbedder
) -> None:
    # at tau_support 0.1; the tuned 0.35 flags most entities that serve one concept only (docs/qa-engine.md)
    text = "who directed the films written by [Jimmy McGovern]"
    first = ask(kb, minilm, text, tau_support=0.1).trace["paths"][0]["cycles"][0]
    assert first["path"][-1] == "Antonia Bird" and first["misleading_entities"] == []
    # by names alone (the paper), the director is far from every concept and judged misleading
    paper = ask(kb, minilm, text, relation_coverage=False, tau_support=0.1).trace["paths"][0]["cycles"][0]
    assert paper["path"][-1] == "Antonia Bird" and paper["misleading_entities"] == ["kg:metaqa/antonia_bird"]


def test_a_name_that_only_resembles_a_relation_word_does_not_cover_it(kb: EmbeddedStore, minilm: OnnxEmbedder) -> None:
    # "who acted in the films directed by X": a path ending at the genre Comedy (0.42 to "acted") covered
    # "acted" better than one reaching an actor by starred_actors (0.47) after a first edge directed_by (0.39)
    # gave way, so a correction to a genre was kept for a noise gain
    from metakg.qa_engine.services import QAServices
    from metakg.qa_engine.strategies.metakgrag.strategy import Concepts, MetaKGRAGSettings, diagnose
    from metakg.qa_engine.walk import Walker, WalkPath

    def path(*names: str) -> WalkPath:
        nodes = kb.bundle().nodes
        first = kb.get_node(nodes.filter(pl.col("name") == names[0])["id"][0])
        assert first is not None
        walk = WalkPath([first])
        for name in names[1:]:
            (step,) = [nb for nb in walker.neighbours(walk.nodes[-1].id) if nb.node.name == name]
            walk = WalkPath([*walk.nodes, step.node], [*walk.edges, step.edge])
        return walk

    walker = Walker(
        kb, QAServices(kb, minilm, max_entries=1000), "who acted in the films by Jim Sharman", max_neighbours=50
    )
    walker.guide_by(["acted"])
    concepts, settings = Concepts(["Jim Sharman", "acted"]), MetaKGRAGSettings()
    genre = diagnose(path("Jim Sharman", "The Rocky Horror Picture Show", "Comedy"), concepts, walker, settings)
    assert genre.covered_by["acted"] == "relation: directed by"  # not "entity: Comedy"
    assert genre.coverage["acted"] == pytest.approx(0.39, abs=0.01)
    actor = diagnose(path("Jim Sharman", "The Rocky Horror Picture Show", "Tim Curry"), concepts, walker, settings)
    assert actor.covered_by["acted"] == "relation: starred actors"
    assert actor.coverage["acted"] > genre.coverage["acted"]
    # without relation coverage (the paper) the name counts, whatever its similarity
    paper = diagnose(
        path("Jim Sharman", "The Rocky Horror Picture Show", "Comedy"),
        concepts,
        walker,
        settings.model_copy(update={"relation_coverage": False}),
    )
    assert paper.covered_by["acted"] == "entity: Comedy" and paper.coverage["acted"] == pytest.approx(0.42, abs=0.01)
    # a name that does match a relation word still covers it: the tag "cast"
    walker.guide_by(["cast"])
    tagged = diagnose(path("Priest", "cast"), Concepts(["Priest", "cast"]), walker, settings)
    assert tagged.covered_by["cast"] == "entity: cast" and tagged.coverage["cast"] == pytest.approx(1.0)


# rows of the MetaQA KB subset around In the Valley of Elah (every row touching a node two edges from it)
ELAH = """Volcano|release_year|1997
In the Valley of Elah|starred_actors|Tommy Lee Jones
Volcano|has_tags|tommy lee jones
The Park Is Mine|starred_actors|Tommy Lee Jones
Volcano|starred_actors|Tommy Lee Jones
Volcano|has_genre|Drama
Man of the House|has_tags|tommy lee jones
The Sunset Limited|starred_actors|Tommy Lee Jones
"""


@pytest.mark.parametrize("fallback", [True, False])
def test_a_rejected_correction_for_both_deficiencies_falls_back_to_the_relevance_one(
    tmp_path: Path, minilm: OnnxEmbedder, fallback: bool
) -> None:
    # "released" is missing (a has_tags edge into Man of the House, a dead end) and two entities mislead;
    # the correction for both walks to The Sunset Limited and covers less; the one for the misleading
    # entities alone reaches Volcano and its year
    store = store_of(ELAH, tmp_path, minilm)
    text = "when were the movies starring the actors of [In the Valley of Elah] released"
    # with one_edge_each "movies starring" is missing too (its one starred_actors edge serves "actors"), and the
    # correction for both is another one: this is the case the fallback was measured on
    answer = ask(store, minilm, text, relevance_fallback=fallback, one_edge_each=False)
    path = one_path(answer)
    first = path["cycles"][0]
    assert first["missing_concepts"] == ["released"] and first["misleading_entities"]
    if fallback:
        assert first["rejected_first"]["new_path"][-1] == "The Sunset Limited"
        assert first["rejected_first"]["coverage_change"] < 0 and not first.get("rejected")
        assert first["new_path"][-2:] == ["Volcano", "1997"] and "1997" in names(answer)
        assert any("the misleading entities alone" in line for line in REGISTRY.create("metakgrag").trace_lines(answer))
    else:
        assert first["rejected"] and "rejected_first" not in first
        assert first["new_path"][-1] == "The Sunset Limited" and "1997" not in names(answer)
    assert MetaKGRAGSettings(preset="paper").relevance_fallback is False


# rows of the MetaQA KB subset: Harrison Ford's films and every row of theirs; one has a genre
HARRISON_FORD = """Regarding Henry|starred_actors|Harrison Ford
Raiders of the Lost Ark|starred_actors|Harrison Ford
Raiders of the Lost Ark|has_tags|usa
Working Girl|has_tags|harrison ford
Working Girl|starred_actors|Harrison Ford
Working Girl|has_genre|Comedy
The Expendables 3|starred_actors|Harrison Ford
Firewall|starred_actors|Harrison Ford
Random Hearts|has_tags|kristin scott thomas
Random Hearts|starred_actors|Harrison Ford
Random Hearts|has_tags|harrison ford
Air Force One|has_tags|harrison ford
Air Force One|has_tags|wolfgang petersen
Air Force One|starred_actors|Harrison Ford
"""


@pytest.mark.parametrize("search", [True, False])
def test_a_missing_relation_word_searches_the_restarts_one_edge_ahead(
    tmp_path: Path, minilm: OnnxEmbedder, search: bool
) -> None:
    # the greedy step picks a film by how the film reads and reaches no genre; the restart search is drawn
    # to the one film with a has_genre edge onward
    store = store_of(HARRISON_FORD, tmp_path, minilm)
    answer = ask(store, minilm, "what genres are the movies starring [Harrison Ford]", restart_search=search)
    path = one_path(answer)
    first = path["cycles"][0]
    assert path["initial_path"] == ["Harrison Ford", "Raiders of the Lost Ark", "usa"]
    assert first["missing_concepts"] == ["genres"] and first["covered_by"]["genres"] == "relation: has tags"
    if search:
        assert "of the restarts from each entity of the path" in first["pivot_reason"]
        assert path["final_path"] == ["Harrison Ford", "Working Girl", "Comedy"] and "comedy" in names(answer)
        assert path["cycles"][1]["covered_by"]["genres"] == "relation: has genre"
    else:  # the restart at the start entity walks the same path again
        assert first["new_path"] == path["initial_path"] and "comedy" not in names(answer)
        assert path["stop"].startswith("converged")
    assert MetaKGRAGSettings(preset="paper").restart_search is False


def test_the_ablation_of_the_restart_does_not_search(tmp_path: Path, minilm: OnnxEmbedder) -> None:
    store = store_of(HARRISON_FORD, tmp_path, minilm)
    answer = ask(store, minilm, "what genres are the movies starring [Harrison Ford]", no_restart=True)
    path = one_path(answer)
    assert path["cycles"][0]["pivot_reason"] == "start entity (no strategic restart)"
    assert "comedy" not in names(answer)


# rows of the MetaQA KB subset around Bowfinger's director, as they are there
DIRECTOR_ROWS = """Bowfinger|has_tags|hollywood
Bowfinger|directed_by|Frank Oz
The Dark Crystal|starred_actors|Frank Oz
The Dark Crystal|has_tags|frank oz
The Stepford Wives|directed_by|Frank Oz
The Stepford Wives|starred_actors|Glenn Close
Little Shop of Horrors|directed_by|Frank Oz
"""


def test_an_edge_that_serves_one_relation_word_leaves_another_missing(tmp_path: Path, minilm: OnnxEmbedder) -> None:
    # "who starred in the films directed by the director of Bowfinger": the path Bowfinger > Frank Oz > The Dark
    # Crystal covered "director" and "films directed" with its one directed_by edge, so nothing was missing
    # and the cycle stopped one film short of the answer
    store = store_of(DIRECTOR_ROWS, tmp_path, minilm)
    text = "who starred in the films directed by the director of [Bowfinger]"
    old = ask(store, minilm, text, one_edge_each=False)
    path = one_path(old)
    assert path["final_path"] == ["Bowfinger", "Frank Oz", "The Dark Crystal"]
    assert path["cycles"][0]["missing_concepts"] == []
    assert "glenn close" not in names(old)
    answer = ask(store, minilm, text)
    path = one_path(answer)
    first = path["cycles"][0]
    (word,) = {"director", "films directed"} & set(first["missing_concepts"])
    other = ({"director", "films directed"} - {word}).pop()
    assert first["covered_by"][word] == f"relation: directed by (the edge that serves {other})"
    assert first["covered_by"][other] == "relation: directed by"
    assert first["coverage"][word] >= 0.5  # its best edge reads like it: the coverage a correction must raise
    assert path["final_path"][-2:] == ["The Stepford Wives", "Glenn Close"]
    assert "glenn close" in names(answer)[:10]
    covered = path["cycles"][-1]["covered_by"]
    assert covered["director"] == covered["films directed"] == "relation: directed by"  # by two edges, one each
    assert MetaKGRAGSettings(preset="paper").one_edge_each is False
    # the completeness ablation judges nothing missing, so nothing is said about shared edges
    ablated = ask(store, minilm, text, no_completeness=True).trace["paths"][0]["cycles"][0]
    assert ablated["missing_concepts"] == [] and "serves" not in " ".join(ablated["covered_by"].values())


def test_a_word_that_reads_like_several_relations_takes_no_edge_of_its_own(
    kb: EmbeddedStore, minilm: OnnxEmbedder
) -> None:
    # "films" reads about as much like starred actors (0.54) as like directed by (0.52): it names the films a
    # path passes, not one of its edges, so it takes none of them from "directed"
    from metakg.qa_engine.services import QAServices
    from metakg.qa_engine.strategies.metakgrag.strategy import clear_words
    from metakg.qa_engine.walk import Walker, WalkPath

    walker = Walker(
        kb, QAServices(kb, minilm, max_entries=1000), "who directed the films Tim Curry acted in", max_neighbours=50
    )
    walker.guide_by(["films", "directed"])
    start = kb.get_node("kg:metaqa/tim_curry")
    assert start is not None
    (step,) = walker.neighbours(start.id)
    clear = clear_words(WalkPath([start, step.node], [step.edge]), walker, MetaKGRAGSettings())
    assert clear == ["directed"]
    # around Tim Curry alone there is one relation, starred actors: nothing to confuse a word with
    assert clear_words(WalkPath([start]), walker, MetaKGRAGSettings()) == ["films", "directed"]


# rows of the MetaQA KB subset around Sidney Gilliat's one film, as they are there
GILLIAT_ROWS = """Night Train to Munich|written_by|Sidney Gilliat
Night Train to Munich|directed_by|Carol Reed
Night Train to Munich|release_year|1940
The Stars Look Down|has_tags|carol reed
Remember the Night|release_year|1940
Second Chorus|release_year|1940
Kitty Foyle|release_year|1940
Boom Town|release_year|1940
Road to Singapore|release_year|1940
"""


@pytest.mark.parametrize("keep", [True, False])
def test_the_restart_from_the_start_entity_is_kept_when_the_search_chooses_another(
    tmp_path: Path, minilm: OnnxEmbedder, keep: bool
) -> None:
    # "camera" reads more like release year (0.28) than like directed by: the restart search picks the restart
    # from 1940, and the director is on the restart the search drew from the start entity
    text = "who was behind the camera for the pictures authored by [Sidney Gilliat]"
    store = store_of(GILLIAT_ROWS, tmp_path, minilm)
    answer = ask(store, minilm, text, keep_start_restart=keep)
    path = one_path(answer)
    first = path["cycles"][0]
    assert first["missing_concepts"] == ["camera"] and first["pivot"] == "1940"
    assert "carol reed" not in [n.lower() for n in path["final_path"]]
    found = names(answer)
    if keep:
        assert first["start_restart_kept"] is True
        assert any(p[:3] == ["Sidney Gilliat", "Night Train to Munich", "Carol Reed"] for p in path["kept_last"])
        # kept last: its two new entities come after every entity the final paths, the paths kept too and the
        # neighbourhood hold
        assert found[-2:] == ["carol reed", "stars look down"]
        lines = "\n".join(REGISTRY.create("metakgrag").trace_lines(answer))
        assert "the search's restart from the start entity is kept last too" in lines
        # a later cycle whose search draws the same restart from the start entity keeps nothing more
        assert not any(c.get("start_restart_kept") for c in path["cycles"][1:])
        # the ablation of the restart has no search, so no restart is kept for it (its restart at the start entity
        # reaches the director, and is rejected by a near tie)
        ablated = one_path(ask(store, minilm, text, no_restart=True))
        assert ablated["cycles"][0]["pivot_reason"] == "start entity (no strategic restart)"
        assert not any(c.get("start_restart_kept") for c in ablated["cycles"])
    else:
        assert "carol reed" not in found and not any(c.get("start_restart_kept") for c in path["cycles"])
    assert MetaKGRAGSettings(preset="paper").keep_start_restart is False
