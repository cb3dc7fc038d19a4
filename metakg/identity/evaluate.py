"""How right identity decisions are: precision, recall and F1 of each scorer against gold mappings.

Two kinds of gold:

- **pairs**: two names and whether they are one entity (biomappings' reviewed right and wrong mappings,
  SSSOM files). A scorer calls a pair one entity when its score reaches the threshold; precision is the
  share of those calls that are right, recall the share of the true pairs called. Two ids whose
  namespaces imply types that cannot be one entity (an ``ncbitaxon:`` taxon, a ``doid:`` disease), or of
  which one is about another organism (Reactome's cattle pathway and a MeSH term), are never called one,
  whatever their names: ``metakg resolve`` keeps such nodes apart (:meth:`GoldPairs.kept_apart`).
- **links**: a mention and the entity it names, among a catalog of entities (DrugBank's synonyms to its
  drugs, Wikidata aliases to their items, phenotype synonyms to their terms). A scorer links a mention to
  its best candidate when the score reaches the threshold and beats the best other entity by the scorer's
  link margin (:data:`metakg.identity.names.DEFAULT_LINKS`); precision is the share of links to the right
  entity, recall the share of mentions linked right, and ``unlinkable`` the share of mentions that would
  still be linked, wrongly, were their entity missing from the catalog.

Every gold set is split in two halves by a hash of its gold id (BLAKE2b of the id, even: tuning, odd:
held out), so an id's rows are all on one side. The operating point of a scorer is the threshold with the
best F1 on the tuning half among those with precision at or above the target (0.95; the best F1 when
none reaches it); the figures reported are the held-out half's at that threshold.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl

from metakg.errors import InputDataError
from metakg.identity.clusters import compatible_types
from metakg.identity.names import (
    DEFAULT_LINKS,
    DEFAULT_THRESHOLDS,
    SCORERS,
    LinkRule,
    NameTable,
    Scorer,
    candidates,
    keys_of,
    pair_scores,
)
from metakg.llm.embedder import Embedder
from metakg.schemas.vocabulary import TypeVocabulary, default_vocabulary
from metakg.textfiles import as_utf8, strip_bom

GoldFormat = Literal["sssom", "sssom-links", "drugbank", "kgtk", "ssslm", "pubtator"]
GOLD_FORMATS: tuple[GoldFormat, ...] = ("sssom", "sssom-links", "drugbank", "kgtk", "ssslm", "pubtator")

#: the precision an operating point must reach on the tuning half
TARGET_PRECISION = 0.95
#: the thresholds tried: 0.50 to 1.00 by 0.01
GRID = [round(0.5 + i / 100, 2) for i in range(51)]


def half(key: str) -> int:
    """0 (tuning) or 1 (held out): the parity of the first byte of BLAKE2b(key)."""
    return hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()[0] % 2


@dataclass(frozen=True)
class GoldPairs:
    """Labelled name pairs: ``match[i]`` says whether ``left[i]`` and ``right[i]`` are one entity;
    ``left_ids`` and ``right_ids`` (when the gold names them) the two entities' ids, whose namespaces may
    imply types that cannot be one entity's (a taxon and a disease)."""

    name: str
    left: list[str]
    right: list[str]
    match: list[bool]
    keys: list[str]  # the gold id each row is split by
    left_ids: list[str] = field(default_factory=list)
    right_ids: list[str] = field(default_factory=list)

    def kept_apart(self, vocabulary: TypeVocabulary) -> np.ndarray:
        """Per pair, True when its ids cannot be one entity's whatever the names, as ``metakg resolve`` keeps
        such nodes apart: the types their namespaces imply do not fit (a taxon and a disease), or one is
        about another organism than the other (a cattle pathway of Reactome and a MeSH term); all False
        without ids."""
        if not self.left_ids:
            return np.zeros(len(self.left), dtype=bool)
        return np.array(
            [
                not compatible_types([t for t in (vocabulary.id_type(a), vocabulary.id_type(b)) if t], vocabulary)
                or vocabulary.organisms_apart(a, b)
                for a, b in zip(self.left_ids, self.right_ids, strict=True)
            ],
            dtype=bool,
        )


