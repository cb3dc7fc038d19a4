"""The tab-separated triple reader: real files, bad lines, duplicates, and counts that add up."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from metakg.errors import InputDataError, UsageError
from metakg.ingest.triples import read_triples
from metakg.schemas.curie import slug


def write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "kg.txt"
    path.write_bytes(data)
    return path


BAD = (
    b"aspirin\ttreats\theadache\n"  # 1 good
    b"\n"  # blank: skipped, not a record
    b"  Aspirin \tTreats\t headache.\n"  # 3 good, the same triple after normalisation
    b"only\ttwo\n"  # 4 two columns
    b"a\tb\tc\td\n"  # 5 four columns
    b"\t\tempty head\n"  # 6 empty head
    b"x\t \ty\n"  # 7 empty relation
    b"x\tr\t   \n"  # 8 empty tail
    b"bad \xff\xfe bytes\tr\tz\n"  # 9 invalid UTF-8
    + b"L" * 1_000_000
    + b"\tr\tz\n"  # 10 a 1 MB line
    + b"aspirin\ttreats\theadache\n"  # 11 exact duplicate
    b"x\t!!!\ty\n"  # 12 relation without letters
    b"fever\tsymptom of\tflu\r\n"  # 13 good, CRLF
)


def test_bad_lines_are_rejected_with_reasons_and_counts_add_up(tmp_path: Path) -> None:
    bundle, report = read_triples(write(tmp_path, BAD), "t")
    assert report.read == 12 and report.blank_lines == 1
    assert report.accepted == 4 and report.rejected == 8
    assert report.read == report.accepted + report.rejected
    assert report.edges == 2 and report.merged_duplicates == 2
    checks = dict(zip(bundle.rejects["record"], bundle.rejects["check"], strict=True))
    assert checks == {
        "kg.txt:4": "field_count",
        "kg.txt:5": "field_count",
        "kg.txt:6": "empty_field",
        "kg.txt:7": "empty_field",
        "kg.txt:8": "empty_field",
        "kg.txt:9": "invalid_utf8",
        "kg.txt:10": "field_too_long",
        "kg.txt:12": "bad_relation",
    }
    reasons = dict(zip(bundle.rejects["record"], bundle.rejects["reason"], strict=True))
    assert reasons["kg.txt:4"].endswith("found 2") and reasons["kg.txt:5"].endswith("found 4")
    assert reasons["kg.txt:10"] == "head is longer than 1000 characters (ingest.max_field_chars)"
    # nothing lost: each rejected line is kept whole, invalid bytes escaped
    payloads = dict(zip(bundle.rejects["record"], bundle.rejects["payload"], strict=True))
    assert payloads["kg.txt:9"] == "bad \\xff\\xfe bytes\tr\tz"
    assert len(payloads["kg.txt:10"]) == 1_000_004


def test_repeated_triples_become_one_edge_with_count_and_records(tmp_path: Path) -> None:
    bundle, _ = read_triples(write(tmp_path, BAD), "t")
    edge = bundle.edges.filter(pl.col("rel") == "treats").row(0, named=True)
    assert edge["count"] == 3
    assert edge["record_ids"] == ["kg.txt:1", "kg.txt:3", "kg.txt:11"]
    assert edge["src"] == "kg:t/aspirin" and edge["dst"] == "kg:t/headache"
    assert edge["display"] == "treats" and edge["importer"] == "metakg.ingest.triples"
    aspirin = bundle.nodes.filter(pl.col("id") == "kg:t/aspirin").row(0, named=True)
    assert aspirin["name"] == "aspirin" and aspirin["aliases"] == ["Aspirin"]
    assert set(bundle.nodes["type"]) == {"concept"}


def test_options(tmp_path: Path) -> None:
    bundle, _ = read_triples(
        write(tmp_path, b"a\tr\tb\n"), "t", source="mysrc", node_type="drug", confidence=0.4, run_id="run-1"
    )
    row = bundle.edges.row(0, named=True)
    assert (row["source"], row["confidence"], row["run_id"]) == ("mysrc", 0.4, "run-1")
    assert set(bundle.nodes["type"]) == {"drug"}
    assert bundle.manifest["sources"][0]["run_id"] == "run-1"
    with pytest.raises(UsageError):
        read_triples(write(tmp_path, b"a\tr\tb\n"), "bad name")
    with pytest.raises(InputDataError, match="cannot read"):
        read_triples(tmp_path / "missing.txt", "t")


def test_empty_file(tmp_path: Path) -> None:
    _bundle, report = read_triples(write(tmp_path, b""), "t")
    assert (report.read, report.accepted, report.nodes, report.edges) == (0, 0, 0, 0)


@pytest.mark.parametrize(
    "name",
    [
        "commonsenseqa__knowledge_graph.txt",
        "GenMedGPT-5K__knowledge_graph.txt",
        "explainpe__knowledge_graph.txt",
        "CMB-Exam__Pharmacy__knowledge_graph.txt",
    ],
)
def test_real_pilot_kgs_counts_recomputed_independently(public_file: Callable[[str], Path], name: str) -> None:
    path = public_file(f"metakgrag_pilot/{name}")
    bundle, report = read_triples(path, "pilot")
    # recompute with the csv module and plain Python
    good, bad, triples, concepts = 0, 0, set(), set()
    with path.open(encoding="utf-8", newline="") as fh:
        for row in csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE):
            if not row or not "".join(row).strip():
                continue
            if len(row) != 3:
                bad += 1
                continue
            head, relation, tail = (" ".join(f.split()) for f in row)
            head, tail = head.rstrip(".,;:!?").strip(), tail.rstrip(".,;:!?").strip()
            if not head or not tail or not relation:
                bad += 1
                continue
            rel = "_".join("".join(ch if ch.isalnum() or ch == "_" else " " for ch in relation.lower()).split())
            if not rel:  # e.g. the real relation "+" in explainpe
                bad += 1
                continue
            good += 1
            triples.add((slug(head), rel, slug(tail)))
            concepts.update({slug(head), slug(tail)})
    assert (report.accepted, report.rejected) == (good, bad)
    assert report.edges == len(triples)
    assert report.nodes == len(concepts)
    assert bundle.edges["count"].sum() == report.accepted


def test_a_byte_order_mark_and_invisible_characters_never_reach_a_name(tmp_path: Path) -> None:
    path = tmp_path / "bom.txt"
    lines = ["a\tlinks\tb", "a\u200b\tlinks\tc", "\u202eb\tlinks\tc", "x\x00\tlinks\ty", "x\tlinks\ty\x07", "p\t123\tq"]
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode("utf-8") + b"\n")
    bundle, report = read_triples(path, "t")
    assert sorted(bundle.nodes["id"].to_list()) == ["kg:t/a", "kg:t/b", "kg:t/c"]  # no kg:t/\ufeffa, no a\u200b
    assert all(ch not in name for name in bundle.nodes["name"] for ch in ("\ufeff", "\u200b", "\u202e"))
    assert (report.read, report.accepted, report.rejected) == (6, 3, 3)
    reasons = dict(zip(bundle.rejects["record"], bundle.rejects["check"], strict=True))
    assert reasons == {"bom.txt:4": "control_character", "bom.txt:5": "control_character", "bom.txt:6": "bad_relation"}


def test_metaqa_names_never_merge_across_letters_or_meaningful_punctuation(tmp_path: Path, data_dir: Path) -> None:
    """The MetaQA KB subset: every distinct input string stays findable (a name or an alias of its node),
    and a node merges only strings that differ in case (or a final full stop, comma, semicolon or colon)."""
    rows = [line.split("|") for line in (data_dir / "metaqa" / "kb_subset_8107.txt").read_text().splitlines()]
    path = tmp_path / "kb.txt"
    path.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in rows), encoding="utf-8")
    bundle, report = read_triples(path, "metaqa")
    assert report.rejected == 0
    strings = {" ".join(s.split()) for h, _, t in rows for s in (h, t)}
    names = {n: i for i, n in zip(bundle.nodes["id"], bundle.nodes["name"], strict=True)}
    aliases = {a: i for i, al in zip(bundle.nodes["id"], bundle.nodes["aliases"], strict=True) for a in al}
    lost = sorted(s for s in strings if s not in names and s not in aliases)
    assert not lost, f"input strings that are neither a name nor an alias: {lost[:10]}"
    merged: dict[str, set[str]] = {}
    for s in strings:
        merged.setdefault(names.get(s) or aliases[s], set()).add(s)
    merges = {node: forms for node, forms in merged.items() if len(forms) > 1}
    for forms in merges.values():  # the merges, each listed: only case or a final .,;: may differ
        assert len({f.lower().rstrip(".,;:") for f in forms}) == 1, forms
    assert names.get("Murder!") != names.get("murder") and "Murder!" in names  # the film is not the tag
    for title in ("Why Not Me?", "Zapped!"):
        assert title in strings and title in names


def test_a_first_line_that_names_the_columns_is_a_header_not_a_triple(tmp_path: Path) -> None:
    path = tmp_path / "kg.csv"
    path.write_text("Subject,Predicate,Object\naspirin,treats,migraine\nhead,relation,tail\n")
    bundle, report = read_triples(path, "t", separator=",")
    assert report.header_skipped and (report.read, report.accepted) == (2, 2)  # only the first line is a header
    assert "kg:t/subject" not in bundle.nodes["id"].to_list() and "kg:t/head" in bundle.nodes["id"].to_list()
    _, plain = read_triples(write(tmp_path, b"aspirin\ttreats\tmigraine\n"), "t")
    assert not plain.header_skipped and plain.read == 1


def test_wide_and_compressed_files_read_as_the_text_they_hold(tmp_path: Path) -> None:
    import gzip

    text = "aspirin\ttreats\theadache\nibuprofen\ttreats\tfever\ncafé\tis a\tdrink\n"
    plain, _ = read_triples(write(tmp_path, text.encode()), "t")
    for name, data in {
        "u16.tsv": text.encode("utf-16"),  # with its byte-order mark, as Windows writes "Unicode"
        "u16be.tsv": b"\xfe\xff" + text.encode("utf-16-be"),
        "u32.tsv": text.encode("utf-32"),
        "kg.tsv.gz": gzip.compress(text.encode()),
    }.items():
        (tmp_path / name).write_bytes(data)
        bundle, report = read_triples(tmp_path / name, "t")
        assert (report.read, report.rejected) == (3, 0), name
        assert bundle.nodes["name"].to_list() == plain.nodes["name"].to_list()
    (tmp_path / "cut.tsv.gz").write_bytes(gzip.compress(text.encode())[:20])  # a truncated download
    with pytest.raises(InputDataError, match=r"cut\.tsv\.gz looks gzip-compressed but cannot be decompressed"):
        read_triples(tmp_path / "cut.tsv.gz", "t")


def test_another_separator(tmp_path: Path) -> None:
    path = tmp_path / "kb.txt"
    path.write_text("Top Hat|starred_actors|Ginger Rogers\nTop Hat|has_genre\n", encoding="utf-8")
    bundle, report = read_triples(path, "metaqa", separator="|")
    assert (report.accepted, report.rejected) == (1, 1)
    assert "expected 3 '|'-separated fields" in bundle.rejects["reason"][0]
    assert sorted(bundle.nodes["name"]) == ["Ginger Rogers", "Top Hat"]
    with pytest.raises(UsageError, match="one character"):
        read_triples(path, "metaqa", separator="||")
