"""The PrimeKG source on the real PrimeKG-derived files, on bad rows, and on the synthetic generator."""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl
import pytest

from metakg.errors import InputDataError
from metakg.ingest.primekg import KG_COLUMNS, SOURCE_PREFIXES, read_primekg
from metakg.ingest.primekg_synthetic import RELATIONS, SYNTHETIC_FILE, generate, published_counts
from metakg.schemas.validation import validate
from metakg.schemas.vocabulary import default_vocabulary

TYPE_SOURCE = {
    "gene/protein": "NCBI", "drug": "DrugBank", "effect/phenotype": "HPO", "biological_process": "GO",
    "molecular_function": "GO", "cellular_component": "GO", "anatomy": "UBERON", "pathway": "REACTOME",
    "exposure": "CTD",
}  # fmt: skip


def curie(source: str, local: str) -> str:
    """An independent re-implementation of the id rule, for recomputing counts."""
    prefix, width = SOURCE_PREFIXES[source]
    return f"{prefix}:{local.zfill(width) if width and local.isdigit() else local}"


def write_kg(path: Path, rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(KG_COLUMNS)
        writer.writerows(rows)
    return path


def head_rows(data_dir: Path) -> list[list[str]]:
    with (data_dir / "primekg" / "primekg_kg_head5.csv").open(encoding="utf-8") as fh:
        return list(csv.reader(fh))[1:]


def mirrored(row: list[str]) -> list[str]:
    return [row[0], row[1], *row[7:12], *row[2:7]]


def test_real_head_rows(data_dir: Path) -> None:
    bundle, report = read_primekg(data_dir / "primekg" / "primekg_kg_head5.csv")
    assert (report.read, report.accepted, report.rejected, report.nodes, report.edges) == (5, 5, 0, 10, 5)
    phyhip = bundle.nodes.filter(pl.col("name") == "PHYHIP").row(0, named=True)
    assert phyhip["id"] == "ncbigene:9796" and phyhip["type"] == "gene_protein"
    assert phyhip["xrefs"] == ["primekg.index:0"]
    assert set(bundle.edges["rel"]) == {"protein_protein"} and set(bundle.edges["display"]) == {"ppi"}


def test_mirrored_copies_and_exact_duplicates_collapse(tmp_path: Path, data_dir: Path) -> None:
    rows = head_rows(data_dir)
    all_rows = rows + [mirrored(r) for r in rows] + [rows[0], rows[0]]
    bundle, report = read_primekg(write_kg(tmp_path / "kg.csv", all_rows))
    assert report.accepted == 12 and report.edges == 5
    assert report.collapsed_copies == 7 and report.mirrored_pairs == 5 and report.exact_duplicates == 2
    counts = dict(zip(bundle.edges["src"] + "|" + bundle.edges["dst"], bundle.edges["count"], strict=True))
    assert sorted(counts.values()) == [2, 2, 2, 2, 4]
    assert all(s < d for s, d in bundle.edges.select("src", "dst").iter_rows())


def test_an_id_named_two_ways_keeps_every_name_and_index_and_is_counted(tmp_path: Path, data_dir: Path) -> None:
    rows = head_rows(data_dir)
    renamed = list(rows[0])
    renamed[5], renamed[2] = "PHYHIP protein", "99999"  # the same x id under another name and index
    bundle, report = read_primekg(write_kg(tmp_path / "kg.csv", [*rows, renamed]))
    phyhip = bundle.nodes.filter(pl.col("id") == "ncbigene:9796").row(0, named=True)
    assert phyhip["name"] == "PHYHIP" and phyhip["aliases"] == ["PHYHIP protein"]  # the first row's name stays
    assert phyhip["xrefs"] == ["primekg.index:0", "primekg.index:99999"]
    assert report.conflicting_ids == 1 and report.nodes == 10
    _, plain = read_primekg(data_dir / "primekg" / "primekg_kg_head5.csv")
    assert plain.conflicting_ids == 0


def test_bad_rows_are_rejected_with_reasons(tmp_path: Path, data_dir: Path) -> None:
    good = head_rows(data_dir)
    path = tmp_path / "kg.csv"
    write_kg(path, good)
    with path.open("ab") as fh:
        fh.write(b"protein_protein,ppi,0,9796,gene/protein,PHYHIP,NCBI,8889,56992\n")  # missing columns
        fh.write(b"protein_protein,ppi,0,9796,unicorn,PHYHIP,NCBI,8889,56992,gene/protein,KIF15,NCBI\n")
        fh.write(b"protein_protein,ppi,0,,gene/protein,PHYHIP,NCBI,8889,56992,gene/protein,KIF15,NCBI\n")
        fh.write(b"protein_protein,ppi,x1,9796,gene/protein,PHYHIP,NCBI,8889,56992,gene/protein,KIF15,NCBI\n")
        fh.write(b"protein_protein,ppi,0,9796,gene/protein,PHYHIP,NCBI,8889,56992,gene/protein,KIF15,NCBI,extra\n")
        fh.write(b"protein_protein,ppi,0,9796,gene/protein,PH\xffIP,NCBI,8889,56992,gene/protein,KIF15,NCBI\n")
        fh.write(b"protein_protein,ppi,0,9796,gene/protein,PHYHIP,Nowhere,8889,56992,gene/protein,KIF15,NCBI\n")
        fh.write(
            b'protein_protein,ppi,0,9796,gene/protein,"PHYHIP, isoform 2",NCBI,8889,56992,gene/protein,KIF15,NCBI\n'
        )
    bundle, report = read_primekg(path)
    assert report.read == 13 and report.accepted == 6 and report.rejected == 7
    checks = dict(zip(bundle.rejects["record"], bundle.rejects["check"], strict=True))
    assert checks == {
        "kg.csv row 7": "missing_value",
        "kg.csv row 8": "unknown_type",
        "kg.csv row 9": "missing_value",
        "kg.csv row 10": "malformed_index",
        "kg.csv row 11": "surplus_fields",
        "kg.csv row 12": "invalid_utf8",
        "kg.csv row 13": "unknown_source",
    }
    assert "extra" in bundle.rejects.filter(pl.col("check") == "surplus_fields")["payload"][0]
    # the quoted name with a comma is one field and its row is accepted: the first name seen for the id wins
    assert bundle.nodes.filter(pl.col("id") == "ncbigene:9796")["name"][0] == "PHYHIP"


def test_control_characters_and_overlong_fields_are_rejected(tmp_path: Path, data_dir: Path) -> None:
    path = write_kg(tmp_path / "kg.csv", head_rows(data_dir))
    with path.open("ab") as fh:
        fh.write(b"protein_protein,ppi,0,9796,gene/protein,PHY\x00HIP,NCBI,8889,56992,gene/protein,KIF15,NCBI\n")
        fh.write(b"protein_protein,p\x07pi,0,9796,gene/protein,PHYHIP,NCBI,8889,56992,gene/protein,KIF15,NCBI\n")
        fh.write(
            b"protein_protein,ppi,0,9796,gene/protein,PHYHIP,NCBI,8889,56992,gene/protein,K" + b"I" * 60 + b",NCBI\n"
        )
    bundle, report = read_primekg(path, max_field_chars=50)
    assert report.read == 8 and report.rejected == 3
    rejected = {r["record"]: r for r in bundle.rejects.iter_rows(named=True)}
    assert [rejected[f"kg.csv row {n}"]["check"] for n in (7, 8, 9)] == [
        "control_character",
        "control_character",
        "field_too_long",
    ]
    assert "50 characters" in rejected["kg.csv row 9"]["reason"]
    assert "\x00" in rejected["kg.csv row 7"]["payload"]  # the row as written, to be found and mended
    assert not bundle.nodes["name"].str.contains("\x00", literal=True).any()


def test_missing_file_and_wrong_header(tmp_path: Path) -> None:
    with pytest.raises(InputDataError, match="Harvard Dataverse"):
        read_primekg(tmp_path / "kg.csv")
    (tmp_path / "bad.csv").write_text("a,b,c\n1,2,3\n", encoding="utf-8")
    with pytest.raises(InputDataError, match="PrimeKG header"):
        read_primekg(tmp_path / "bad.csv")
    (tmp_path / "folder").mkdir()
    with pytest.raises(InputDataError, match="neither"):
        read_primekg(tmp_path / "folder")


def test_nodes_and_edges_layout_gives_the_same_bundle(tmp_path: Path, data_dir: Path) -> None:
    rows = head_rows(data_dir)
    nodes = {(r[2 + 5 * s], r[3 + 5 * s], r[4 + 5 * s], r[5 + 5 * s], r[6 + 5 * s]) for r in rows for s in (0, 1)}
    folder = tmp_path / "split"
    folder.mkdir()
    with (folder / "nodes.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["node_index", "node_id", "node_type", "node_name", "node_source"])
        writer.writerows(sorted(nodes))
    with (folder / "edges.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["relation", "display_relation", "x_index", "y_index"])
        writer.writerows([r[0], r[1], r[2], r[7]] for r in rows)
    split, _ = read_primekg(folder)
    whole, _ = read_primekg(data_dir / "primekg" / "primekg_kg_head5.csv")
    assert split.nodes.sort("id").equals(whole.nodes.sort("id"))
    assert (
        split.edges.select("id", "src", "dst", "rel")
        .sort("id")
        .equals(whole.edges.select("id", "src", "dst", "rel").sort("id"))
    )


def literature_as_kg(data_dir: Path, target: Path) -> tuple[Path, int, int]:
    """PrimeKG-Plus literature edges mapped to kg.csv columns; returns the file and recomputed counts."""
    index: dict[tuple[str, str], int] = {}
    out, node_ids, pairs = [], set(), set()
    with (data_dir / "primekg" / "primekg_plus_literature_edges_integrated.csv").open(encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            xi = index.setdefault((r["x_source"], r["x_id"]), len(index))
            yi = index.setdefault((r["y_source"], r["y_id"]), len(index))
            out.append(
                [
                    r["relation_integrated"],
                    r["display_relation"],
                    str(xi),
                    r["x_id"],
                    r["x_type"],
                    r["x_name"],
                    r["x_source"],
                    str(yi),
                    r["y_id"],
                    r["y_type"],
                    r["y_name"],
                    r["y_source"],
                ]
            )
            x, y = curie(r["x_source"], r["x_id"]), curie(r["y_source"], r["y_id"])
            node_ids |= {x, y}
            rel = r["relation_integrated"].lower().replace("-", "_").replace(" ", "_")
            pairs.add((min(x, y), rel, max(x, y)))
    return write_kg(target, out), len(node_ids), len(pairs)


def test_real_literature_edges_recomputed_independently(tmp_path: Path, data_dir: Path) -> None:
    path, n_nodes, n_edges = literature_as_kg(data_dir, tmp_path / "kg.csv")
    bundle, report = read_primekg(path)
    assert report.rejected == 0 and report.read == 626
    assert (report.nodes, report.edges) == (n_nodes, n_edges)
    grouped = bundle.nodes.filter(pl.col("id").str.starts_with("mondo.grouped:"))
    assert grouped.height > 0 and "mondo.grouped:10079_16781_16207" in grouped["id"].to_list()
    assert bundle.nodes.filter(pl.col("id") == "mondo:0019046")["name"].to_list() == ["leukodystrophy"]
    _, validation = validate(bundle, default_vocabulary().names, run_gx=False)
    assert validation.ok


def test_real_drugmechdb_paths_recomputed_independently(tmp_path: Path, data_dir: Path) -> None:
    rows, node_ids, pairs = [], set(), set()
    with (data_dir / "primekg" / "drugmechdb_paths_edges.csv").open(encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            sides = []
            for side in ("source", "target"):
                node_type, local = r[f"{side}_type"], r[f"{side}_id"]
                source = (
                    ("MONDO_grouped" if "_" in local else "MONDO") if node_type == "disease" else TYPE_SOURCE[node_type]
                )
                sides.append((r[f"{side}_index"], local, node_type, r[f"{side}_node"], source))
            rows.append([r["relation"], r["display_relation"], *sides[0], *sides[1]])
            x, y = curie(sides[0][4], sides[0][1]), curie(sides[1][4], sides[1][1])
            node_ids |= {x, y}
            pairs.add((min(x, y), r["relation"].lower().replace("-", "_").replace(" ", "_"), max(x, y)))
    _bundle, report = read_primekg(write_kg(tmp_path / "kg.csv", rows))
    assert report.rejected == 0 and report.read == 1113
    assert (report.nodes, report.edges) == (len(node_ids), len(pairs))


def test_synthetic_files_follow_the_published_counts(tmp_path: Path, data_dir: Path) -> None:
    node_counts, relation_rows = published_counts(data_dir / "primekg")
    assert set(relation_rows) == set(RELATIONS)
    result = generate(tmp_path, data_dir / "primekg", scale=0.002, seed=1)
    assert result.path.name == SYNTHETIC_FILE and "synthetic" in result.path.name
    kg = pl.read_csv(result.path, infer_schema=False)
    assert kg.columns == KG_COLUMNS
    assert kg["x_name"].str.starts_with("SYNTHETIC").all()
    per_relation = dict(kg.group_by("relation").len().iter_rows())
    for relation, rows in relation_rows.items():
        assert abs(per_relation[relation] - rows * 0.002) <= 3 + result.exact_duplicates
    bundle, report = read_primekg(result.path)
    assert report.rejected == 0 and report.mirrored_pairs == report.edges
    # the generator's own report agrees with what the file holds, repeats of random pairs included
    assert (result.rows, result.relationships, result.exact_duplicates) == (
        report.read,
        report.edges,
        report.exact_duplicates,
    )
    assert dict(bundle.nodes.group_by("type").len().iter_rows()).keys() == {
        default_vocabulary().primekg[t] for t in node_counts
    }


def test_a_byte_order_mark_before_the_header_is_accepted(tmp_path: Path, data_dir: Path) -> None:
    path = tmp_path / "kg.csv"
    path.write_bytes(b"\xef\xbb\xbf" + (data_dir / "primekg" / "primekg_kg_head5.csv").read_bytes())
    _bundle, report = read_primekg(path)
    assert (report.read, report.accepted, report.rejected) == (5, 5, 0)


def test_an_index_too_large_is_malformed_not_a_null_xref(tmp_path: Path, data_dir: Path) -> None:
    path = tmp_path / "kg.csv"
    write_kg(path, head_rows(data_dir))
    with path.open("ab") as fh:
        fh.write(
            b"protein_protein,ppi,99999999999999999999999,9796,gene/protein,PHYHIP,NCBI,"
            b"8889,56992,gene/protein,KIF15,NCBI\n"
        )
    bundle, report = read_primekg(path)
    assert report.rejected == 1 and bundle.rejects["check"].to_list() == ["malformed_index"]
    assert "4294967295" in bundle.rejects["reason"][0]
    assert bundle.nodes["xrefs"].explode().null_count() == 0


def test_a_gzip_file_is_read_and_other_binary_input_is_described(tmp_path: Path, data_dir: Path) -> None:
    import gzip

    plain = data_dir / "primekg" / "primekg_kg_head5.csv"
    packed = tmp_path / "kg.csv.gz"
    packed.write_bytes(
        gzip.compress(
            plain.read_bytes() + b"protein_protein,ppi,x1,9796,gene/protein,PHYHIP,NCBI,"
            b"8889,56992,gene/protein,KIF15,NCBI\n"
        )
    )
    bundle, report = read_primekg(packed)
    expected, _ = read_primekg(plain)
    assert (report.read, report.accepted, report.rejected) == (6, 5, 1)
    volatile = ("run_id", "created_at", "record_ids")
    assert bundle.edges.drop(volatile).equals(expected.edges.drop(volatile))
    assert bundle.edges["record_ids"].explode().str.starts_with("kg.csv.gz row ").all()
    assert bundle.rejects["record"].to_list() == ["kg.csv.gz row 7"]
    assert bundle.manifest["sources"][0]["input"] == str(packed)
    (tmp_path / "image.csv").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    with pytest.raises(InputDataError, match="it looks binary: its first bytes are 89 50 4e 47"):
        read_primekg(tmp_path / "image.csv")


def test_a_node_index_given_twice_in_the_folder_layout_is_refused_not_made_into_two_edges(tmp_path: Path) -> None:
    """One edge row joined to two nodes of one index became two edges, one made up (probe round 4)."""
    from tests.unit.cli.test_cli import run

    (tmp_path / "nodes.csv").write_text(
        "node_index,node_id,node_type,node_name,node_source\n0,1,gene/protein,A1,NCBI\n1,2,disease,B,MONDO\n"
        "1,3,disease,C,MONDO\n"
    )
    (tmp_path / "edges.csv").write_text(
        "relation,display_relation,x_index,y_index\ndisease_protein,associated with,1,0\n"
    )
    _, out = run("ingest", "primekg", str(tmp_path), "-o", str(tmp_path / "kg"), "--json", code=1)
    assert "node_index '1' on lines 3, 4" in out["error"] and not (tmp_path / "kg").exists()


def test_a_header_alone_a_relation_without_letters_and_a_fifo_get_their_own_answers(tmp_path: Path) -> None:
    """Probe round 4: a header alone was an import of nothing with exit 0; relation "123" was accepted; a FIFO
    was said not to exist, with --download offered."""
    import os

    from tests.unit.cli.test_cli import run

    header = "relation,display_relation,x_index,x_id,x_type,x_name,x_source,y_index,y_id,y_type,y_name,y_source\n"
    (tmp_path / "h.csv").write_text(header)
    _, out = run("ingest", "primekg", str(tmp_path / "h.csv"), "-o", str(tmp_path / "h"), "--json", code=1)
    assert "holds no rows" in out["error"] and not (tmp_path / "h").exists()
    (tmp_path / "r.csv").write_text(
        header + "123,ppi,0,9796,gene/protein,PHYHIP,NCBI,1,56992,gene/protein,KIF15,NCBI\n"
        "protein_protein,ppi,0,9796,gene/protein,PHYHIP,NCBI,1,56992,gene/protein,KIF15,NCBI\n"
    )
    _, out = run("ingest", "primekg", str(tmp_path / "r.csv"), "-o", str(tmp_path / "r"), "--json", code=1)
    assert (out["read"], out["accepted"], out["rejected"]) == (2, 1, 1)
    os.mkfifo(tmp_path / "f.csv")
    _, out = run("ingest", "primekg", str(tmp_path / "f.csv"), "-o", str(tmp_path / "f"), "--json", code=1)
    assert "not a regular file" in out["error"] and "fix" not in out


def test_an_edge_to_an_index_nodes_csv_lacks_is_rejected_naming_edges_csv(tmp_path: Path) -> None:
    """Probe round 4: the reject named kg.csv (no such file) and said 'a column is missing or empty'."""
    from tests.unit.cli.test_cli import run

    (tmp_path / "nodes.csv").write_text(
        "node_index,node_id,node_type,node_name,node_source\n0,9796,gene/protein,A,NCBI\n"
    )
    (tmp_path / "edges.csv").write_text(
        "relation,display_relation,x_index,y_index\nprotein_protein,ppi,0,1\nprotein_protein,ppi,0,0\n"
    )
    run("ingest", "primekg", str(tmp_path), "-o", str(tmp_path / "kg"), "--json", code=1)
    rejects = pl.read_parquet(tmp_path / "kg" / "rejects.parquet")
    assert rejects.select("record", "check").rows() == [(f"{tmp_path.name}/edges.csv row 2", "unknown_index")]