@dataclass(frozen=True)
class GoldLinks:
    """Mentions with the entity each names, and the catalog of entities (one row per entity name)."""

    name: str
    mentions: list[str]
    gold: list[str]
    catalog_ids: list[str]
    catalog_names: list[str]


Gold = GoldPairs | GoldLinks


def _open_text(path: Path) -> io.TextIOBase:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputDataError(f"cannot read the gold file {path}: {e.strerror or e}.") from e
    raw = strip_bom(as_utf8(raw, path))
    try:
        return io.StringIO(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise InputDataError(f"{path}, line {line}: not UTF-8 text (byte {e.start}).") from e


def _rows(path: Path, delimiter: str, needed: Sequence[str]) -> Iterable[tuple[int, dict[str, str]]]:
    """The rows of a delimited file with a header (``#`` comment lines before it skipped), checked to have
    the ``needed`` columns; yields (line number, row)."""
    text = _open_text(path)
    lines = [line for line in text.read().splitlines()]
    start = 0
    while start < len(lines) and lines[start].startswith("#"):
        start += 1
    reader = csv.DictReader(lines[start:], delimiter=delimiter)
    missing = [c for c in needed if c not in (reader.fieldnames or [])]
    if missing:
        raise InputDataError(
            f"{path}: no column {', '.join(missing)} in the header (found: {', '.join(reader.fieldnames or [])})."
        )
    for number, row in enumerate(reader, start=start + 2):
        if None in row:
            raise InputDataError(f"{path}, line {number}: more fields than the header has.")
        short = [c for c in needed if row[c] is None]
        if short:
            raise InputDataError(f"{path}, line {number}: fewer fields than the header has (no {', '.join(short)}).")
        yield number, row


def read_sssom(path: Path, negatives: Path | None = None, *, name: str | None = None) -> GoldPairs:
    """Labelled pairs from SSSOM files: a row is a true pair, or a wrong one when its ``predicate_modifier``
    is ``Not`` (biomappings' negatives); ``negatives``: a second file of wrong pairs. Rows without both
    labels are left out (the scorers compare names).

    Raises:
        InputDataError: a file cannot be read or lacks a column, naming it.
    """
    left, right, match, keys, left_ids, right_ids = [], [], [], [], [], []
    for file in [path] + ([negatives] if negatives else []):
        for _number, row in _rows(file, "\t", ("subject_id", "subject_label", "object_id", "object_label")):
            if not row["subject_label"] or not row["object_label"]:
                continue
            left.append(row["subject_label"])
            right.append(row["object_label"])
            match.append((row.get("predicate_modifier") or "").strip() != "Not")
            keys.append(row["subject_id"])
            left_ids.append(row["subject_id"])
            right_ids.append(row["object_id"])
    if not left:
        raise InputDataError(f"{path}: no labelled pair to evaluate.")
    return GoldPairs(name or path.name, left, right, match, keys, left_ids, right_ids)


def read_labels(path: Path) -> dict[str, str]:
    """A JSON object of id -> label (MeSH descriptor ids to names, underscores as blanks), keyed by the id's
    local part (``D000544`` for ``mesh:D000544``).

    Raises:
        InputDataError: the file cannot be read or is not such an object.
    """
    text = _open_text(path).read()
    try:
        found = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputDataError(f"{path}: not JSON (line {e.lineno}, column {e.colno}: {e.msg}).") from e
    if not isinstance(found, dict) or not all(isinstance(v, str) for v in found.values()):
        raise InputDataError(f"{path}: expected a JSON object of id -> label.")
    return {str(k).rsplit(":", 1)[-1]: v.replace("_", " ") for k, v in found.items()}


def read_sssom_links(path: Path, labels: Path | None = None, *, name: str | None = None) -> GoldLinks:
    """An SSSOM file of exact matches as links (MONDO to DOID, MeSH, UMLS): each subject label names its
    object; the catalog is every object label, or every entry of ``labels`` (:func:`read_labels`) when
    given, for files without object labels. A set without wrong mappings is measured this way, where a
    link to the wrong object is the error.

    Raises:
        InputDataError: a file cannot be read or lacks a column.
    """
    names_of = read_labels(labels) if labels is not None else None
    needed = ("subject_id", "subject_label", "object_id") + (() if names_of is not None else ("object_label",))
    ids, names, mentions, gold = [], [], [], []
    for _number, row in _rows(path, "\t", needed):
        if (row.get("predicate_modifier") or "").strip() == "Not" or not row["subject_label"]:
            continue
        if names_of is None:
            if not row["object_label"]:
                continue
            ids.append(row["object_id"])
            names.append(row["object_label"])
        elif row["object_id"].rsplit(":", 1)[-1] not in names_of:
            continue
        mentions.append(row["subject_label"])
        gold.append(row["object_id"])
    if names_of is not None:
        prefix = gold[0].rsplit(":", 1)[0] + ":" if gold and ":" in gold[0] else ""
        ids = [prefix + k for k in names_of]
        names = list(names_of.values())
    return _distinct_mentions(name or path.name, mentions, gold, ids, names)


def read_pubtator(path: Path, labels: Path, *, name: str | None = None) -> GoldLinks:
    """Annotated mentions of a PubTator corpus (BC5CDR, NCBI-disease: ``pmid, start, end, mention, type,
    MeSH id`` rows) as links: each mention names its MeSH entry; the catalog is ``labels`` (MeSH id ->
    name, :func:`read_labels`). Mentions with several ids, none, or an id the labels lack are left out.

    Raises:
        InputDataError: a file cannot be read or holds no annotation.
    """
    names_of = read_labels(labels)
    mentions, gold = [], []
    for line in _open_text(path).read().splitlines():
        fields = line.split("\t")
        if len(fields) < 6 or not fields[1].isdigit():
            continue
        entry = fields[5].strip().removeprefix("MESH:")
        if entry in names_of:
            mentions.append(fields[3])
            gold.append(f"mesh:{entry}")
    if not mentions:
        raise InputDataError(f"{path}: no annotated mention with a MeSH id the labels know.")
    return _distinct_mentions(
        name or path.name, mentions, gold, [f"mesh:{k}" for k in names_of], list(names_of.values())
    )


def read_drugbank(path: Path, *, name: str | None = None) -> GoldLinks:
    """DrugBank's open vocabulary as links: each synonym (not the common name itself) names its drug; the
    catalog is the drugs' common names.

    Raises:
        InputDataError: the file cannot be read or lacks a column.
    """
    ids, names, mentions, gold = [], [], [], []
    for _number, row in _rows(path, ",", ("DrugBank ID", "Common name", "Synonyms")):
        drug, common = row["DrugBank ID"].strip(), row["Common name"].strip()
        if not drug or not common:
            continue
        ids.append(drug)
        names.append(common)
        for synonym in (row["Synonyms"] or "").split(" | "):
            if synonym.strip():
                mentions.append(synonym.strip())
                gold.append(drug)
    return _distinct_mentions(name or path.name, mentions, gold, ids, names)


def read_kgtk(labels: Path, aliases: Path, *, name: str | None = None) -> GoldLinks:
    """KGTK label and alias files (``node1``, ``label``, ``node2`` = ``'text'@en``) as links: each alias
    names its item; the catalog is the items' labels.

    Raises:
        InputDataError: a file cannot be read or lacks a column.
    """

    def text(value: str) -> str:
        body = value.rsplit("@", 1)[0] if "@" in value else value
        return body[1:-1] if len(body) >= 2 and body[0] == body[-1] == "'" else body

    ids, names = [], []
    for _number, row in _rows(labels, "\t", ("node1", "label", "node2")):
        if row["label"] == "label":
            ids.append(row["node1"])
            names.append(text(row["node2"]))
    mentions, gold = [], []
    for _number, row in _rows(aliases, "\t", ("node1", "label", "node2")):
        if row["label"] == "alias":
            mentions.append(text(row["node2"]))
            gold.append(row["node1"])
    return _distinct_mentions(name or aliases.name, mentions, gold, ids, names)


def read_ssslm(path: Path, *, name: str | None = None) -> GoldLinks:
    """An SSSLM synonym table (``text``, ``curie``, ``predicate``) as links: each synonym names its term;
    the catalog is the terms' labels (``rdfs:label`` rows).

    Raises:
        InputDataError: the file cannot be read or lacks a column.
    """
    ids, names, mentions, gold = [], [], [], []
    for _number, row in _rows(path, "\t", ("text", "curie", "predicate")):
        if row["predicate"] == "rdfs:label":
            ids.append(row["curie"])
            names.append(row["text"])
        elif row["predicate"] in ("oboInOwl:hasExactSynonym", "skos:exactMatch"):
            mentions.append(row["text"])
            gold.append(row["curie"])
    return _distinct_mentions(name or path.name, mentions, gold, ids, names)


def _distinct_mentions(name: str, mentions: list[str], gold: list[str], ids: list[str], names: list[str]) -> GoldLinks:
    """Links whose mention is not already a catalog name of its entity (those would be free hits) and not
    ambiguous (one mention naming two entities), each once."""
    if not names:
        raise InputDataError(f"{name}: no catalog entity to link to.")
    own = {(i, k) for i, k in zip(ids, keys_of(names), strict=True)}
    keys = keys_of(mentions)
    entities_of: dict[str, set[str]] = {}
    for key, entity in zip(keys, gold, strict=True):
        entities_of.setdefault(key, set()).add(entity)
    seen: set[str] = set()
    kept_m, kept_g = [], []
    for mention, key, entity in zip(mentions, keys, gold, strict=True):
        if not key or (entity, key) in own or len(entities_of[key]) > 1 or key in seen:
            continue
        seen.add(key)
        kept_m.append(mention)
        kept_g.append(entity)
    if not kept_m:
        raise InputDataError(f"{name}: no mention to evaluate (every one is a catalog name or ambiguous).")
    return GoldLinks(name, kept_m, kept_g, ids, names)


def read_gold(fmt: GoldFormat, path: Path, *, second: Path | None = None, limit: int | None = None) -> Gold:
    """A gold set by format (``second``: the negatives of ``sssom``, the aliases of ``kgtk``, the labels of
    ``sssom-links`` and ``pubtator``), its first
    ``limit`` pairs or mentions (a sample spread over the set, :func:`_first`).

    Raises:
        InputDataError: the files cannot be read, or ``kgtk`` without its aliases file.
    """
    if fmt == "sssom":
        gold: Gold = read_sssom(path, second)
    elif fmt == "sssom-links":
        gold = read_sssom_links(path, second)
    elif fmt == "pubtator":
        if second is None:
            raise InputDataError("pubtator gold needs the labels of its ids (a JSON object, --second).")
        gold = read_pubtator(path, second)
    elif fmt == "drugbank":
        gold = read_drugbank(path)
    elif fmt == "kgtk":
        if second is None:
            raise InputDataError("kgtk gold needs the labels file and the aliases file (--second).")
        gold = read_kgtk(path, second)
    else:
        gold = read_ssslm(path)
    if limit is not None:
        gold = _first(gold, limit)
    return gold


#: a sampled link set keeps this many catalog entities per mention (its mentions' own and others)
CATALOG_PER_MENTION = 10


def _rank(key: str) -> bytes:
    return hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()


def _first(gold: Gold, limit: int) -> Gold:
    """A sample of ``limit`` rows spread over the whole set: the rows whose gold id hashes lowest (all of an
    id's rows together), in file order. A link set's catalog keeps the sampled mentions' entities and other
    entities (again the lowest hashes) up to ``CATALOG_PER_MENTION`` per mention, so the scorers still
    choose among many."""
    keys = gold.keys if isinstance(gold, GoldPairs) else gold.gold
    rank = {k: _rank(k) for k in set(keys)}
    keep = sorted(sorted(range(len(keys)), key=lambda i: (rank[keys[i]], i))[:limit])
    if isinstance(gold, GoldPairs):
        return GoldPairs(
            gold.name,
            [gold.left[i] for i in keep],
            [gold.right[i] for i in keep],
            [gold.match[i] for i in keep],
            [gold.keys[i] for i in keep],
            [gold.left_ids[i] for i in keep] if gold.left_ids else [],
            [gold.right_ids[i] for i in keep] if gold.right_ids else [],
        )
    entities = {gold.gold[i] for i in keep}
    others = sorted(set(gold.catalog_ids) - entities, key=_rank)
    entities.update(others[: max(0, CATALOG_PER_MENTION * len(keep) - len(entities))])
    rows = [i for i, e in enumerate(gold.catalog_ids) if e in entities]
    return GoldLinks(
        gold.name,
        [gold.mentions[i] for i in keep],
        [gold.gold[i] for i in keep],
        [gold.catalog_ids[i] for i in rows],
        [gold.catalog_names[i] for i in rows],
    )


@dataclass(frozen=True)
class Point:
    """Precision, recall and F1 at one threshold (``predicted``: calls made; ``total``: rows to find)."""

    threshold: float
    precision: float
    recall: float
    f1: float
    predicted: int
    correct: int
    total: int
    #: links only: the share of mentions that would still be linked, wrongly, were their entity missing from
    #: the catalog (each mention scored against its candidates without the right one)
    unlinkable: float | None = None


def _point(threshold: float, predicted: int, correct: int, total: int, unlinkable: float | None = None) -> Point:
    precision = correct / predicted if predicted else 1.0
    recall = correct / total if total else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    missing = None if unlinkable is None else round(unlinkable, 4)
    return Point(threshold, round(precision, 4), round(recall, 4), round(f1, 4), predicted, correct, total, missing)


def operating_point(points: Sequence[Point], target: float = TARGET_PRECISION) -> Point:
    """The threshold with the best F1 among those with precision at or above ``target`` (the best F1 when
    none reaches it); ties go to the higher threshold."""
    reaching = [p for p in points if p.precision >= target and p.predicted]
    pool = reaching or list(points)
    return max(pool, key=lambda p: (p.f1, p.threshold))


@dataclass(frozen=True)
class Scored:
    """Per row (pair or mention): the scorer's score, whether a call there is right, and the row's half.
    Links also keep the runner-up's score (the best other entity), and the two best scores among the
    candidates other than the right entity (what the rule sees were the entity missing from the catalog)."""

    scores: np.ndarray
    right: np.ndarray
    halves: np.ndarray
    runner_up: np.ndarray | None = None
    missing_best: np.ndarray | None = None
    missing_next: np.ndarray | None = None

    def calls(self, mask: np.ndarray, threshold: float, margin: float) -> np.ndarray:
        """The rows of ``mask`` called one entity (pairs) or linked (links) at ``threshold`` and ``margin``."""
        if self.runner_up is None:
            return mask & (self.scores >= threshold)
        called: np.ndarray = mask & LinkRule(threshold, margin).accepts(self.scores, self.runner_up)
        return called

    def unlinkable(self, mask: np.ndarray, threshold: float, margin: float) -> float | None:
        """Links: the share of ``mask``'s mentions the rule would link were their entity not in the catalog."""
        if self.missing_best is None or self.missing_next is None or not mask.any():
            return None
        return float(LinkRule(threshold, margin).accepts(self.missing_best[mask], self.missing_next[mask]).mean())


def scored(gold: Gold, scorer: Scorer, embedder: Embedder | None) -> Scored:
    """Each row of ``gold`` scored by ``scorer`` (links: against every catalog entity, the best three kept); a
    pair whose ids cannot be one entity's (:meth:`GoldPairs.kept_apart`) scores 0, as resolve never joins it."""
    if isinstance(gold, GoldPairs):
        scores = pair_scores(gold.left, gold.right, scorer, embedder=embedder)
        scores = np.where(gold.kept_apart(default_vocabulary()), 0.0, scores)
        return Scored(scores, np.array(gold.match, dtype=bool), np.array([half(k) for k in gold.keys]))
    table = NameTable(gold.catalog_ids, gold.catalog_names)
    best = candidates(gold.mentions, table, scorer, k=3, embedder=embedder)

    def nth(n: int) -> np.ndarray:
        return np.array([hits[n][1] if len(hits) > n else -1.0 for hits in best], dtype=np.float64)

    def is_gold(n: int) -> np.ndarray:
        return np.array([len(hits) > n and hits[n][0] == g for hits, g in zip(best, gold.gold, strict=True)])

    first, second, third = nth(0), nth(1), nth(2)
    first_right, second_right = is_gold(0), is_gold(1)
    return Scored(
        first,
        first_right,
        np.array([half(g) for g in gold.gold]),
        runner_up=second,
        missing_best=np.where(first_right, second, first),
        missing_next=np.where(first_right | second_right, third, second),
    )


def curve(rows: Scored, mask: np.ndarray, total: int, grid: Sequence[float] = GRID, margin: float = 0.0) -> list[Point]:
    """The points of a precision-recall curve over the rows of ``mask``: at each threshold of ``grid``, the
    calls made (links also need ``margin`` over the runner-up) and how many are right; ``total`` is the
    number of rows to find."""
    points = []
    for t in grid:
        called = rows.calls(mask, t, margin)
        points.append(
            _point(t, int(called.sum()), int((called & rows.right).sum()), total, rows.unlinkable(mask, t, margin))
        )
    return points


def _to_find(gold: Gold, mask: np.ndarray) -> int:
    if isinstance(gold, GoldPairs):
        return int((np.array(gold.match, dtype=bool) & mask).sum())
    return int(mask.sum())  # every mention has an entity to find


def default_rule(gold: Gold, scorer: Scorer) -> LinkRule:
    """The default operating point of ``scorer`` on ``gold``: its link rule on a link set, its threshold
    (no margin) on pairs."""
    return LinkRule(DEFAULT_THRESHOLDS[scorer]) if isinstance(gold, GoldPairs) else DEFAULT_LINKS[scorer]


@dataclass(frozen=True)
class ScorerResult:
    """One scorer on one gold set: the operating point chosen on the tuning half, the held-out half's figures
    at it and at the default threshold, and the held-out curve."""

    scorer: str
    threshold: float
    held_out: Point
    at_default: Point
    curve: list[Point]
    margin: float = 0.0


def evaluate_gold(
    gold: Gold, scorers: Sequence[Scorer] = SCORERS, *, embedder: Embedder | None = None
) -> list[ScorerResult]:
    """Each scorer on ``gold``: tuned on one half, reported on the other.

    Raises:
        ValueError: the embedding scorer without an embedder.
    """
    results = []
    for scorer in scorers:
        rows = scored(gold, scorer, embedder)
        tune, held = rows.halves == 0, rows.halves == 1
        rule = default_rule(gold, scorer)
        grid = sorted(set(GRID) | {rule.threshold})
        tuned = operating_point(curve(rows, tune, _to_find(gold, tune), grid, rule.margin))
        held_curve = curve(rows, held, _to_find(gold, held), grid, rule.margin)
        chosen = next(p for p in held_curve if p.threshold == tuned.threshold)
        default = next(p for p in held_curve if p.threshold == rule.threshold)
        results.append(ScorerResult(scorer, tuned.threshold, chosen, default, held_curve, rule.margin))
    return results


def write_report(gold: Gold, results: Sequence[ScorerResult], out: Path) -> dict[str, Any]:
    """``out/curve.csv`` (every scorer's held-out curve), ``out/pr-curve.png`` and ``out/summary.json``;
    returns the summary.

    Raises:
        OutputError: ``out`` cannot be written.
    """
    from metakg.schemas.locks import open_output, require_folder

    require_folder(out, "the evaluation output")
    out.mkdir(parents=True, exist_ok=True)
    with open_output(out / "curve.csv") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            ["scorer", "threshold", "precision", "recall", "f1", "predicted", "correct", "total", "unlinkable"]
        )
        for result in results:
            for p in result.curve:
                writer.writerow([result.scorer, *asdict(p).values()])
    _plot(gold, results, out / "pr-curve.png")
    summary = {
        "gold": gold.name,
        "kind": "pairs" if isinstance(gold, GoldPairs) else "links",
        "rows": len(gold.left) if isinstance(gold, GoldPairs) else len(gold.mentions),
        "target_precision": TARGET_PRECISION,
        "split": "BLAKE2b of the gold id: even first byte tunes, odd is held out",
        "scorers": [
            {
                "scorer": r.scorer,
                "threshold": r.threshold,
                "held_out": asdict(r.held_out),
                "default_threshold": r.at_default.threshold,
                "margin": r.margin,
                "at_default": asdict(r.at_default),
            }
            for r in results
        ],
    }
    with open_output(out / "summary.json") as fh:
        fh.write(json.dumps(summary, indent=1) + "\n")
    return summary


