"""``metakg resolve`` and ``metakg identity show|split`` on bundles written to disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
from typer.testing import CliRunner

from metakg.cli.main import app
from metakg.schemas.bundle import Bundle, read_bundle, write_bundle
from tests.unit.test_identity_resolve import edges, nodes

runner = CliRunner()


def run(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output.strip().splitlines()[-1])


def bundle_at(
    path: Path, rows: list[tuple[str, str, str, list[str]]], links: list[tuple[str, str, str]], source: str
) -> Path:
    """A bundle of these node rows (id, name, type, xrefs) and edges, from ``source``, written at ``path``."""
    write_bundle(path, Bundle(nodes(rows, source), edges(links, source)))
    return path


def write_inputs(tmp_path: Path) -> tuple[Path, Path]:
    primekg, wikidata = tmp_path / "primekg", tmp_path / "wikidata"
    write_bundle(
        primekg,
        Bundle(
            nodes(
                [
                    ("mondo:0004975", "Alzheimer disease", "disease", []),
                    ("drugbank:DB01043", "Memantine", "drug", []),
                    ("drugbank:DB00945", "Aspirin", "drug", ["umls:C0004057"]),
                ],
                "primekg",
            ),
            edges([("drugbank:DB01043", "indication", "mondo:0004975")], "primekg"),
        ),
    )
    write_bundle(
        wikidata,
        Bundle(
            nodes(
                [
                    ("wd:Q11081", "Alzheimer's disease", "disease", ["MONDO:0004975"]),
                    ("wd:Q412364", "memantine", "drug", ["DrugBank:DB01043"]),
                    ("wd:Q1066", "memory loss", "phenotype", []),
                    ("wd:Q9999", "a disease sharing aspirin's UMLS id", "disease", ["UMLS:C0004057"]),
                ],
                "wikidata",
            ),
            edges([("wd:Q11081", "symptoms_and_signs", "wd:Q1066")], "wikidata"),
        ),
    )
    return primekg, wikidata


def test_resolve_show_and_split_round_trip(tmp_path: Path) -> None:
    primekg, wikidata = write_inputs(tmp_path)
    out = tmp_path / "one"
    report = run("resolve", str(primekg), str(wikidata), "-o", str(out))
    assert (report["nodes_before"], report["nodes"], report["clusters"]) == (7, 5, 2)
    assert report["refused"] == 1 and "incompatible types: disease, drug" in report["refused_examples"][0]["problem"]
    merged = read_bundle(out)
    assert merged.nodes.height == 5 and merged.manifest["identity"]["clusters"] == 2
    shown = run("identity", "show", "WD:q11081", "-b", str(out))  # any written form of a member
    assert shown["canonical"] == "mondo:0004975" and shown["evidence"] == ["mondo:0004975"]
    assert {m["node"] for m in shown["members"]} == {"mondo:0004975", "wd:Q11081"}
    by_name = run("identity", "show", "alzheimer's disease", "-b", str(out))  # a member's name, any case
    assert by_name["cluster"] == shown["cluster"]
    apart = run("identity", "show", "drugbank:DB00945", "-b", str(out))
    assert apart["canonical"] is None and "incompatible" in apart["problem"]
    done = run("identity", "split", "mondo:0004975", "drugbank:DB01043", "-b", str(out))
    assert len(done["split"]) == 2 and done["apart"] == []
    version = read_bundle(out).token
    again = runner.invoke(app, ["identity", "split", "mondo:0004975", "drugbank:DB00945", "-b", str(out)])
    assert again.exit_code == 0 and "no new version written" in again.output  # split before; refused
    assert read_bundle(out).token == version  # nothing undone: no new version
    mixed = run("identity", "split", "mondo:0004975", "-b", str(out))
    assert mixed["split"] == [] and mixed["apart"] == [shown["cluster"]]
    back = read_bundle(out)
    inputs = [read_bundle(primekg), read_bundle(wikidata)]
    assert back.nodes.height == sum(b.nodes.height for b in inputs)  # both bundles' counts, exactly
    assert back.edges.height == sum(b.edges.height for b in inputs)
    assert sorted(back.nodes["id"]) == sorted(pl.concat([b.nodes["id"] for b in inputs]))
    assert sorted(back.edges["id"]) == sorted(pl.concat([b.edges["id"] for b in inputs]))


def write_notes(tmp_path: Path) -> Path:
    return bundle_at(
        tmp_path / "notes",
        [("kg:memory_loss", "Memory loss", "concept", []), ("kg:memantine", "memantine", "drug", [])],
        [("kg:memantine", "treats", "kg:memory_loss")],
        "notes",
    )


def test_a_resolution_grows_source_by_source_and_merge_keeps_every_decision_undoable(tmp_path: Path) -> None:
    primekg, wikidata = write_inputs(tmp_path)
    notes, one, grown = write_notes(tmp_path), tmp_path / "one", tmp_path / "grown"
    run("resolve", str(primekg), str(wikidata), "-o", str(one))
    run("identity", "split", "drugbank:DB01043", "-b", str(one))  # a curator's split: it must stay
    report = run("resolve", str(one), str(notes), "-o", str(grown), "--names", "lemma")
    assert report["nodes_before"] == 9  # the graph as it was before any merge, and the notes
    decisions = run("identity", "show", "mondo:0004975", "-b", str(grown))
    assert decisions["canonical"] == "mondo:0004975"  # the earlier merge, with how it was decided
    assert {(m["node"], m["decided_by"]) for m in decisions["members"]} == {
        ("mondo:0004975", "identifier"),
        ("wd:Q11081", "identifier"),
    }
    memantine = run("identity", "show", "drugbank:DB01043", "-b", str(grown))
    assert memantine["canonical"] is None and memantine["problem"] == "split"  # kg:memantine did not undo it
    assert "kg:memantine" in {m["node"] for m in memantine["members"]}
    memory = run("identity", "show", "kg:memory_loss", "-b", str(grown))
    assert memory["canonical"] == "wd:Q1066"  # the new source's name match
    aspirin = run("identity", "show", "drugbank:DB00945", "-b", str(grown))
    assert "incompatible types" in aspirin["problem"]  # refused then, refused now
    merged = tmp_path / "merged"
    other = bundle_at(tmp_path / "other", [("hp:0002354", "Memory impairment", "phenotype", [])], [], "hpo")
    run("merge", str(grown), str(other), "-o", str(merged))
    assert read_bundle(merged).manifest["identity"]["clusters"] == 2  # the tables came along
    for bundle, parts in ((grown, (primekg, wikidata, notes)), (merged, (primekg, wikidata, notes, other))):
        run("identity", "split", "mondo:0004975", "wd:Q1066", "-b", str(bundle))  # every merge undone
        back = read_bundle(bundle)
        inputs = [read_bundle(p) for p in parts]
        assert sorted(back.nodes["id"]) == sorted(pl.concat([b.nodes["id"] for b in inputs]))
        assert sorted(back.edges["id"]) == sorted(pl.concat([b.edges["id"] for b in inputs]))


def test_one_id_in_two_bundles_for_types_that_cannot_be_one_entity_is_reported_and_kept_apart(tmp_path: Path) -> None:
    diseases = bundle_at(
        tmp_path / "diseases",
        [("mondo:0004975", "Alzheimer disease", "disease", []), ("hp:0002354", "amnesia", "phenotype", [])],
        [("mondo:0004975", "has_phenotype", "hp:0002354")],
        "mondo",
    )
    drugs = bundle_at(
        tmp_path / "drugs",
        [("mondo:0004975", "donepezil", "drug", ["drugbank:DB00843"]), ("ncbigene:43", "ACHE", "gene_protein", [])],
        [("mondo:0004975", "target", "ncbigene:43")],
        "drugs",
    )
    out = tmp_path / "one"
    report = run("resolve", str(diseases), str(drugs), "-o", str(out))
    assert report["id_clashes"] == [
        {
            "id": "mondo:0004975",
            "kept": {"bundle": str(diseases), "type": "disease"},
            "apart": [{"bundle": str(drugs), "type": "drug", "id": "kg:drugs/mondo:0004975"}],
        }
    ]
    one = read_bundle(out)
    kinds = dict(zip(one.nodes["id"], one.nodes["type"], strict=True))
    assert kinds["mondo:0004975"] == "disease" and kinds["kg:drugs/mondo:0004975"] == "drug"
    assert one.nodes.height == 4 and one.manifest["identity"]["id_clashes_count"] == 1
    pairs = set(zip(one.edges["src"], one.edges["dst"], strict=True))  # each bundle's edge on its own node
    assert pairs == {("mondo:0004975", "hp:0002354"), ("kg:drugs/mondo:0004975", "ncbigene:43")}
    assert run("validate", str(out))["ok"]
    printed = runner.invoke(app, ["resolve", str(diseases), str(drugs), "-o", str(tmp_path / "two")])
    assert "mondo:0004975: the disease of" in printed.output and "is kg:drugs/mondo:0004975" in printed.output


def test_bad_resolve_requests_are_clean_errors(tmp_path: Path) -> None:
    primekg, wikidata = write_inputs(tmp_path)
    same = runner.invoke(app, ["resolve", str(primekg), "-o", str(primekg), "--json"])
    assert same.exit_code == 2 and "also an input" in same.output
    mode = runner.invoke(app, ["resolve", str(primekg), "-o", str(tmp_path / "x"), "--mode", "fuse", "--json"])
    assert mode.exit_code == 2 and "--mode must be merge or link" in mode.output
    plain = runner.invoke(app, ["identity", "show", "mondo:0004975", "-b", str(primekg), "--json"])
    assert plain.exit_code == 2 and "not made by metakg resolve" in plain.output
    out = tmp_path / "one"
    run("resolve", str(primekg), str(wikidata), "-o", str(out))
    nowhere = runner.invoke(app, ["identity", "split", "wd:Q1066", "-b", str(out), "--json"])
    assert nowhere.exit_code != 0 and "'wd:Q1066' is no node id, cluster id or node name" in nowhere.output
    assert "of the 3 clusters, the first is" in nowhere.output


def test_resolve_by_names_too(tmp_path: Path) -> None:
    primekg, wikidata = write_inputs(tmp_path)
    notes = tmp_path / "notes"
    write_bundle(
        notes,
        Bundle(
            nodes(
                [("kg:memory_loss", "Memory loss", "concept", []), ("kg:memantine", "memantine", "drug", [])], "notes"
            ),
            edges([("kg:memantine", "treats", "kg:memory_loss")], "notes"),
        ),
    )
    out = tmp_path / "one"
    report = run("resolve", str(primekg), str(wikidata), str(notes), "-o", str(out), "--names", "lemma")
    # kg:memantine (to the memantine cluster), kg:memory_loss and wd:Q1066 (to each other)
    assert report["joined_by_name"] == 3 and read_bundle(out).manifest["identity"]["names"]["scorer"] == "lemma"
    shown = run("identity", "show", "kg:memantine", "-b", str(out))
    assert shown["canonical"] == "drugbank:DB01043"
    member = next(m for m in shown["members"] if m["node"] == "kg:memantine")
    assert (member["decided_by"], member["scorer"], member["score"]) == ("name", "lemma", 1.0)
    plain = run("resolve", str(primekg), str(wikidata), str(notes), "-o", str(tmp_path / "ids"))
    assert plain["joined_by_name"] == 0 and plain["nodes"] == report["nodes"] + 2
    bad = runner.invoke(app, ["resolve", str(primekg), "-o", str(tmp_path / "x"), "--names", "soundex", "--json"])
    assert bad.exit_code == 2 and "unknown name scorer 'soundex'" in bad.output
    bad = runner.invoke(
        app, ["resolve", str(primekg), "-o", str(tmp_path / "x"), "--names", "fuzzy", "--threshold", "1.5", "--json"]
    )
    assert bad.exit_code == 2 and "at most 1" in bad.output and not (tmp_path / "x").exists()


def test_resolve_by_names_keeps_another_organisms_pathway_apart(tmp_path: Path) -> None:
    reactome, mesh = tmp_path / "reactome", tmp_path / "mesh"
    pathways = [
        ("reactome:R-BTA-1266738", "Developmental Biology", "pathway", []),
        ("reactome:R-HSA-1500620", "Meiosis", "pathway", []),
    ]
    write_bundle(reactome, Bundle(nodes(pathways, "reactome"), edges([], "reactome")))
    terms = [("mesh:D015509", "Developmental Biology", "entity", []), ("mesh:D008540", "Meiosis", "entity", [])]
    write_bundle(mesh, Bundle(nodes(terms, "mesh"), edges([], "mesh")))
    report = run("resolve", str(reactome), str(mesh), "-o", str(tmp_path / "out"), "--names", "exact")
    assert report["joined_by_name"] == 2 and report["nodes"] == 3  # the two meioses one; the cattle pathway not
    assert run("identity", "show", "reactome:R-HSA-1500620", "-b", str(tmp_path / "out"))["canonical"]


def test_ask_with_an_identity_file_answers_over_the_curated_graph(tmp_path: Path, any_embedder: None) -> None:
    bundle = tmp_path / "kg"
    write_bundle(
        bundle,
        Bundle(
            nodes(
                [
                    ("kg:a/aspirin", "aspirin", "drug", []),
                    ("kg:a/headache", "headache", "disease", []),
                    ("kg:b/asa", "ASA", "drug", []),
                    ("kg:b/stomach_ulcer", "stomach ulcer", "disease", []),
                ],
                "a",
            ),
            edges([("kg:a/aspirin", "treats", "kg:a/headache"), ("kg:b/asa", "causes", "kg:b/stomach_ulcer")], "a"),
        ),
    )
    question = "How is headache connected to stomach ulcer?"
    plain = run("ask", question, "-b", str(bundle), "--no-llm", "--strategy", "metakgrag")
    assert not any({"treats", "causes"} <= {t[1] for t in p["triples"]} for p in plain["evidence"])
    identity = tmp_path / "identity.yaml"
    identity.write_text("must_link:\n  - [kg:a/aspirin, kg:b/asa]\n")
    curated = run(
        "ask", question, "-b", str(bundle), "--no-llm", "--strategy", "metakgrag", "--identity", str(identity)
    )
    assert any({"treats", "causes"} <= {t[1] for t in p["triples"]} for p in curated["evidence"])
    again = run("ask", question, "-b", str(bundle), "--no-llm", "--strategy", "metakgrag", "--identity", str(identity))
    assert again["evidence"] == curated["evidence"]
    identity.write_text("must_link:\n  - [kg:a/aspirin, kg:c/nothing]\n")
    bad = runner.invoke(app, ["ask", question, "-b", str(bundle), "--no-llm", "--identity", str(identity), "--json"])
    assert bad.exit_code != 0 and "must_link entry 1 names kg:c/nothing" in bad.output
    neo = runner.invoke(app, ["ask", question, "--neo4j", "--identity", str(identity), "--json"])
    assert neo.exit_code == 2 and "--identity applies to a --bundle" in neo.output


def test_eval_scores_a_resolved_bundle_against_id_pairs(tmp_path: Path) -> None:
    primekg, wikidata = write_inputs(tmp_path)
    out = tmp_path / "one"
    run("resolve", str(primekg), str(wikidata), "-o", str(out))
    gold = tmp_path / "gold.csv"
    gold.write_text(
        "a,b,same\n"
        "MONDO:0004975,http://www.wikidata.org/entity/Q11081,true\n"  # any written form
        "DrugBank:DB01043,wd:Q412364,true\n"
        "drugbank:DB00945,wd:Q9999,false\n"  # left apart by resolve: a right refusal
        "wd:Q1066,mondo:0004975,false\n"
        "\n"
        "hp:0000001,wd:Q1066,true\n"  # an id the graph lacks: not covered
    )
    scored = run("identity", "eval", str(gold), "-b", str(out), "-o", str(tmp_path / "e"))
    assert (scored["pairs"], scored["covered"], scored["called"], scored["right"]) == (5, 4, 2, 2)
    assert scored["precision"] == scored["recall"] == 1.0
    bare = tmp_path / "bare.csv"  # no header: its first row is a pair, not lost as a header
    bare.write_text(gold.read_text().split("\n", 1)[1])
    assert run("identity", "eval", str(bare), "-b", str(out), "-o", str(tmp_path / "e1"))["pairs"] == 5
    for header in ("left:id,right:id", "source:ID,target:ID,same"):  # headers that look like ids, of no prefix
        bare.write_text(header + "\n" + gold.read_text().split("\n", 1)[1])
        assert run("identity", "eval", str(bare), "-b", str(out), "-o", str(tmp_path / "e1"))["pairs"] == 5
    before = run("identity", "eval", str(gold), "-b", str(primekg), "-o", str(tmp_path / "e0"))
    assert before["resolved"] is False and before["called"] == 0  # each source alone joins nothing
    gold.write_text("a,b,same\nmondo:0004975,wd:Q11081,maybe\n")
    bad = runner.invoke(app, ["identity", "eval", str(gold), "-b", str(out), "-o", str(tmp_path / "e2"), "--json"])
    assert bad.exit_code != 0 and "gold.csv, line 2: the third column is true or false" in bad.output


def test_kg_ids_are_found_in_any_case_by_identity_show_and_the_identity_file(tmp_path: Path) -> None:
    """Probe round 4: kg:<dataset>/<slug> ids ignore case (sources.md), but identity show and resolve
    --identity found kg:notes/Aspirin nowhere (drugbank: ids were found in any case)."""
    from tests.unit.cli.test_cli import run

    (tmp_path / "n.tsv").write_text("Aspirin\ttreats\tpain\n")
    run("ingest", "triples", str(tmp_path / "n.tsv"), "--dataset", "notes", "-o", str(tmp_path / "nt"), "--json")
    header = "relation,display_relation,x_index,x_id,x_type,x_name,x_source,y_index,y_id,y_type,y_name,y_source\n"
    (tmp_path / "k.csv").write_text(header + "drug_protein,target,1,DB00945,drug,Aspirin,DrugBank,3,5742,"
                                    "gene/protein,PTGS1,NCBI\n")  # fmt: skip
    run("ingest", "primekg", str(tmp_path / "k.csv"), "-o", str(tmp_path / "pk"), "--json")
    (tmp_path / "i.yaml").write_text("must_link:\n  - [kg:notes/Aspirin, drugbank:DB00945]\n")
    _, out = run("resolve", str(tmp_path / "pk"), str(tmp_path / "nt"), "-o", str(tmp_path / "r"), "--identity",
                 str(tmp_path / "i.yaml"), "--json")  # fmt: skip
    assert out["clusters"] == 1 and out["nodes"] == out["nodes_before"] - 1
    _, shown = run("identity", "show", "kg:NOTES/Aspirin", "-b", str(tmp_path / "r"), "--json", code=None)
    assert shown.get("cluster") == "drugbank:DB00945" or "NOTES" in shown.get("error", "")
    _, shown = run("identity", "show", "kg:notes/ASPIRIN", "-b", str(tmp_path / "r"), "--json")
    assert shown["cluster"] == "drugbank:DB00945"
