"""Structured chain of thought (SCoT): facts as entity -> relation -> entity paths first, then the reasoning,
then one answer line (MedCoG's procedural knowledge).

:func:`scot_prompt` asks for that shape, optionally with knowledge-graph evidence and past cases;
:func:`parse_scot` reads the paths (``a -> rel -> b -> rel -> c`` or ``a -[rel]-> b``), the reasoning and
the answer line back out of a reply; the choice letter is then read by the shared parser.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from metakg.qa_engine.core import Question

_BRACKETED = re.compile(r"\s*-\[\s*([^\]]+?)\s*\]->\s*")
_MARK = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)]|facts?\s*:|paths?\s*:)\s*", re.I)


def scot_prompt(question: Question, evidence: Sequence[str] = (), cases: Sequence[str] = ()) -> str:
    """The SCoT prompt: past cases and graph evidence when given, the question and its choices, the shape
    of the reply (Facts, Reasoning, Answer)."""
    parts = []
    if cases:
        parts.append("Similar questions solved before (learn from the correct ones, avoid the mistakes of the "
                     "wrong ones):\n" + "\n\n".join(cases))  # fmt: skip
    if evidence:
        parts.append("Paths from a knowledge graph that may help:\n" + "\n".join(evidence))
    parts.append(f"Question: {question.text.strip()}")
    if question.choices:
        parts.append("\n".join(f"{letter}: {text}" for letter, text in question.choices))
    parts.append(
        "Work in three parts.\n"
        "Facts: the facts the answer rests on, one per line, as paths entity -> relation -> entity.\n"
        "Reasoning: how the facts lead to the answer, step by step.\n"
        + ("Answer: the letter of the best choice." if question.choices else "Answer: a short answer.")
    )
    return "\n\n".join(parts)


@dataclass(frozen=True)
class ScotReply:
    """A SCoT reply: its fact paths (entity, relation, entity, ...), the reasoning and the answer line."""

    paths: list[tuple[str, ...]] = field(default_factory=list)
    reasoning: str = ""
    answer: str = ""


def parse_path(line: str) -> tuple[str, ...] | None:
    """``a -> rel -> b`` or ``a -[rel]-> b -[rel2]-> c`` as (a, rel, b, ...); None when it is not a path."""
    text = _BRACKETED.sub(" -> \\1 -> ", _MARK.sub("", line)).strip().rstrip(".;")
    parts = [p.strip().strip("\"'`") for p in re.split(r"\s*(?:->|→)\s*", text)]
    if len(parts) < 3 or len(parts) % 2 == 0 or not all(parts):
        return None
    return tuple(parts)


def parse_scot(reply: str) -> ScotReply:
    """The paths (every line that reads as one), the reasoning section and the answer line of a reply."""
    paths = [p for p in (parse_path(line) for line in reply.splitlines() if "->" in line or "→" in line) if p]
    reasoning = ""
    found = re.search(r"reasoning\s*:\s*(.*?)(?=^\s*answer\s*:|\Z)", reply, re.I | re.S | re.M)
    if found:
        reasoning = found.group(1).strip()
    answers = re.findall(r"^\s*(?:final\s+)?answer\s*:\s*(.+)$", reply, re.I | re.M)
    return ScotReply(paths, reasoning, answers[-1].strip() if answers else "")
