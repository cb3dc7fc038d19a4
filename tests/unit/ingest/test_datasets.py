"""Dataset readers on the real shared QA sets, and on bad lines."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from metakg.errors import InputDataError, UsageError
from metakg.ingest.datasets import read_dataset


def test_medagents_medqa(public_file: Callable[[str], Path]) -> None:
    result = read_dataset(public_file("medagentsbench/medqa_test_hard.jsonl"), "medagents")
    assert (result.read, result.accepted, result.rejects.height) == (100, 100, 0)
    first = result.records.row(0, named=True)
    assert first["option_labels"] == ["A", "B", "C", "D"] and first["answer"] in first["option_labels"]
    assert first["answer_text"] == first["option_texts"][first["option_labels"].index(first["answer"])]


def test_both_commonsenseqa_layouts_give_the_same_records(data_dir: Path) -> None:
    hf = read_dataset(data_dir / "commonsenseqa" / "csqa_dev_hfformat.jsonl", "csqa")
    official = read_dataset(data_dir / "commonsenseqa" / "csqa_dev_official_schema.jsonl", "csqa")
    assert hf.accepted == official.accepted == 1221
    assert hf.records.equals(official.records)
    assert hf.records["concept"][0] == "revolving door"


def test_pilot_format_with_options_and_with_free_text(public_file: Callable[[str], Path]) -> None:
    csqa = read_dataset(public_file("metakgrag_pilot/commonsenseqa__commonsenseqa.json"), "pilot", limit=20)
    assert csqa.accepted == 20 and csqa.rejects.height == 0
    row = csqa.records.row(0, named=True)
    assert row["question"] == "What do people aim to do at work?"
    assert row["option_labels"] == ["A", "B", "C", "D", "E"] and row["answer"] == "A"
    assert row["answer_text"] == "complete job"
    dialogue = read_dataset(public_file("metakgrag_pilot/GenMedGPT-5K__genmedgpt-5k.json"), "pilot")
    # the real file has two items with an empty question: rejected with that reason, the rest kept
    assert (dialogue.read, dialogue.accepted) == (800, 798)
    assert dialogue.rejects["reason"].to_list() == ["question is empty", "question is empty"]
    assert dialogue.records["option_labels"][0].to_list() == []


def test_pilot_answers_with_an_explanation_read_as_their_letter(
    public_file: Callable[[str], Path], tmp_path: Path
) -> None:
    cpe = read_dataset(public_file("metakgrag_pilot/explainpe__explaincpe.json"), "pilot")
    assert cpe.accepted == cpe.read == 507
    assert all(len(labels) >= 2 for labels in cpe.records["option_labels"].to_list())
    first = cpe.records.row(0, named=True)
    assert first["answer"] == "C" and first["answer_text"] == "维生素B12"  # "C\n<explanation>"
    # every pilot file with options reads each item as multiple choice
    for name in ("commonsenseqa__commonsenseqa.json", "CMB-Exam__Pharmacy__Pharmacy.json"):
        read = read_dataset(public_file(f"metakgrag_pilot/{name}"), "pilot")
        assert read.accepted == read.read and all(read.records["option_labels"].list.len() >= 2)
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"question": "q?\nA: x\nB: y", "answer": "Z\nbecause"}) + "\n", encoding="utf-8")
    result = read_dataset(bad, "pilot")
    assert result.accepted == 0 and "answer 'Z' is not one of the options" in result.rejects["reason"][0]


def test_bad_lines_are_rejected_and_counted(tmp_path: Path) -> None:
    good = {"question": "q?", "options": {"A": "x", "B": "y"}, "answer_idx": "B", "realidx": 7}
    path = tmp_path / "d.jsonl"
    path.write_bytes(
        (
            json.dumps(good)
            + "\n{not json\n"
            + json.dumps({**good, "answer_idx": "Z"})
            + "\n[1, 2]\n"
            + json.dumps({"question": "no options"})
            + "\n\n"
        ).encode()
        + b'{"question": "\xff"}\n'
    )
    result = read_dataset(path, "medagents")
    assert (result.read, result.accepted, result.rejects.height) == (6, 1, 5)
    reasons = result.rejects["reason"].to_list()
    assert reasons[0].startswith("invalid JSON") and "not one of the options" in reasons[1]
    assert reasons[2] == "the line is not a JSON object" and reasons[4] == "the line is not valid UTF-8"
    assert result.records["record_id"].to_list() == ["7"]


def test_records_of_the_wrong_shape_are_rejected_with_a_reason_a_person_reads(tmp_path: Path) -> None:
    medagents = [
        {"question": "q?", "options": ["drug", "virus"], "answer_idx": "A"},  # a list, not label: text
        {"question": "q?", "options": {"A": "x"}},  # no answer_idx
        {"question": "lone \ud800 half", "options": {"A": "x"}, "answer_idx": "A"},  # no character
    ]
    lines = [json.dumps(r) for r in medagents] + ['{"question": "q?", "options": {"A": "x"},}']
    lines.append('{"question": ' + "[" * 100_000 + "]" * 100_000 + ', "answer_idx": "A"}')
    lines.append(json.dumps({"question": "w " * 60_000, "options": {"A": "x"}, "answer_idx": "A"}))
    (tmp_path / "m.jsonl").write_text("\n".join(lines) + "\n")
    result = read_dataset(tmp_path / "m.jsonl", "medagents")
    assert (result.read, result.accepted) == (6, 0)
    reasons = result.rejects["reason"].to_list()
    assert reasons[0] == 'options is a list; it must be an object of label: text ({"A": ...})'
    assert reasons[1] == "not a MedAgentsBench item: the field 'answer_idx' is missing"
    assert reasons[2] == "the text holds '\\ud800', half of a UTF-16 pair, not a character"
    assert reasons[3] == "invalid JSON (Expecting property name enclosed in double quotes at column 42)"
    assert reasons[4] == "the JSON is nested too deeply to read"
    assert reasons[5] == "the question is 120,000 characters long; at most 100,000 are read"
    csqa = {"id": "1", "question": {"stem": 5, "choices": [{"label": "A", "text": "a"}]}, "answerKey": "A"}
    (tmp_path / "c.jsonl").write_text(json.dumps(csqa) + "\n")
    reasons = read_dataset(tmp_path / "c.jsonl", "csqa").rejects["reason"].to_list()
    assert reasons == ["the question is a number, not text"]
    # no choices: once read as a free-text question whose answer "A" any reply naming A matched (probe round 4)
    empty = {"id": "2", "question": "Which?", "choices": {"label": [], "text": []}, "answerKey": "A"}
    (tmp_path / "e.jsonl").write_text(json.dumps(empty) + "\n")
    reasons = read_dataset(tmp_path / "e.jsonl", "csqa").rejects["reason"].to_list()
    assert reasons == ["no choices: a CommonsenseQA item is multiple choice"]
    robodata = {"experiments": [{"paper_query_id": "A1", "query": "q?", "support_graph": ["n"]}]}
    (tmp_path / "r.json").write_text(json.dumps(robodata))
    assert read_dataset(tmp_path / "r.json", "robodata").rejects["reason"].to_list() == [
        "support_graph must be an object whose nodes are a list of objects"
    ]
    (tmp_path / "sq.txt").write_text("Q1\tP1\tQ2\twho?\n")
    (tmp_path / "simplequestions_wd_labels_en.tsv").write_bytes(b"id\tlabel\nQ2\thum\xe9n\n")
    with pytest.raises(InputDataError, match="cannot read the labels file"):
        read_dataset(tmp_path / "sq.txt", "simplequestions")


def test_a_bad_csv_row_is_rejected_alone_naming_its_line(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_bytes(
        b'id,body\n1,"Aspirin, a drug, treats pain.\nIt is old."\n'  # a quoted comma and line break: one row
        b"2,Fever is a symptom,of flu\n"  # one field too many
        b"3,Caf\xe9 is not UTF-8\n"  # a Latin-1 byte
        b"\n"  # blank
        b"4,Ibuprofen treats fever.\n"
        b'5,"an open quote\n6,to the end\n'
    )
    result = read_dataset(tmp_path / "d.csv", "csv", text_field="body", id_field="id")
    assert result.records["record_id"].to_list() == ["1", "4"]
    assert result.records["text"][0] == "Aspirin, a drug, treats pain.\nIt is old."
    reasons = dict(zip(result.rejects["record"], result.rejects["reason"], strict=True))
    assert reasons == {
        "d.csv:4": "3 fields, the header has 2",
        "d.csv:5": "the row is not valid UTF-8",
        "d.csv:8": "not CSV from here to the end of the file (unexpected end of data)",
    }
    assert result.read == result.accepted + result.rejects.height
    payloads = dict(zip(result.rejects["record"], result.rejects["payload"], strict=True))
    assert payloads["d.csv:5"] == "3,Caf\\xe9 is not UTF-8"  # the bad byte escaped, kept
    assert payloads["d.csv:8"] == '5,"an open quote\n6,to the end\n'  # the rest of the file, whole
    (tmp_path / "t.csv").write_text("body,when\nAspirin treats pain.,1700000000\nFever.,2023-11-14T22:13:20Z\n")
    timed = read_dataset(tmp_path / "t.csv", "csv", text_field="body", time_field="when")
    assert timed.records["time"][0] == timed.records["time"][1]  # Unix seconds as text, and ISO 8601


def test_documents_jsonl_csv_text(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"id": "a", "body": "Aspirin treats pain."}\n{"id": "b", "body": ""}\n')
    jsonl = read_dataset(tmp_path / "d.jsonl", "jsonl", text_field="body", id_field="id")
    assert jsonl.records["record_id"].to_list() == ["a"] and jsonl.rejects.height == 1
    (tmp_path / "d.csv").write_text("id,body\n1,Fever is a symptom of flu.\n2,\n")
    csv = read_dataset(tmp_path / "d.csv", "csv", text_field="body")
    assert csv.accepted == 1 and csv.read == 2
    with pytest.raises(InputDataError, match="no column"):
        read_dataset(tmp_path / "d.csv", "csv", text_field="missing")
    (tmp_path / "t.txt").write_text("One sentence. Another one.")
    assert read_dataset(tmp_path / "t.txt", "text").records["kind"].to_list() == ["text"]
    with pytest.raises(UsageError):
        read_dataset(tmp_path / "t.txt", "xml")  # type: ignore[arg-type]


def test_a_byte_order_mark_does_not_cost_the_first_record(tmp_path: Path) -> None:
    jsonl = tmp_path / "docs.jsonl"
    rows = b'{"id": "d1", "text": "Aspirin treats headache."}\n{"id": "d2", "text": "x"}\n'
    jsonl.write_bytes(b"\xef\xbb\xbf" + rows)
    read = read_dataset(jsonl, "jsonl", id_field="id")
    assert read.accepted == 2 and read.rejects.height == 0
    text = tmp_path / "notes.txt"
    text.write_bytes(b"\xef\xbb\xbfAspirin treats headache.")
    assert read_dataset(text, "text").records["text"][0] == "Aspirin treats headache."


def test_metaqa_lines_and_tsv_keep_every_gold_answer(tmp_path: Path) -> None:
    lines = tmp_path / "qa.txt"
    lines.write_text(
        "what films did [Michelle Trachtenberg] star in\tInspector Gadget|Black Christmas\n"
        "no tab here\n"
        "who wrote [Top Hat]\t \n",
        encoding="utf-8",
    )
    read = read_dataset(lines, "metaqa")
    assert read.records.height == 1 and read.rejects.height == 2
    row = read.records.row(0, named=True)
    assert row["question"] == "what films did Michelle Trachtenberg star in"
    assert row["answers"] == ["Inspector Gadget", "Black Christmas"] and row["answer"] == "Inspector Gadget"
    assert row["concept"] == "Michelle Trachtenberg" and row["option_labels"] == []
    assert sorted(read.rejects["record"]) == ["qa.txt:2", "qa.txt:3"]
    assert "no gold answer" in read.rejects.filter(pl.col("record") == "qa.txt:3")["reason"][0]
    tsv = tmp_path / "closed.tsv"
    tsv.write_text(
        "line_no\tquestion\tanswers\ttopic_entity\trelation_path\n"
        "113\twhat films does [Stephen Gevedon] appear in\tSession 9\tStephen Gevedon\tstarred_actors_reverse\n"
        "7\ttoo\tfew\n",
        encoding="utf-8",
    )
    read = read_dataset(tsv, "metaqa")
    assert read.records["record_id"].to_list() == ["closed.tsv:113"] and read.records["answers"][0].to_list() == [
        "Session 9"
    ]
    assert "3 columns, the header has 5" in read.rejects["reason"][0]


def test_real_metaqa_file(public_file: Callable[[str], Path]) -> None:
    read = read_dataset(public_file("metaqa/qa_test_1hop.txt"), "metaqa", limit=50)
    assert read.records.height == 50 and read.rejects.height == 0
    assert all(row["answers"] and "[" not in row["question"] for row in read.records.iter_rows(named=True))


def test_simplequestions_lines_with_labels_beside_them(tmp_path: Path) -> None:
    path = tmp_path / "sq.txt"
    path.write_text(
        "Q7358590\tP20\tQ1637790\tWhere did roger marquis die\n"
        "Q1\tR31\tQ2\twhat is an instance of universe\n"
        "Q1\tP31\tQ2\n"
        "douglas\tP19\tQ350\twhere was he born\n"
        "Q3\tP19\tQ4\t   \n",
        encoding="utf-8",
    )
    (tmp_path / "simplequestions_wd_labels_en.tsv").write_text("id\tlabel\tn\nQ1637790\tHolyoke\t1\n")
    read = read_dataset(path, "simplequestions")
    assert read.records["answers"].to_list() == [["Holyoke", "Q1637790"], ["Q2"]]  # label first, else the id
    assert read.records["question"].to_list()[0] == "Where did roger marquis die"
    reasons = read.rejects["reason"].to_list()
    assert reasons[0].startswith("a SimpleQuestions line is") and reasons[1].startswith("a SimpleQuestions line")
    assert reasons[2] == "question is empty" and read.rejects["record"].to_list() == [
        "sq.txt:3",
        "sq.txt:4",
        "sq.txt:5",
    ]


def test_real_simplequestions_file(data_dir: Path) -> None:
    read = read_dataset(data_dir / "wikidata" / "simplequestions_wd_test_answerable.txt", "simplequestions")
    assert (
        read.accepted == 5622 and read.rejects.height == 0
    )  # every line of the file (wc -l says 5,621: no final newline)
    labelled = sum(1 for answers in read.records["answers"].to_list() if len(answers) == 2)
    assert labelled > 5500  # nearly every object has its label from the file beside it


def test_the_robodata_authors_queries(data_dir: Path, tmp_path: Path) -> None:
    read = read_dataset(data_dir / "wikidata" / "robodata_experiment_kgs.json", "robodata")
    rows = {r["record_id"]: r for r in read.records.iter_rows(named=True)}
    assert len(rows) == 17 and read.rejects.height == 0
    assert rows["A3"]["question"].startswith("Among the founders of tencent company")
    assert rows["A3"]["answers"] == ["Ma Huateng"]  # the support graph's other entities are named in the question
    assert rows["A1"]["answers"][0] == "Douglas Adams" and rows["C7"]["answers"][:2] == ["Rome", "Tokyo"]
    assert rows["A7"]["answers"] == [] and rows["A7"]["answer"] is None  # reported WRONG: no gold
    assert rows["A7"]["answer_text"] == "The agent failed to produce an answer."
    bad = tmp_path / "experiments.json"
    bad.write_text(json.dumps({"experiments": [{"query": "no id"}, {"paper_query_id": "X1", "query": "Who?"}]}))
    mixed = read_dataset(bad, "robodata")
    assert mixed.records["record_id"].to_list() == ["X1"] and "paper_query_id" in mixed.rejects["reason"][0]
    (tmp_path / "other.json").write_text("[1, 2]")
    with pytest.raises(InputDataError, match="not a RoboData experiment file"):
        read_dataset(tmp_path / "other.json", "robodata")


def test_a_record_id_given_twice_is_kept_once_and_the_repeat_rejected(tmp_path: Path) -> None:
    """Probe round 4: two CommonsenseQA items of one id both went to the model, counted twice in the summary."""
    item = {"id": "dup", "question": "Which?", "choices": {"label": ["A", "B"], "text": ["a", "b"]}, "answerKey": "A"}
    other = dict(item, question="Which other?")
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(i) for i in (item, other)) + "\n")
    read = read_dataset(tmp_path / "d.jsonl", "csqa")
    assert (read.read, read.accepted) == (2, 1) and read.records["question"].to_list() == ["Which?"]
    assert read.rejects.select("record", "check").rows() == [("d.jsonl: id dup", "repeated_id")]
