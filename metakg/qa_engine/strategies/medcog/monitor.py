"""A metacognitive regulator's first two steps (MedCoG, Zhao et al., arXiv 2602.07905): monitoring and planning.

- **Monitoring**: one LLM call rates a question on complexity (does it need several reasoning steps),
  familiarity (is it a textbook case past reasoning applies to) and knowledge density (does it hinge on
  specific facts), each in [0, 1] with a one-line reason. :func:`parse_assessment` reads JSON, or scores
  written in prose, on the scale the reply states (0-10, percent) or else as asked, clamped to [0, 1]; a
  score the reply leaves out counts as
  :data:`MISSING_SCORE` (high: the knowledge it would gate stays on); a reply with no score at all is
  unparseable and the caller takes its fallback route.
- **Planning**: thresholds (tau_c, tau_f, tau_k) turn the scores into one of five routes (:func:`plan`):
  every score at or below its threshold -> ``zero_shot``; otherwise structured chain of thought (``scot``),
  with the case bank when familiarity is above tau_f (``_mem``) and knowledge-graph verification when
  knowledge density is above tau_k (``_kg``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

ROUTES = ("zero_shot", "scot", "scot_mem", "scot_kg", "scot_kg_mem")
DIMENSIONS = ("complexity", "familiarity", "knowledge_density")
MISSING_SCORE = 1.0

MONITOR_PROMPT = (
    "Before answering, rate the question below on three scales from 0 to 1, and give a one-line reason "
    "for each:\n"
    "- complexity: 0 = one fact settles it, 1 = it needs several linked reasoning steps;\n"
    "- familiarity: 0 = an unusual case you have not seen the like of, 1 = a standard textbook case;\n"
    "- knowledge_density: 0 = general sense is enough, 1 = it turns on specific facts (drugs, genes, "
    "diseases and how they relate).\n"
    "Reply with JSON only, like "
    '{{"complexity": {{"score": 0.4, "reason": "..."}}, "familiarity": {{"score": 0.7, "reason": "..."}}, '
    '"knowledge_density": {{"score": 0.9, "reason": "..."}}}}\n\n'
    "Question: {question}"
)

#: the JSON Schema of a monitoring reply, sent where the endpoint takes one (it constrains the local model's
#: output to this shape); the reply is still parsed tolerantly, since not every endpoint honours it
MONITOR_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        axis: {
            "type": "object",
            "properties": {"score": {"type": "number"}, "reason": {"type": "string"}},
            "required": ["score", "reason"],
        }
        for axis in ("complexity", "familiarity", "knowledge_density")
    },
    "required": ["complexity", "familiarity", "knowledge_density"],
}

_ALIASES = {
    "complexity": "complexity",
    "familiarity": "familiarity",
    "knowledge_density": "knowledge_density",
    "knowledgedensity": "knowledge_density",
    "density": "knowledge_density",
}


def _dimension(key: str) -> str | None:
    """The dimension a key or a prose label names (``Knowledge density``, ``knowledge-density``, ...)."""
    return _ALIASES.get(re.sub(r"[\s_-]+", "_", key.lower().strip()))


_PROSE = re.compile(
    r"(complexity|familiarity|knowledge[\s_-]*density|density)\W{0,30}?(-?\d+(?:\.\d+)?)\s*(%|/\s*100|/\s*10\b|/\s*1\b)?",
    re.I,
)


@dataclass(frozen=True)
class Assessment:
    """The three scores in [0, 1], a reason per score, and how the reply was read (``json``, ``prose``);
    ``missing`` names the scores the reply left out (taken as :data:`MISSING_SCORE`)."""

    complexity: float
    familiarity: float
    knowledge_density: float
    reasons: dict[str, str] = field(default_factory=dict)
    how: str = "json"
    missing: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The assessment as JSON-ready data (for a trace)."""
        return {
            "complexity": self.complexity,
            "familiarity": self.familiarity,
            "knowledge_density": self.knowledge_density,
            "reasons": dict(self.reasons),
            "how": self.how,
            "missing": list(self.missing),
        }


@dataclass(frozen=True)
class Thresholds:
    """tau_c, tau_f, tau_k: a score above its threshold turns its knowledge on."""

    complexity: float = 0.5
    familiarity: float = 0.5
    knowledge_density: float = 0.5


