"""Text2KGBench (Mihindukulasooriya et al., ISWC 2023, arXiv 2308.02357): the dataset layout and its scorer.

A dataset folder holds ``ontologies/<n>_<name>_ontology.json``, ``test/ont_<n>_<name>_test.jsonl`` (``{"id",
"sent"}``), ``ground_truth/ont_<n>_<name>_ground_truth.jsonl`` (``{"id", "sent", "triples": [{"sub", "rel",
"obj"}]}``) and ``train/`` in the test files' form with gold triples. System triples are ``[subject, relation,
object]`` with the relation written as the ontology's label, spaces as underscores.

Each sentence gets the benchmark's seven figures:

- precision, recall, F1: over the system triples whose relation is one of the sentence's gold relations (the
  others cannot be judged against this gold), triples compared after lower-casing and removing spaces and
  underscores; no triple left gives 0 for all three;
- ontology conformance: the share of all system triples whose relation is in the ontology (1 with no
  triple), and relation hallucination, its complement;
- subject and object hallucination: the share of triples whose subject (object) is not found, stemmed and
  folded, in the stemmed and folded text of the sentence followed by the ontology's class labels (0 with no
  triple).

An ontology's averages run over every ground-truth sentence, a sentence without a response counting 0 for
every figure: this is how the published averages were computed. The dataset's average is the mean of its
ontologies'. Stemming is Porter's (NLTK); tokens come from NLTK's Treebank-style word tokenizer over the
sentences a Punkt model finds that knows common abbreviations (the trained model is a download, which metakg
does not need).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from metakg.errors import InputDataError
from metakg.extractors.ontology import Ontology, read_ontology

#: the seven figures, in the benchmark's order
METRICS = ("precision", "recall", "f1", "onto_conf", "sub_halluc", "rel_halluc", "obj_halluc")

Triple = tuple[str, str, str]


@dataclass(frozen=True)
class Sentence:
    """One test sentence and its gold triples."""

    id: str
    text: str
    gold: tuple[Triple, ...] = ()


@dataclass(frozen=True)
class BenchOntology:
    """One ontology of a dataset: its short id (``1_movie``), the ontology, and where its files are."""

    short_id: str
    ontology: Ontology
    ground_truth: Path
    test: Path | None
    train: Path | None

    @property
    def id(self) -> str:
        """The ontology's id as the dataset writes it (``ont_1_movie``)."""
        return f"ont_{self.short_id}"


@dataclass(frozen=True)
class Responses:
    """A system's answers for some sentences: each answered sentence's triples by id (a sentence left out has
    no response), and figures of the run that made them (calls, tokens, seconds)."""

    answers: dict[str, list[list[str]]]
    figures: dict[str, int | float] = field(default_factory=dict)