def _plot(gold: Gold, results: Sequence[ScorerResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4.5), dpi=100)
    try:
        for result in results:
            points = [p for p in result.curve if p.predicted]
            axes.plot([p.recall for p in points], [p.precision for p in points], marker=".", label=result.scorer)
            axes.scatter([result.held_out.recall], [result.held_out.precision], s=60, edgecolors="black", zorder=3)
        axes.axhline(TARGET_PRECISION, color="grey", linestyle="--", linewidth=0.8)
        lowest = min((p.precision for r in results for p in r.curve if p.predicted), default=0.0)
        axes.set(
            xlabel="recall (held-out half)", ylabel="precision", xlim=(0, 1.02), ylim=(max(0.0, lowest - 0.05), 1.01)
        )
        axes.set_title(f"{gold.name}: precision and recall by threshold", fontsize=10)
        axes.legend(loc="lower left", fontsize=8)
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
    finally:
        plt.close(figure)
    from metakg.schemas.locks import open_output

    with open_output(path) as fh:  # text mode: write the bytes through its buffer
        fh.buffer.write(buffer.getvalue())


@dataclass(frozen=True)
class IdPairs:
    """Gold pairs of identifiers: ``same[i]`` says whether ``left[i]`` and ``right[i]`` name one entity."""

    name: str
    left: list[str]
    right: list[str]
    same: list[bool]


