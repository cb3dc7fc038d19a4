"""The Text2KGBench scorer on scripted cases (each figure's definition), the dataset layout, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from metakg.cli.main import app
from metakg.errors import InputDataError
from metakg.extractors.ontology import ontology_from_json
from metakg.extractors.text2kgbench import (
    BenchOntology,
    Sentence,
    dataset_ontologies,
    read_responses,
    responses_file,
    score_ontology,
    score_sentence,
)

ONTOLOGY = ontology_from_json(
    {
        "id": "ont_1_movie",
        "concepts": [{"qid": "Q5", "label": "human"}, {"qid": "Q11424", "label": "film"}],
        "relations": [
            {"pid": "P57", "label": "director", "domain": "Q11424", "range": "Q5"},
            {"pid": "P161", "label": "cast member", "domain": "Q11424", "range": "Q5"},
            {"pid": "P1347", "label": "casualty ", "domain": "Q5", "range": "Q5"},
        ],
    }
)
SENTENCE = Sentence(
    "s1",
    "Bleach: Hell Verse is a 2010 Japanese animated film directed by Noriyuki Abe, starring Masakazu Morita.",
    (("Bleach : Hell Verse", "director", "Noriyuki Abe"), ("Bleach : Hell Verse", "cast member", "Masakazu Morita")),
)


def test_precision_judges_only_triples_with_a_gold_relation_and_compares_without_spaces_or_case() -> None:
    score = score_sentence(
        ONTOLOGY,
        SENTENCE,
        [
            ["bleach: hell verse", "director", "noriyuki_abe"],  # the gold triple, written differently
            ["Bleach: Hell Verse", "producer", "Noriyuki Abe"],  # not a gold relation: not judged
            ["Bleach: Hell Verse", "cast_member", "Toho"],  # judged, wrong
        ],
    )
    assert [t[1] for t in score.judged] == ["director", "cast_member"]
    assert (score.precision, score.recall) == (0.5, 0.5) and score.f1 == pytest.approx(0.5)
    assert score.onto_conf == pytest.approx(2 / 3) and score.rel_halluc == pytest.approx(1 / 3)
    # Toho is nowhere in the sentence or the class labels; the subjects all are
    assert score.sub_halluc == 0.0 and score.obj_halluc == pytest.approx(1 / 3)


def test_a_relation_with_a_space_is_not_the_gold_relation_written_with_an_underscore() -> None:
    score = score_sentence(ONTOLOGY, SENTENCE, [["Bleach: Hell Verse", "cast member", "Masakazu Morita"]])
    assert score.judged == () and score.precision == 0.0 and score.onto_conf == 0.0


def test_hallucination_is_checked_on_stems_against_the_sentence_and_the_class_labels() -> None:
    score = score_sentence(
        ONTOLOGY,
        SENTENCE,
        [
            ["Bleach: Hell Verse", "director", "films"],  # "films" stems to "film", which the sentence has
            ["Humans", "director", "Noriyuki Abe"],  # a class label, stemmed
            ["Akira", "director", "Noriyuki Abe 01 January"],  # "01 January" dropped, as the benchmark does
        ],
    )
    assert score.sub_halluc == pytest.approx(1 / 3) and score.obj_halluc == 0.0


def test_no_response_counts_zero_and_an_empty_one_is_conformant() -> None:
    missing = score_sentence(ONTOLOGY, SENTENCE, None)
    empty = score_sentence(ONTOLOGY, SENTENCE, [])
    assert not missing.answered and missing.onto_conf == 0.0
    assert empty.answered and (empty.precision, empty.onto_conf, empty.sub_halluc) == (0.0, 1.0, 0.0)


def test_labels_are_taken_as_written_for_conformance() -> None:
    score = score_sentence(ONTOLOGY, SENTENCE, [["a", "casualty_", "b"], ["a", "casualty", "b"]])
    assert score.onto_conf == 0.5


def test_an_ontology_average_runs_over_every_ground_truth_sentence(tmp_path: Path) -> None:
    bench = BenchOntology("1_movie", ONTOLOGY, tmp_path / "gt.jsonl", None, None)
    other = Sentence(
        "s2", "Spirited Away was directed by Hayao Miyazaki.", (("Spirited Away", "director", "Hayao Miyazaki"),)
    )
    score = score_ontology(bench, [SENTENCE, other], {"s2": [["Spirited Away", "director", "Hayao Miyazaki"]]})
    assert (score.sentences, score.answered) == (2, 1)
    assert score.averages["f1"] == 0.5 and score.averages["onto_conf"] == 0.5


def dataset(tmp_path: Path) -> Path:
    """A two-ontology dataset in Text2KGBench's layout, with a response folder."""
    root = tmp_path / "bench"
    for folder in ("ontologies", "ground_truth", "test", "responses"):
        (root / folder).mkdir(parents=True)
    for number, name in ((1, "movie"), (11, "movie")):
        onto = {
            "id": f"ont_{number}_{name}",
            "concepts": [{"qid": "Q5", "label": "human"}, {"qid": "Q11424", "label": "film"}],
            "relations": [{"pid": "P57", "label": "director", "domain": "Q11424", "range": "Q5"}],
        }
        (root / "ontologies" / f"{number}_{name}_ontology.json").write_text(json.dumps(onto))
        rows = [
            {"id": f"ont_{number}_{name}_test_{i}", "sent": f"Film {i} was directed by Ann Lee {i}.",
             "triples": [{"sub": f"Film {i}", "rel": "director", "obj": f"Ann Lee {i}"}]}
            for i in (1, 2)
        ]  # fmt: skip
        (root / "ground_truth" / f"ont_{number}_{name}_ground_truth.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows)
        )
    answers = [
        {"id": "ont_1_movie_test_1", "triples": [["Film 1", "director", "Ann Lee 1"]]},
        {"id": "ont_1_movie_test_2", "response": "director(Film 2, Bob)\nsome prose"},
    ]
    (root / "responses" / "ont_1_movie_llm_responses.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
    return root


def test_the_layout_response_files_and_ontology_ids(tmp_path: Path) -> None:
    root = dataset(tmp_path)
    assert [b.short_id for b in dataset_ontologies(root)] == ["1_movie", "11_movie"]
    assert [b.id for b in dataset_ontologies(root, ["ont_11_movie"])] == ["ont_11_movie"]
    assert len(dataset_ontologies(root, ["movie"])) == 2
    with pytest.raises(InputDataError, match="no ontology '2_music'; there are 1_movie, 11_movie"):
        dataset_ontologies(root, ["2_music"])
    with pytest.raises(InputDataError, match="not a Text2KGBench dataset folder"):
        dataset_ontologies(tmp_path)
    assert responses_file(root / "responses", "1_movie") is not None
    assert responses_file(root / "responses", "11_movie") is None  # 1_movie's file is not 11_movie's
    parsed = read_responses(root / "responses" / "ont_1_movie_llm_responses.jsonl")
    assert parsed == {
        "ont_1_movie_test_1": [["Film 1", "director", "Ann Lee 1"]],
        "ont_1_movie_test_2": [["Film 2", "director", "Bob"]],
    }


def test_a_bad_response_file_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "a", "triples": [["x", "y"]]}\n')
    with pytest.raises(InputDataError, match=r"r\.jsonl: line 1: 'triples' must be a list of \[subject"):
        read_responses(path)
    path.write_text('{"id": "a", "triples": []}\nnot json\n')
    with pytest.raises(InputDataError, match=r"line 2: not JSON"):
        read_responses(path)
    path.write_bytes(b'{"id": "caf\xe9", "triples": []}\n')  # Latin-1, not UTF-8
    with pytest.raises(InputDataError, match=r"r\.jsonl: cannot read"):
        read_responses(path)