def scale(value: float, unit: str = "") -> float | None:
    """A score as a number in [0, 1]: read on its stated scale (``unit``: ``%`` or ``/100``, ``/10``), else
    taken as asked (0 to 1) and clamped: a 1.2 or a 7 with no scale said is "above the top", 1.0, never a
    guessed 0.12 or 0.7. None when it is negative, or above its scale's top by more than rounding."""
    unit = unit.replace(" ", "")
    if value < 0:
        return None
    top = 100.0 if unit in ("%", "/100") else 10.0 if unit == "/10" else 1.0
    if unit and value > top:
        return None
    if not unit and value > 100:
        return None
    return round(min(value / top, 1.0), 4)


#: a scale a reply states once for all its scores ("on a scale of 0 to 10", "out of 10", "in percent")
_STATED = [
    (re.compile(r"\b(?:out of|scale of(?: 0| 1)?(?: to|-)?)\s*10\b|\b[01]\s*(?:-|to)\s*10\b|/\s*10\b", re.I), "/10"),
    (re.compile(r"\bper ?cent\b|\b0\s*(?:-|to)\s*100\b|\bout of 100\b", re.I), "/100"),
]


def stated_scale(reply: str) -> str:
    """The scale a reply states for its scores (``/10``, ``/100``), or ``""``."""
    return next((unit for pattern, unit in _STATED if pattern.search(reply)), "")


def _number(value: Any, stated: str = "") -> tuple[float | None, str]:
    """A score and its reason from a JSON value: a number, a numeric string, or {"score": .., "reason": ..};
    a bare number is on the ``stated`` scale of the reply."""
    reason = ""
    if isinstance(value, dict):
        reason = str(value.get("reason", "") or "")
        value = next((value[k] for k in ("score", "value", "rating") if k in value), None)
    if isinstance(value, bool) or value is None:
        return None, reason
    if isinstance(value, int | float):
        return scale(float(value), stated), reason
    match = re.match(r"\s*(\d+(?:\.\d+)?)\s*(%|/\s*100|/\s*10)?", str(value))
    return (scale(float(match.group(1)), match.group(2) or stated) if match else None), reason


def _from_json(reply: str) -> dict[str, tuple[float, str]]:
    found: dict[str, tuple[float, str]] = {}
    stated = stated_scale(reply)
    for match in re.finditer(r"\{.*\}", reply, re.S):
        try:
            data = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict):
            for key, value in data.items():
                name = _dimension(str(key))
                score, reason = _number(value, stated)
                if name and score is not None:
                    found[name] = (score, reason)
        if found:
            break
    return found


def _from_prose(reply: str) -> dict[str, tuple[float, str]]:
    found: dict[str, tuple[float, str]] = {}
    stated = stated_scale(reply)
    for match in _PROSE.finditer(reply):
        name = _dimension(match.group(1))
        score = scale(float(match.group(2)), match.group(3) or stated)
        if name is not None and score is not None and name not in found:
            line = reply[match.start() :].splitlines()[0].strip()
            found[name] = (score, line[:200])
    return found


def parse_assessment(reply: str) -> Assessment | None:
    """The scores in a monitoring reply (JSON first, then prose); None when the reply holds none."""
    how = "json"
    found = _from_json(reply)
    if not found:
        how, found = "prose", _from_prose(reply)
    if not found:
        return None
    missing = tuple(d for d in DIMENSIONS if d not in found)
    scores = {d: found[d][0] if d in found else MISSING_SCORE for d in DIMENSIONS}
    reasons = {d: found[d][1] for d in DIMENSIONS if d in found and found[d][1]}
    return Assessment(scores["complexity"], scores["familiarity"], scores["knowledge_density"], reasons, how, missing)


def plan(assessment: Assessment, tau: Thresholds) -> str:
    """The route for ``assessment`` under ``tau`` (one of :data:`ROUTES`)."""
    complex_ = assessment.complexity > tau.complexity
    familiar = assessment.familiarity > tau.familiarity
    dense = assessment.knowledge_density > tau.knowledge_density
    if not (complex_ or familiar or dense):
        return "zero_shot"
    return "scot" + ("_kg" if dense else "") + ("_mem" if familiar else "")
