"""MetaQA-style 2- and 3-hop questions over the MetaQA KB subset, written from metakg's own templates.

The KB (``subject|relation|object`` lines: movies with their directors, writers, actors, years, languages,
genres and tags) is read from the shared data directory, never copied. A question starts at a topic entity
(written ``[X]``, as MetaQA writes it) and follows a relation path; its gold answers are every entity the
path reaches from the topic, never passing through the topic again. A question is kept when it has 1 to
``MAX_GOLD`` answers (a question with hundreds of answers is found by any walk).

Every relation path has four families of templates, worded differently: family ``a`` is for tuning and for
the held-out report, families ``c`` and ``d`` only for tuning (more wordings, so that what is tuned is not one
wording's words; ``d`` names its relations by words unlike the relations' own, "behind the camera",
"authored", "tongue"), family ``b`` only for the held-out check (questions phrased in ways nobody tuned on).
Topic entities are split in two halves by a hash (BLAKE2b, even: tuning, odd: held out), so a topic's
questions are all on one side.

Written as MetaQA's own TSV (``line_no``, ``question``, ``answers`` joined by ``|``, ``topic_entity``,
``relation_path``), which ``metakg eval --format metaqa`` reads.
"""

from __future__ import annotations

import csv
import hashlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: at most this many gold answers per question
MAX_GOLD = 15

#: relation path -> (family a, b, c and d templates); ``_reverse`` follows a relation backwards
TWO_HOP: dict[tuple[str, str], tuple[tuple[str, ...], ...]] = {
    ("written_by_reverse", "directed_by"): (
        ("who directed the films written by [{}]",),
        ("which directors made movies from screenplays by [{}]",),
        ("[{}] wrote some films: who were their directors",),
        ("who was behind the camera for the pictures authored by [{}]",),
    ),
    ("directed_by_reverse", "starred_actors"): (
        ("who acted in the movies directed by [{}]",),
        ("name the actors in films that [{}] directed",),
        ("which performers were cast in films helmed by [{}]",),
        ("who appeared in the pictures [{}] made as director",),
    ),
    ("starred_actors_reverse", "has_genre"): (
        ("what genres are the movies starring [{}]",),
        ("which genres do the films with [{}] in the cast belong to",),
        ("[{}] has appeared in films of what genre",),
        ("what type of movies has [{}] performed in",),
    ),
    ("starred_actors_reverse", "directed_by"): (
        ("who directed the movies [{}] acted in",),
        ("which filmmakers directed [{}]",),
        ("name the directors who cast [{}]",),
        ("[{}] has been directed by whom",),
    ),
    ("directed_by_reverse", "release_year"): (
        ("when were the movies directed by [{}] released",),
        ("in which years did films by director [{}] come out",),
        ("what years saw releases of films helmed by [{}]",),
        ("what are the release dates of the pictures [{}] directed",),
    ),
    ("written_by_reverse", "in_language"): (
        ("what languages are the films written by [{}] in",),
        ("in which languages are the screenplays of [{}] filmed",),
        ("what language were the scripts of [{}] shot in",),
        ("what tongue are the movies authored by [{}] spoken in",),
    ),
    ("starred_actors_reverse", "starred_actors"): (
        ("who acted together with [{}]",),
        ("which actors shared the screen with [{}]",),
        ("who were the co-stars of [{}]",),
        ("who else appeared in pictures alongside [{}]",),
    ),
    ("directed_by_reverse", "written_by"): (
        ("who wrote the films directed by [{}]",),
        ("name the screenwriters of movies that [{}] directed",),
        ("who wrote the scripts of films helmed by [{}]",),
        ("who authored the pictures that [{}] directed",),
    ),
}

THREE_HOP: dict[tuple[str, str, str], tuple[tuple[str, ...], ...]] = {
    ("written_by", "written_by_reverse", "directed_by"): (
        ("who directed the films written by the writer of [{}]",),
        ("which directors filmed scripts by the screenwriter of [{}]",),
        ("the writer of [{}] also wrote other films: who directed those",),
        ("the author of [{}] penned other pictures: who was behind the camera",),
    ),
    ("directed_by", "directed_by_reverse", "starred_actors"): (
        ("who starred in the films directed by the director of [{}]",),
        ("which actors appear in movies by the filmmaker behind [{}]",),
        ("who was cast in other movies by the director of [{}]",),
        ("who appeared in pictures by whoever directed [{}]",),
    ),
    ("starred_actors", "starred_actors_reverse", "release_year"): (
        ("when were the movies starring the actors of [{}] released",),
        ("in which years did films with the cast of [{}] come out",),
        ("in what years were films featuring actors from [{}] released",),
        ("what are the release dates of pictures with the performers of [{}]",),
    ),
    ("directed_by", "directed_by_reverse", "has_genre"): (
        ("what genres are the films directed by the director of [{}]",),
        ("which genres does the filmmaker of [{}] work in",),
        ("what kinds of films has the director of [{}] made",),
        ("what type of movies did the director of [{}] make",),
    ),
    ("written_by", "written_by_reverse", "in_language"): (
        ("what languages are the films by the writer of [{}] in",),
        ("in which languages are the scripts of the screenwriter of [{}] filmed",),
        ("what languages do the films of the screenwriter of [{}] use",),
        ("what tongue are the pictures authored by the author of [{}] spoken in",),
    ),
    ("starred_actors", "starred_actors_reverse", "directed_by"): (
        ("who directed the movies starring the actors of [{}]",),
        ("which directors worked with the cast of [{}]",),
        ("who has directed the stars of [{}]",),
        ("who was behind the camera for pictures with the performers of [{}]",),
    ),
}