def test_the_command_prints_the_table_and_json_and_writes_the_rows(tmp_path: Path) -> None:
    root = dataset(tmp_path)
    out = tmp_path / "out"
    runner = CliRunner()
    result = runner.invoke(
        app, ["eval-extraction", str(root), "--responses", str(root / "responses"), "-o", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout.strip().splitlines()[-1])
    assert payload["ok"] and payload["command"] == "eval-extraction"
    first, second = payload["ontologies"]
    assert set(first) == {"ontology", "sentences", "answered", "precision", "recall", "f1", "onto_conf",
                          "sub_halluc", "rel_halluc", "obj_halluc"}  # fmt: skip
    assert (first["ontology"], first["sentences"], first["answered"], first["f1"]) == ("1_movie", 2, 2, 0.5)
    assert first["obj_halluc"] == 0.5  # "Bob" is not in the sentence
    assert (second["answered"], second["f1"], payload["missing_responses"]) == (0, 0.0, ["11_movie"])
    assert payload["average"]["f1"] == 0.25
    rows = [json.loads(line) for line in (out / "1_movie.jsonl").read_text().splitlines()]
    assert [r["f1"] for r in rows] == [1.0, 0.0]
    assert "| **average** | 4 | 2 |" in (out / "summary.md").read_text()
    text = runner.invoke(app, ["eval-extraction", str(root), "--responses", str(root / "responses"), "--limit", "1"])
    assert "| 1_movie | 1 | 1 | 1.00 |" in text.stdout and "no response file for 11_movie" in text.stderr
    bad = runner.invoke(app, ["eval-extraction", str(root), "--responses", str(root), "--ontology", "x", "--json"])
    assert bad.exit_code == 1 and "no ontology 'x'" in json.loads(bad.stdout.strip().splitlines()[-1])["error"]


def test_metakg_s_own_extraction_is_scored_through_a_real_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """eval-extraction without --responses: one prompt per sentence to the endpoint (an HTTP server here,
    answering from the prompt), the schema sent as the response format, replies checked against the ontology
    and scored; a rerun comes from the reply cache."""
    from tests.fault_server import FaultServer

    root = dataset(tmp_path)
    (root / "train").mkdir()
    (root / "train" / "ont_1_movie_train.jsonl").write_text(
        json.dumps({"sent": "Film 9 was directed by Cy Day.", "sub_label": "Film 9", "rel_label": "director",
                    "obj_label": "Cy Day"}) + "\n"
    )  # fmt: skip

    def reply(body: dict[str, object]) -> str:
        asked = str(body["messages"][-1]["content"])  # type: ignore[index]
        number = asked.split("Film ", 1)[1].split(" ", 1)[0]
        triples = [{"subject": f"Film {number}", "relation": "director", "object": f"Ann Lee {number}",
                    "subject_type": "film", "object_type": "human"},
                   {"subject": "Ann Lee", "relation": "director", "object": "Film", "subject_type": "human",
                    "object_type": "film"}]  # fmt: skip
        return json.dumps({"triples": triples if number == "1" else triples[1:]})

    server = FaultServer().start()
    server.reply_for = reply
    try:
        monkeypatch.setenv("METAKG_LLM__BASE_URL", server.url)
        monkeypatch.setenv("METAKG_LLM__MODEL", "scripted")
        monkeypatch.setenv("METAKG_PATHS__CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.setenv("METAKG_EXTRACT__EMBEDDINGS", "false")
        args = ["eval-extraction", str(root), "--ontology", "1_movie", "--json"]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        payload = json.loads(result.stdout.strip().splitlines()[-1])
        (row,) = payload["ontologies"]
        # sentence 1: the right triple kept, the reversed one refused at the gate; sentence 2: nothing kept
        assert (row["answered"], row["precision"], row["recall"], row["onto_conf"]) == (2, 0.5, 0.5, 1.0)
        assert payload["run"]["prompts"] == 2 and payload["run"]["outside_ontology"] == 2
        assert payload["run"]["llm_calls"] == 2 and payload["run"]["cache_hits"] == 0
        sent = server.requests[0]
        schema = sent["response_format"]
        schema = schema.get("json_schema", {}).get("schema") or schema.get("schema")
        assert schema["properties"]["triples"]["items"]["anyOf"][0]["properties"]["relation"] == {"const": "director"}
        assert "Film 9 was directed by Cy Day." in json.dumps(sent["messages"])  # the worked example
        again = json.loads(CliRunner().invoke(app, args).stdout.strip().splitlines()[-1])
        assert again["run"]["cache_hits"] == 2 and len(server.requests) == 2
        lines = CliRunner().invoke(app, [*args, "--prompt", "untyped", "--no-examples"])
        assert lines.exit_code == 0 and "response_format" not in server.requests[-1]
    finally:
        server.stop()