@dataclass(frozen=True)
class SentenceScore:
    """The seven figures of one sentence; ``answered`` is False for a sentence without a response."""

    id: str
    precision: float = 0.0
    recall: float = 0.0
    f1: float = 0.0
    onto_conf: float = 0.0
    sub_halluc: float = 0.0
    rel_halluc: float = 0.0
    obj_halluc: float = 0.0
    answered: bool = False
    triples: tuple[Triple, ...] = ()
    judged: tuple[Triple, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The per-sentence row: figures, the system triples and those judged against the gold."""
        return {
            "id": self.id,
            "answered": self.answered,
            **{m: round(getattr(self, m), 4) for m in METRICS},
            "triples": [list(t) for t in self.triples],
            "judged_triples": [list(t) for t in self.judged],
        }


@dataclass
class OntologyScore:
    """The averages of one ontology over its ground-truth sentences (unanswered ones count 0)."""

    ontology: str
    sentences: int
    answered: int
    averages: dict[str, float]
    rows: list[SentenceScore] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The JSON row: ``{"ontology", "sentences", "answered", "precision", ...}``."""
        return {
            "ontology": self.ontology,
            "sentences": self.sentences,
            "answered": self.answered,
            **{m: round(self.averages[m], 4) for m in METRICS},
        }


def score_sentence(ontology: Ontology, sentence: Sentence, triples: Sequence[Sequence[str]] | None) -> SentenceScore:
    """The seven figures of one sentence; ``triples`` None means the system gave no response for it."""
    if triples is None:
        return SentenceScore(sentence.id)
    system = tuple((str(t[0]), str(t[1]), str(t[2])) for t in triples)
    gold_relations = {rel.replace(" ", "_") for _, rel, _ in sentence.gold}
    judged = tuple(t for t in system if t[1] in gold_relations)
    precision, recall, f1 = _prf({_folded(*t) for t in sentence.gold}, {_folded(*t) for t in judged})
    written = {r.written for r in ontology.relations}
    onto_conf = sum(1 for t in system if t[1] in written) / len(system) if system else 1.0
    sub_halluc, obj_halluc = _hallucinations(ontology, sentence.text, system)
    return SentenceScore(
        sentence.id,
        precision,
        recall,
        f1,
        onto_conf,
        sub_halluc,
        1.0 - onto_conf,
        obj_halluc,
        answered=True,
        triples=system,
        judged=judged,
    )


def score_ontology(
    bench: BenchOntology, sentences: Sequence[Sentence], responses: Mapping[str, Sequence[Sequence[str]]]
) -> OntologyScore:
    """Score every ground-truth sentence (those without a response count 0) and average."""
    rows = [score_sentence(bench.ontology, s, responses.get(s.id)) for s in sentences]
    count = len(rows)
    averages = {m: (sum(getattr(r, m) for r in rows) / count if count else 0.0) for m in METRICS}
    return OntologyScore(bench.short_id, count, sum(r.answered for r in rows), averages, rows)


def dataset_average(scores: Sequence[OntologyScore]) -> dict[str, float]:
    """The mean of the ontologies' averages, as the benchmark reports a dataset."""
    if not scores:
        return dict.fromkeys(METRICS, 0.0)
    return {m: sum(s.averages[m] for s in scores) / len(scores) for m in METRICS}


def _prf(gold: set[str], predicted: set[str]) -> tuple[float, float, float]:
    if not predicted or not gold:
        return 0.0, 0.0, 0.0
    hits = len(gold & predicted)
    precision, recall = hits / len(predicted), hits / len(gold)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


_SPACE_OR_UNDERSCORE = re.compile(r"(_|\s+)")


def _folded(*parts: str) -> str:
    """A triple as one string for comparison: each part lower-cased without spaces and underscores."""
    return "".join(_SPACE_OR_UNDERSCORE.sub("", p).lower() for p in parts)


def _hallucinations(ontology: Ontology, text: str, triples: Sequence[Triple]) -> tuple[float, float]:
    if not triples:
        return 0.0, 0.0
    # the sentence runs straight into the class labels, as in the benchmark's own scorer
    context = _stemmed(text + " ".join(c.label for c in ontology.classes.values() if c.declared))
    subjects = sum(1 for t in triples if _stemmed(t[0]).replace("01januari", "") not in context)
    objects = sum(1 for t in triples if _stemmed(t[2]).replace("01januari", "") not in context)
    return subjects / len(triples), objects / len(triples)


@lru_cache(maxsize=65536)
def _stemmed(text: str) -> str:
    """Stem every token and join them with nothing, then drop spaces and underscores and lower-case."""
    return _SPACE_OR_UNDERSCORE.sub("", "".join(_stem(token) for token in _tokens(text))).lower()


#: abbreviations a sentence does not end at (the trained English Punkt model knows these and many more)
ABBREVIATIONS = frozenset(
    (
        *("u.s", "u.s.a", "u.k", "u.n", "e.g", "i.e", "etc", "vs", "a.d", "b.c", "no", "vol", "fig", "approx", "est"),
        *("dr", "mr", "mrs", "ms", "prof", "st", "mt", "ft", "jr", "sr", "inc", "co", "corp", "ltd", "ave", "blvd"),
        *("gen", "col", "lt", "sgt", "capt", "gov", "sen", "rep"),
        *("jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"),
    )
)


@lru_cache(maxsize=1)
def _nltk() -> tuple[Any, Any, Any]:
    from nltk.stem import PorterStemmer
    from nltk.tokenize import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    parameters = PunktParameters()
    parameters.abbrev_types = set(ABBREVIATIONS)
    return PunktSentenceTokenizer(parameters), NLTKWordTokenizer(), PorterStemmer()


def _tokens(text: str) -> Iterator[str]:
    sentences, words, _ = _nltk()
    for sentence in sentences.tokenize(text):
        yield from words.tokenize(sentence)


@lru_cache(maxsize=262144)
def _stem(token: str) -> str:
    return str(_nltk()[2].stem(token))


# --- the dataset folder -----------------------------------------------------------------------------------------


def dataset_ontologies(folder: Path, wanted: Iterable[str] = ()) -> list[BenchOntology]:
    """The ontologies of a Text2KGBench-layout folder, in their number order; ``wanted`` picks some by id
    (``ont_1_movie``, ``1_movie`` or ``movie``)."""
    if not (folder / "ontologies").is_dir() or not (folder / "ground_truth").is_dir():
        raise InputDataError(f"{folder}: not a Text2KGBench dataset folder (it needs ontologies/ and ground_truth/)")
    found: list[BenchOntology] = []
    for path in folder.glob("ontologies/*_ontology.json"):
        short = path.name.removesuffix("_ontology.json").removeprefix("ont_")
        truth = folder / "ground_truth" / f"ont_{short}_ground_truth.jsonl"
        if not truth.is_file():
            continue
        test, train = folder / "test" / f"ont_{short}_test.jsonl", folder / "train" / f"ont_{short}_train.jsonl"
        found.append(
            BenchOntology(
                short,
                read_ontology(path, strict=False),
                truth,
                test if test.is_file() else None,
                train if train.is_file() else None,
            )
        )
    found.sort(key=lambda b: (int(b.short_id.split("_")[0]) if b.short_id.split("_")[0].isdigit() else 0, b.short_id))
    if not found:
        raise InputDataError(f"{folder}: no ontology with a ground-truth file")
    picks = [w.strip() for w in wanted if w.strip()]
    if not picks:
        return found
    chosen: list[BenchOntology] = []
    for pick in picks:
        match = [b for b in found if pick in (b.id, b.short_id, b.short_id.split("_", 1)[-1])]
        if not match:
            raise InputDataError(f"{folder}: no ontology {pick!r}; there are {', '.join(b.short_id for b in found)}")
        chosen.extend(b for b in match if b not in chosen)
    return chosen


def read_sentences(path: Path, limit: int | None = None) -> list[Sentence]:
    """Sentences of a test, train or ground-truth file (gold triples where the file has them)."""
    sentences: list[Sentence] = []
    for number, row in jsonl_rows(path):
        try:
            gold = tuple((str(t["sub"]), str(t["rel"]), str(t["obj"])) for t in row.get("triples") or [])
            sentences.append(Sentence(str(row["id"]), str(row["sent"]), gold))
        except (KeyError, TypeError) as e:
            raise InputDataError(f"{path}: line {number}: expected {{'id', 'sent', 'triples'}}: {e}") from e
        if limit is not None and len(sentences) >= limit:
            break
    return sentences


def responses_file(folder: Path, short_id: str) -> Path | None:
    """The response file of an ontology in a folder of them: the one whose name holds its short id
    (``1_movie`` in ``ont_1_movie_llm_responses.jsonl``, never in ``ont_11_movie...``)."""
    pattern = re.compile(rf"(?<![0-9A-Za-z]){re.escape(short_id)}(?![0-9A-Za-z])")
    matches = sorted(p for p in folder.glob("*.jsonl") if pattern.search(p.name))
    if len(matches) > 1:
        raise InputDataError(f"{folder}: several response files for {short_id}: {', '.join(p.name for p in matches)}")
    return matches[0] if matches else None


_CALL = re.compile(r"^\s*([^\s(][^(]*)\((.*)\)\s*$")


def read_responses(path: Path) -> dict[str, list[list[str]]]:
    """A response file: ``{"id", "triples": [[s, r, o], ...]}`` per line, or ``{"id", "response"}`` with
    ``relation(subject, object)`` lines, the form the benchmark's prompts ask for."""
    responses: dict[str, list[list[str]]] = {}
    for number, row in jsonl_rows(path):
        if "id" not in row:
            raise InputDataError(f"{path}: line {number}: no 'id'")
        triples = row.get("triples")
        if triples is None:
            triples = [t for line in str(row.get("response") or "").splitlines() if (t := _call_triple(line))]
        if not isinstance(triples, list) or not all(isinstance(t, list | tuple) and len(t) == 3 for t in triples):
            raise InputDataError(f"{path}: line {number}: 'triples' must be a list of [subject, relation, object]")
        responses[str(row["id"])] = [[str(x) for x in t] for t in triples]
    return responses


def _call_triple(line: str) -> list[str] | None:
    match = _CALL.match(line)
    if match is None or "," not in match.group(2):
        return None
    subject, _, obj = match.group(2).partition(",")
    return [subject.strip(), match.group(1).strip().replace("\\_", "_"), obj.strip()]


def jsonl_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSON Lines file with their line numbers (blank lines skipped).

    Raises:
        InputDataError: the file cannot be read or is not UTF-8, or a line is not a JSON object (named).
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise InputDataError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from e
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputDataError(f"{path}: line {number}: not JSON: {e.msg}") from e
        if not isinstance(row, dict):
            raise InputDataError(f"{path}: line {number}: expected a JSON object")
        yield number, row
