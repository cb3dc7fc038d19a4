"""`metakg identity eval`: gold readers, the split, curves, operating points and the written report."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from metakg.cli.main import app
from metakg.errors import InputDataError
from metakg.identity.evaluate import (
    GoldLinks,
    GoldPairs,
    Point,
    Scored,
    _first,
    curve,
    evaluate_gold,
    half,
    operating_point,
    read_drugbank,
    read_gold,
    read_labels,
    read_pubtator,
    read_sssom,
    read_sssom_links,
    write_report,
)
from metakg.identity.names import DEFAULT_LINKS, LinkRule, pair_scores
from metakg.llm.embedder import Embedder
from metakg.schemas.vocabulary import default_vocabulary

HEADER = "subject_id\tsubject_label\tpredicate_id\tpredicate_modifier\tobject_id\tobject_label\n"
ROWS = [
    ("chebi:15365", "aspirin", "", "mesh:D001241", "Aspirin"),
    ("chebi:15365", "acetylsalicylic acid", "", "mesh:D001241", "acetylsalicylic acid"),
    ("doid:10652", "Alzheimer's disease", "", "mesh:D000544", "Alzheimer Disease"),
    ("doid:2841", "asthma", "", "mesh:D001249", "Asthma"),
    ("doid:1324", "lung cancer", "", "mesh:D008175", "Lung Neoplasms"),
    ("kegg.pathway:hsa05010", "Alzheimer disease", "Not", "mesh:D000544", "Alzheimer Disease"),
    ("go:0005840", "ribosome", "Not", "mesh:D012270", "Ribosomes"),
    ("doid:6000", "hypertension", "Not", "doid:6001", "hypotension"),
]


def sssom(path: Path, rows: list[tuple[str, ...]] = ROWS, *, comment: bool = True) -> Path:
    lines = ["#curie_map:\n", "#  doid: http://purl.obolibrary.org/obo/DOID_\n"] if comment else []
    lines.append(HEADER)
    lines += ["\t".join([s, sl, "skos:exactMatch", mod, o, ol]) + "\n" for s, sl, mod, o, ol in rows]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def test_half_is_a_stable_function_of_the_id() -> None:
    ids = [f"doid:{i}" for i in range(400)]
    halves = [half(i) for i in ids]
    assert halves == [half(i) for i in ids]  # deterministic
    assert 150 < sum(halves) < 250  # about half each side


def test_sssom_pairs_read_right_and_wrong_rows(tmp_path: Path) -> None:
    gold = read_sssom(sssom(tmp_path / "g.sssom.tsv"))
    assert len(gold.left) == 8 and gold.match == [True] * 5 + [False] * 3
    assert gold.left[5] == "Alzheimer disease" and gold.keys[5] == "kegg.pathway:hsa05010"


def test_a_second_file_adds_wrong_pairs_and_gzip_utf16_and_a_bom_are_read(tmp_path: Path) -> None:
    positives = sssom(tmp_path / "p.tsv", [r for r in ROWS if not r[2]])
    negatives = tmp_path / "n.tsv.gz"
    negatives.write_bytes(gzip.compress(sssom(tmp_path / "n.tsv", [r for r in ROWS if r[2]]).read_bytes()))
    gold = read_sssom(positives, negatives)
    assert sum(gold.match) == 5 and len(gold.match) == 8
    wide = tmp_path / "n16.tsv"  # what a Windows editor saves as "Unicode", and a UTF-8 mark
    wide.write_bytes((tmp_path / "n.tsv").read_text(encoding="utf-8").encode("utf-16"))
    (tmp_path / "p8.tsv").write_bytes(b"\xef\xbb\xbf" + positives.read_bytes())
    assert read_sssom(tmp_path / "p8.tsv", wide).match == gold.match


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("subject_id\tobject_id\nx:1\ty:2\n", "no column subject_label, object_label"),
        (HEADER + "a:1\tA\tskos:exactMatch\t\tb:1\tB\textra\n", "line 2: more fields"),
        (HEADER, "no labelled pair"),
        (HEADER + "a:1\tA\tskos:exactMatch\t\tb:1\n", "line 2: fewer fields than the header has [(]no object_label[)]"),
    ],
)
def test_a_malformed_gold_file_is_refused_naming_it(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "bad.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputDataError, match=problem) as caught:
        read_sssom(path)
    assert "bad.tsv" in str(caught.value)


def test_bad_bytes_and_a_missing_file_are_refused(tmp_path: Path) -> None:
    (tmp_path / "latin.tsv").write_bytes(HEADER.encode() + b"a:1\tCaf\xe9\tp\t\tb:1\tB\n")
    with pytest.raises(InputDataError, match="line 2: not UTF-8"):
        read_sssom(tmp_path / "latin.tsv")
    (tmp_path / "cut.tsv.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")  # a truncated download
    with pytest.raises(InputDataError, match="looks gzip-compressed but cannot be decompressed"):
        read_sssom(tmp_path / "cut.tsv.gz")
    with pytest.raises(InputDataError, match="cannot read"):
        read_sssom(tmp_path / "absent.tsv")


def test_links_leave_out_free_hits_and_ambiguous_mentions(tmp_path: Path) -> None:
    path = tmp_path / "drugbank.csv"
    path.write_text(
        "DrugBank ID,Accession Numbers,Common name,CAS,UNII,Synonyms,Standard InChI Key\n"
        "DB00945,,Aspirin,,,Acetylsalicylic acid | ASPIRIN | ASA,\n"
        "DB00316,,Acetaminophen,,,Paracetamol | ASA,\n",
        encoding="utf-8",
    )
    gold = read_drugbank(path)
    # "ASPIRIN" is the drug's own name once keyed; "ASA" names two drugs
    assert gold.mentions == ["Acetylsalicylic acid", "Paracetamol"]
    assert gold.gold == ["DB00945", "DB00316"] and gold.catalog_names == ["Aspirin", "Acetaminophen"]


def test_sssom_links_link_subject_labels_to_objects(tmp_path: Path) -> None:
    gold = read_sssom_links(sssom(tmp_path / "g.tsv"))
    # "aspirin" and "asthma" key like their objects' labels: free hits, left out; so are the Not rows
    assert gold.mentions == ["Alzheimer's disease", "lung cancer"] and gold.gold == ["mesh:D000544", "mesh:D008175"]
    assert "ribosome" not in gold.mentions and "Lung Neoplasms" in gold.catalog_names


def test_a_sample_keeps_an_ids_rows_together_and_a_wide_catalog() -> None:
    mentions = [f"m{i}" for i in range(100)]
    entities = [f"e{i % 40}" for i in range(100)]
    catalog = [f"e{i}" for i in range(1000)]
    gold = GoldLinks("s", mentions, entities, catalog, [f"name {i}" for i in range(1000)])
    sample = _first(gold, 10)
    assert len(sample.mentions) == 10 and set(sample.gold) <= set(sample.catalog_ids)
    assert len(set(sample.catalog_ids)) == 100  # ten entities per mention
    pairs = GoldPairs("p", ["a", "b", "c"], ["a", "b", "c"], [True, True, False], ["k1", "k1", "k2"])
    kept = _first(pairs, 2)
    assert kept.keys in (["k1", "k1"], ["k1", "k2"], ["k2", "k1"])


def test_curve_and_operating_point() -> None:
    scores = np.array([1.0, 0.9, 0.8, 0.7, 0.6])
    right = np.array([True, True, False, True, False])
    rows = Scored(scores, right, np.zeros(5, dtype=int))
    points = curve(rows, np.ones(5, dtype=bool), total=4, grid=[0.6, 0.7, 0.8, 0.9, 1.0])
    by = {p.threshold: p for p in points}
    assert (by[0.9].precision, by[0.9].recall, by[0.9].predicted) == (1.0, 0.5, 2)
    assert (by[0.7].precision, by[0.7].recall) == (0.75, 0.75)
    assert operating_point(points).threshold == 0.9  # the best F1 among those with precision >= 0.95
    assert operating_point(points, target=0.5).threshold == 0.7  # else the best F1 overall
    assert operating_point([Point(0.5, 0.1, 0.1, 0.1, 0, 0, 4)]).threshold == 0.5


def test_a_link_needs_its_margin_over_the_runner_up() -> None:
    rule = LinkRule(0.8, 0.05)
    assert rule.pick([("a", 0.9), ("b", 0.8)]) == "a"
    assert rule.pick([("a", 0.9), ("b", 0.88)]) is None  # two near-equal candidates: no link
    assert rule.pick([("a", 1.0), ("b", 1.0)]) == "a"  # equal keys need no margin
    assert rule.pick([("a", 0.79)]) is None and rule.pick([]) is None
    assert rule.pick([("a", 0.81)]) == "a"


def test_links_count_margin_and_unlinkable_mentions() -> None:
    # four mentions: right and clear; right but a close runner-up; wrong; right, and its runner-up would
    # be linked were the right entity missing
    rows = Scored(
        scores=np.array([0.95, 0.9, 0.85, 0.99]),
        right=np.array([True, True, False, True]),
        halves=np.zeros(4, dtype=int),
        runner_up=np.array([0.5, 0.89, 0.6, 0.9]),
        missing_best=np.array([0.5, 0.89, 0.85, 0.9]),
        missing_next=np.array([0.4, 0.3, 0.6, 0.5]),
    )
    every = np.ones(4, dtype=bool)
    (no_margin,) = curve(rows, every, total=4, grid=[0.8])
    (margin,) = curve(rows, every, total=4, grid=[0.8], margin=0.05)
    assert (no_margin.predicted, no_margin.correct) == (4, 3)
    assert (margin.predicted, margin.correct) == (3, 2)  # the close call is left unlinked
    # were the entity missing: 0.89 (margin 0.59), 0.85 and 0.9 are linked, 0.5 is not
    assert margin.unlinkable == 0.75 and curve(rows, every, 4, [0.95])[0].unlinkable == 0.0


def test_link_sets_report_the_link_default(embedder: Embedder) -> None:
    catalog = ["myocardial infarction", "heart attack risk", "migraine", "asthma"]
    gold = GoldLinks("g", ["heart attack", "migraine headache"], ["e0", "e2"], ["e0", "e1", "e2", "e3"], catalog)
    (result,) = evaluate_gold(gold, ["cascade"], embedder=embedder)
    assert result.margin == DEFAULT_LINKS["cascade"].margin
    assert result.at_default.threshold == DEFAULT_LINKS["cascade"].threshold
    assert result.at_default.unlinkable is not None


def test_cascade_is_equal_keys_else_embedding(embedder: Embedder) -> None:
    left = ["kidney stones", "CAL-51", "hypertension", "acetylsalicylic acid"]
    right = ["kidney stone", "CAL51", "hypotension", "aspirin"]
    cascade = pair_scores(left, right, "cascade", embedder=embedder)
    fuzzy = pair_scores(left, right, "fuzzy")
    vectors = pair_scores(left, right, "embedding", embedder=embedder)
    assert list(cascade[:2]) == [1.0, 1.0] and fuzzy[1] < 0.9  # the lemma, the keys without blanks
    assert cascade[2:] == pytest.approx(vectors[2:])
    assert list(pair_scores(left, right, "cascade")) == [1.0, 1.0, *fuzzy[2:]]  # no embedder: fuzzy alone


def test_evaluate_and_report(tmp_path: Path, embedder: Embedder) -> None:
    rows = [(f"doid:{i}", f"disease number {i}", "", f"mesh:D{i}", f"Disease Number {i}") for i in range(60)]
    rows += [(f"doid:{i}", f"syndrome {i}", "Not", f"mesh:E{i}", f"syndrome {i + 1}") for i in range(60, 100)]
    gold = read_gold("sssom", sssom(tmp_path / "g.tsv", rows))
    results = evaluate_gold(gold, ["exact", "fuzzy", "cascade"], embedder=embedder)
    exact = results[0]
    assert exact.held_out.precision == 1.0 and exact.held_out.recall == 1.0  # every right pair keys alike
    fuzzy = results[1]  # "syndrome 61" vs "syndrome 62" is close in spelling: the tuned threshold avoids it
    assert fuzzy.held_out.precision == 1.0 and fuzzy.threshold > 0.9
    summary = write_report(gold, results, tmp_path / "out")
    assert [s["scorer"] for s in summary["scorers"]] == ["exact", "fuzzy", "cascade"]
    assert (tmp_path / "out" / "pr-curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["rows"] == 100
    table = (tmp_path / "out" / "curve.csv").read_text().splitlines()
    assert table[0].startswith("scorer,threshold,precision") and len(table) == 1 + 3 * 51


def test_cli_eval(tmp_path: Path) -> None:
    runner = CliRunner()
    gold = sssom(tmp_path / "g.tsv")
    result = runner.invoke(app, ["identity", "eval", str(gold), "-o", str(tmp_path / "o"), "--scorer", "exact"])
    assert result.exit_code == 0, result.output
    assert "exact" in result.output and "held-out" in result.output
    result = runner.invoke(app, ["identity", "eval", str(gold), "-o", str(tmp_path / "o"), "--format", "csv"])
    assert result.exit_code != 0 and "--format must be one of" in result.output
    result = runner.invoke(
        app, ["identity", "eval", str(gold), "-o", str(tmp_path / "o"), "--scorer", "soundex", "--json"]
    )
    assert result.exit_code != 0 and "unknown scorer soundex" in result.output
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\n", encoding="utf-8")
    result = runner.invoke(app, ["identity", "eval", str(bad), "-o", str(tmp_path / "o2")])
    assert result.exit_code != 0 and "bad.tsv" in result.output and not (tmp_path / "o2").exists()


def test_links_named_by_a_labels_table(tmp_path: Path) -> None:
    labels = tmp_path / "mesh.json"
    labels.write_text(
        json.dumps({"D000544": "Alzheimer_Disease", "D003693": "Delirium", "D015738": "Famotidine"}), encoding="utf-8"
    )
    assert read_labels(labels)["D000544"] == "Alzheimer Disease"
    rows = [
        ("MONDO:0004975", "Alzheimer's disease", "", "MESH:D000544", ""),
        ("MONDO:0000001", "dementia", "", "MESH:D999999", ""),  # an id the labels lack
    ]
    gold = read_sssom_links(sssom(tmp_path / "m.tsv", rows), labels)
    assert gold.mentions == ["Alzheimer's disease"] and gold.gold == ["MESH:D000544"]
    assert "MESH:D003693" in gold.catalog_ids and len(gold.catalog_ids) == 3
    corpus = tmp_path / "cdr.txt"
    corpus.write_text(
        "8701013|t|Famotidine-associated delirium.\n"
        "8701013\t0\t10\tFamotidine\tChemical\tD015738\n"  # the entity's own name: left out
        "8701013\t22\t30\tacute delirium\tDisease\tD003693\n"
        "8701013\t40\t50\tAD\tDisease\tD000544|D003693\n"  # two ids: left out
        "8701013\t60\t70\tsenile dementia\tDisease\tMESH:D000544\n",
        encoding="utf-8",
    )
    links = read_pubtator(corpus, labels)
    assert links.mentions == ["acute delirium", "senile dementia"] and links.gold == ["mesh:D003693", "mesh:D000544"]
    (tmp_path / "bad.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(InputDataError, match=r"bad\.json: expected a JSON object"):
        read_labels(tmp_path / "bad.json")
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    with pytest.raises(InputDataError, match=r"broken\.json: not JSON"):
        read_labels(tmp_path / "broken.json")
    with pytest.raises(InputDataError, match="needs the labels"):
        read_gold("pubtator", corpus)


def test_cli_eval_of_a_link_set_shows_the_link_rule(tmp_path: Path) -> None:
    labels = tmp_path / "mesh.json"
    labels.write_text(json.dumps({"D1": "Alzheimer disease", "D2": "Delirium", "D3": "Famotidine"}), encoding="utf-8")
    rows = [("MONDO:1", "alzheimers disease", "", "MESH:D1", ""), ("MONDO:2", "deliria", "", "MESH:D2", "")]
    gold = sssom(tmp_path / "m.tsv", rows)
    args = ["identity", "eval", str(gold), "-o", str(tmp_path / "o"), "--format", "sssom-links"]
    result = CliRunner().invoke(app, [*args, "--second", str(labels), "--scorer", "fuzzy"])
    assert result.exit_code == 0, result.output
    assert "missing" in result.output and "0.63+0.08" in result.output
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    (fuzzy,) = summary["scorers"]
    assert fuzzy["margin"] == 0.08 and fuzzy["at_default"]["unlinkable"] is not None


def test_a_pair_whose_namespaces_imply_incompatible_types_is_never_called(tmp_path: Path) -> None:
    # the genus Chlamydia and the disease chlamydia (biomappings' wrong pair): no name can tell them apart
    rows = [
        ("doid:11263", "chlamydia", "Not", "ncbitaxon:810", "Chlamydia"),
        ("mesh:D002690", "Chlamydia Infections", "", "doid:11263", "chlamydia"),  # MeSH implies no type
    ]
    gold = read_sssom(sssom(tmp_path / "p.sssom.tsv", rows))
    assert gold.left_ids == ["doid:11263", "mesh:D002690"]
    assert gold.kept_apart(default_vocabulary()).tolist() == [True, False]
    from metakg.identity.evaluate import scored

    assert scored(gold, "exact", None).scores.tolist()[0] == 0.0
    assert scored(gold, "lemma", None).scores.tolist() == [0.0, 0.0]  # the second: other names
    assert _first(gold, 1).left_ids in (["doid:11263"], ["mesh:D002690"])  # ids follow the sample


def test_a_pair_about_another_organism_is_never_called(tmp_path: Path) -> None:
    # biomappings' curators: Reactome's cattle "Developmental Biology" is not MeSH's; the human one may be
    rows = [
        ("reactome:R-BTA-1266738", "Developmental Biology", "Not", "mesh:D015509", "Developmental Biology"),
        ("reactome:R-HSA-1500620", "Meiosis", "", "mesh:D008540", "Meiosis"),
        ("kegg.pathway:map04210", "Apoptosis", "", "mesh:D017209", "Apoptosis"),  # a reference map: no organism
    ]
    gold = read_sssom(sssom(tmp_path / "p.sssom.tsv", rows))
    assert gold.kept_apart(default_vocabulary()).tolist() == [True, False, False]
    from metakg.identity.evaluate import scored

    assert scored(gold, "exact", None).scores.tolist() == [0.0, 1.0, 1.0]


def test_an_id_left_on_two_nodes_makes_its_gold_pairs_misses() -> None:
    """Issue 56, item 0: a graph where ``DrugBank:DB00945`` stayed a node of its own beside the merged
    ``drugbank:DB00945`` (two writings of one id never joined) does not get a gold pair through that id right:
    the id ends on two nodes, so the pair is missed, not counted as found."""
    import polars as pl

    from metakg.identity.evaluate import IdPairs, evaluate_clusters
    from metakg.schemas.tables import conform_nodes

    nodes = conform_nodes(
        pl.DataFrame(
            {"id": ["DrugBank:DB00945", "drugbank:DB00945", "mondo:0005027"],
             "name": ["aspirin", "aspirin", "epilepsy"], "type": ["drug", "drug", "disease"],
             "source": ["b", "a", "a"], "xrefs": [[], ["wd:Q18216"], []]}
        )
    )  # fmt: skip
    canonical = {"wd:Q18216": "drugbank:DB00945"}
    gold = IdPairs("g", ["DrugBank:DB00945", "mondo:0005027"], ["wd:Q18216", "wd:Q18216"], [True, False])
    score = evaluate_clusters(gold, nodes, canonical)
    assert score["covered"] == 2 and score["positives"] == 1
    assert score["recall"] == 0.0 and score["missed_examples"] == [["DrugBank:DB00945", "wd:Q18216"]]
    joined = nodes.filter(pl.col("id") != "DrugBank:DB00945")  # once the writings are one node: found
    assert evaluate_clusters(gold, joined, canonical)["recall"] == 1.0