_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f", "not"}


def read_id_pairs(path: Path) -> IdPairs:
    """Gold identifier pairs: an SSSOM file (``subject_id``, ``object_id``; a ``predicate_modifier`` of
    ``Not`` marks a wrong pair) or a table of two id columns (comma or tab separated, a header optional: a
    first row of two identifiers is a pair; an optional third column says true or false), ids in any written
    form.

    Raises:
        InputDataError: the file cannot be read, has fewer than two columns, or a row is malformed, naming
            the line.
    """
    text = _open_text(path).read()
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    if not lines:
        raise InputDataError(f"{path}: no gold pair.")
    delimiter = "\t" if "\t" in lines[0] else ","
    header = next(csv.reader([lines[0]], delimiter=delimiter))
    left, right, same = [], [], []
    if "subject_id" in header and "object_id" in header:
        for _number, row in _rows(path, delimiter, ("subject_id", "object_id")):
            left.append(row["subject_id"])
            right.append(row["object_id"])
            same.append((row.get("predicate_modifier") or "").strip() != "Not")
    else:
        if len(header) < 2:
            raise InputDataError(f"{path}: a gold table needs two id columns (found {len(header)}).")
        numbered = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
        # a first row of two identifiers is a pair, not a header (a file without one lost its first pair)
        pair_first = _is_pair(header)
        body = [(n, line) for n, line in numbered if not line.startswith("#")][0 if pair_first else 1 :]
        for number, line in body:
            cells = next(csv.reader([line], delimiter=delimiter))
            if len(cells) < 2 or not cells[0].strip() or not cells[1].strip():
                raise InputDataError(f"{path}, line {number}: two ids expected, got {line!r}.")
            label = cells[2].strip().lower() if len(cells) > 2 and cells[2].strip() else "true"
            if label not in _TRUE | _FALSE:
                raise InputDataError(f"{path}, line {number}: the third column is true or false, got {cells[2]!r}.")
            left.append(cells[0].strip())
            right.append(cells[1].strip())
            same.append(label in _TRUE)
    if not left:
        raise InputDataError(f"{path}: no gold pair.")
    return IdPairs(path.name, left, right, same)


