"""Identity by names: blocking and the four scorers."""

from __future__ import annotations

import pytest

from metakg.identity.names import NameTable, candidates, pair_scores, trigrams
from metakg.llm.embedder import Embedder, OnnxEmbedder

TABLE = NameTable(
    ["drugbank:DB00945", "drugbank:DB00945", "drugbank:DB01050", "mesh:D006261", "mesh:D007676", "wd:Q11081"],
    ["Aspirin", "Acetylsalicylic acid", "Ibuprofen", "Headache", "Kidney Stones", "Alzheimer's disease"],
)


@pytest.mark.parametrize(
    ("scorer", "query", "best"),
    [
        ("exact", "the aspirin", "drugbank:DB00945"),  # a leading article and case do not count
        ("exact", "ACETYLSALICYLIC-ACID", "drugbank:DB00945"),  # an alias, punctuation as a blank
        ("lemma", "kidney stone", "mesh:D007676"),  # the head word lemmatised
        ("fuzzy", "acetylsalicylic acide", "drugbank:DB00945"),  # a typo
        ("fuzzy", "ibuprofene", "drugbank:DB01050"),
        ("fuzzy", "alzheimers disease", "wd:Q11081"),
    ],
)
def test_each_scorer_finds_what_it_should(scorer: str, query: str, best: str) -> None:
    [hits] = candidates([query], TABLE, scorer)  # type: ignore[arg-type]
    assert hits and hits[0][0] == best and 0 < hits[0][1] <= 1


def test_exact_and_lemma_give_nothing_for_other_names() -> None:
    assert candidates(["paracetamol", ""], TABLE, "exact") == [[], []]
    assert candidates(["kidney stone"], TABLE, "exact") == [[]]  # the plural is lemma's


def test_an_entity_is_scored_by_its_best_name_and_appears_once() -> None:
    [hits] = candidates(["acetylsalicylic acid"], TABLE, "fuzzy", k=5)
    ids = [entity for entity, _ in hits]
    assert ids[0] == "drugbank:DB00945" and hits[0][1] == 1.0 and ids.count("drugbank:DB00945") == 1


def test_trigrams_give_short_keys_some() -> None:
    assert {"  c", " ca", "car", "ar "} == trigrams("car")


def test_pair_scores_per_scorer(minilm: OnnxEmbedder) -> None:
    left, right = ["Aspirin", "kidney stones", "Ibuprofen"], ["aspirin", "Kidney stone", "Headache"]
    assert pair_scores(left, right, "exact").tolist() == [1.0, 0.0, 0.0]
    assert pair_scores(left, right, "lemma").tolist() == [1.0, 1.0, 0.0]
    fuzzy = pair_scores(left, right, "fuzzy")
    assert fuzzy[0] == 1.0 and 0.9 < fuzzy[1] < 1.0 and fuzzy[2] < 0.5
    cos = pair_scores(left, right, "embedding", embedder=minilm)
    assert cos[0] > 0.99 and cos[1] > 0.9 and cos[2] < 0.6
    [hits] = candidates(["acetylsalicylic acid tablet"], TABLE, "embedding", embedder=minilm)
    assert hits[0][0] == "drugbank:DB00945"


def test_pairs_must_pair_up_and_embedding_needs_an_embedder() -> None:
    with pytest.raises(ValueError, match="pair up"):
        pair_scores(["a"], [], "fuzzy")
    with pytest.raises(ValueError, match="needs an embedder"):
        candidates(["a"], TABLE, "embedding")


@pytest.mark.parametrize(
    ("query", "best"),
    [
        ("kidney stone", "mesh:D007676"),
        ("acetylsalicylic acide", "drugbank:DB00945"),
        ("ibuprofene", "drugbank:DB01050"),
    ],
)
def test_cascade_finds_by_lemma_spelling_and_meaning(query: str, best: str, embedder: Embedder) -> None:
    for given in (embedder, None):  # with vectors, and by lemma and trigrams alone
        [hits] = candidates([query], TABLE, "cascade", embedder=given)
        assert hits and hits[0][0] == best and 0.5 < hits[0][1] <= 1
    assert candidates(["kidney stone"], TABLE, "cascade", embedder=embedder)[0][0][1] == 1.0
    cells = NameTable(["cellosaurus:CVCL_1110", "cellosaurus:CVCL_0002"], ["CAL-51", "HeLa"])
    for given in (embedder, None):
        assert candidates(["cal51"], cells, "cascade", embedder=given)[0][0] == ("cellosaurus:CVCL_1110", 1.0)


def test_names_with_other_numbers_are_other_entities(minilm: OnnxEmbedder) -> None:
    """A numbered series (found joining real disease names at PrimeKG scale: *ALS type 12* and *type 21*
    scored 0.97 by edit distance) is as many entities; the same numbers, or numbers on one side only, agree."""
    from metakg.identity.strings import numbers_agree

    assert not numbers_agree("amyotrophic lateral sclerosis type 12", "amyotrophic lateral sclerosis type 21")
    assert numbers_agree("type 01 diabetes", "diabetes type 1") and numbers_agree("covid 19", "covid")
    left = ["episodic ataxia type 4", "Episodic ataxia, type 4", "spastic ataxia 1"]
    right = ["episodic ataxia type 2", "episodic ataxia type 4", "spastic ataxia"]
    for scorer, embedder in (("fuzzy", None), ("embedding", minilm), ("cascade", minilm)):
        scores = pair_scores(left, right, scorer, embedder=embedder)  # type: ignore[arg-type]
        assert scores[0] == 0.0 and scores[1] > 0.9 and scores[2] > 0.5, (scorer, scores)
    table = NameTable(["mondo:a", "mondo:b"], ["episodic ataxia type 2", "episodic ataxia type 4"])
    for scorer, embedder in (("fuzzy", None), ("embedding", minilm)):
        [hits] = candidates(["EPISODIC ATAXIA TYPE 4"], table, scorer, embedder=embedder)  # type: ignore[arg-type]
        assert hits[0] == ("mondo:b", 1.0) or hits[0][0] == "mondo:b"
        assert dict(hits).get("mondo:a", 0.0) == 0.0


def test_mention_grouping_is_stricter_than_resolve_and_the_setting_says_so() -> None:
    # extract.group_threshold's default is the grouping constant, above the cascade's pair default
    from metakg.config import ExtractSettings
    from metakg.identity.names import DEFAULT_THRESHOLDS, GROUP_THRESHOLD

    assert ExtractSettings().group_threshold == GROUP_THRESHOLD > DEFAULT_THRESHOLDS["cascade"]
    described = ExtractSettings.model_fields["group_threshold"].description or ""
    assert str(DEFAULT_THRESHOLDS["cascade"]) in described