@dataclass(frozen=True)
class Question:
    """One generated question."""

    text: str
    answers: tuple[str, ...]
    topic: str
    path: tuple[str, ...]
    family: str  # a | b | c | d
    half: int  # 0 tuning, 1 held out


def half(topic: str) -> int:
    """The half of a topic entity: the first byte of its BLAKE2b hash, even: tuning, odd: held out."""
    return hashlib.blake2b(topic.encode("utf-8"), digest_size=8).digest()[0] % 2


def _rank(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()


class KB:
    """The KB's edges both ways: ``step(entities, relation)`` follows a relation (``_reverse``: backwards)."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.forward: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        self.backward: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        for line in lines:
            parts = line.rstrip("\n").split("|")
            if len(parts) != 3 or not all(parts):
                continue
            subject, relation, obj = parts
            self.forward[relation][subject].add(obj)
            self.backward[relation][obj].add(subject)

    def step(self, entities: set[str], relation: str) -> set[str]:
        table = self.backward[relation[: -len("_reverse")]] if relation.endswith("_reverse") else self.forward[relation]
        return {b for a in entities for b in table.get(a, ())}

    def starts(self, relation: str) -> list[str]:
        """The entities a path beginning with ``relation`` can start at, sorted."""
        table = self.backward[relation[: -len("_reverse")]] if relation.endswith("_reverse") else self.forward[relation]
        return sorted(table)

    def follow(self, topic: str, path: Iterable[str]) -> set[str]:
        """The entities ``path`` reaches from ``topic``, never through the topic again (the writer of a film
        leads to the writer's other films)."""
        reached = {topic}
        for relation in path:
            reached = self.step(reached, relation) - {topic}
        return reached


def generate(kb: KB, paths: dict[tuple[str, ...], tuple[tuple[str, ...], ...]], per_path: int) -> list[Question]:
    """Up to ``per_path`` topics per relation path (by hash order), each asked in every family."""
    found = []
    for path, families in paths.items():
        kept = 0
        for topic in sorted(kb.starts(path[0]), key=lambda t: _rank("|".join(path) + "|" + t)):
            if kept == per_path:
                break
            answers = kb.follow(topic, path)
            if not 1 <= len(answers) <= MAX_GOLD:
                continue
            kept += 1
            for family, templates in zip("abcd", families, strict=True):
                template = templates[int(_rank(topic)[1]) % len(templates)]
                found.append(Question(template.format(topic), tuple(sorted(answers)), topic, path, family, half(topic)))
    return found


def write(questions: Iterable[Question], out: Path) -> int:
    """The questions as MetaQA's TSV; returns how many were written."""
    out.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with out.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
        writer.writerow(["line_no", "question", "answers", "topic_entity", "relation_path"])
        for n, q in enumerate(questions, start=1):
            writer.writerow([n, q.text, "|".join(q.answers), q.topic, "_".join(q.path)])
    return n


def build(kb_file: Path, out: Path, per_path: tuple[int, int] = (40, 70)) -> dict[str, Path]:
    """The question files: ``{2,3}hop_{tune,tune_c,tune_d,held,held_b}.tsv`` under ``out`` (tune, tune_c and
    tune_d: families a, c and d on the tuning half; held: family a on the held-out half; held_b: family b on
    the held-out half), ``per_path`` topics per relation path of 2 and of 3 hops."""
    kb = KB(kb_file.read_text(encoding="utf-8").splitlines())
    files = {}
    for hops, paths, per in (("2hop", TWO_HOP, per_path[0]), ("3hop", THREE_HOP, per_path[1])):
        questions = generate(kb, paths, per)  # type: ignore[arg-type]
        for name, family, side in (
            ("tune", "a", 0),
            ("tune_c", "c", 0),
            ("tune_d", "d", 0),
            ("held", "a", 1),
            ("held_b", "b", 1),
        ):
            path = out / f"{hops}_{name}.tsv"
            write((q for q in questions if q.family == family and q.half == side), path)
            files[f"{hops}_{name}"] = path
    return files