def _is_pair(cells: Sequence[str]) -> bool:
    """Whether a gold table's first row is a pair rather than a header: two identifiers of prefixes the
    vocabulary knows (``mondo:0004975``, ``MONDO_0004975``, a Wikidata IRI; not ``source:id``), and a third
    cell, if any, that says true or false."""
    from metakg.schemas.curie import normalise_curie, prefix_spec

    def identifier(cell: str) -> bool:
        written = normalise_curie(cell.strip())
        return written is not None and prefix_spec(written.split(":", 1)[0]) is not None

    label_ok = len(cells) < 3 or not cells[2].strip() or cells[2].strip().lower() in _TRUE | _FALSE
    return len(cells) >= 2 and identifier(cells[0]) and identifier(cells[1]) and label_ok


def evaluate_clusters(gold: IdPairs, nodes: pl.DataFrame, canonical: dict[str, str]) -> dict[str, Any]:
    """How right a resolved graph's identity is on gold identifier pairs: an id is found as the id of nodes
    (in any writing: ``DrugBank:DB00945`` is ``drugbank:DB00945``) or, failing that, as the xref of exactly one
    node; a pair is called one entity when both ids end on one node, and only one (``canonical``: node id ->
    the node it became or links to): an id left on two nodes (two writings never joined) is a split, so a
    gold pair through it is missed. Pairs with an id the graph lacks are left out and counted. Returns
    precision, recall, F1, the counts and the first wrong and missed pairs."""
    from metakg.schemas.curie import normalise_curie

    def one_form(value: str) -> str:
        return normalise_curie(value) or value.strip()

    ids = nodes["id"].to_list()
    where: dict[str, set[str]] = {}
    for node in ids:
        where.setdefault(one_form(node), set()).add(canonical.get(node, node))
    by_xref: dict[str, set[str]] = {}
    for node, xrefs in zip(ids, nodes["xrefs"].to_list(), strict=True):
        for xref in xrefs or []:
            by_xref.setdefault(one_form(xref), set()).add(node)

    def node_of(value: str) -> set[str] | None:
        """The nodes an id ends on (several: it was split), None when the graph lacks it."""
        key = one_form(value)
        if key in where:
            return where[key]
        holders = by_xref.get(key, set())
        return {canonical.get(h, h) for h in holders} if len(holders) == 1 else None

    called = right = positives = covered = 0
    wrong: list[list[str]] = []
    missed: list[list[str]] = []
    for a, b, truth in zip(gold.left, gold.right, gold.same, strict=True):
        x, y = node_of(a), node_of(b)
        if x is None or y is None:
            continue
        covered += 1
        positives += truth
        if len(x | y) == 1:
            called += 1
            right += truth
            if not truth and len(wrong) < 20:
                wrong.append([a, b])
        elif truth and len(missed) < 20:
            missed.append([a, b])
    point = _point(1.0, called, right, positives)
    return {
        "gold": gold.name,
        "pairs": len(gold.left),
        "covered": covered,
        "precision": point.precision,
        "recall": point.recall,
        "f1": point.f1,
        "called": called,
        "right": right,
        "positives": positives,
        "wrong_examples": wrong,
        "missed_examples": missed,
    }
