"""Inference efficiency of a run: inference density against a scaling curve, and incremental efficiency (IIE).

MedCoG (Zhao et al., arXiv 2602.07905) fits the accuracy of reference methods to their cost per question
as ``Acc = a * ln(C) + b``. A run's **inference density** is the cost the curve needs for the run's
accuracy over the run's actual cost: above 1, the run buys its accuracy cheaper than the reference
methods. An accuracy outside the accuracies the curve was fitted on is flagged, not extrapolated
silently. **IIE** is the accuracy gained per extra USD over a reference run (MedCoG uses chain of thought;
metakg's default reference is MedCoG's fixed SCoT route).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metakg.errors import InputDataError, UsageError


@dataclass(frozen=True)
class ReferenceSet:
    """Reference methods a scaling curve is fitted to: (method, accuracy in [0, 1], USD per question)."""

    name: str
    source: str
    points: tuple[tuple[str, float, float], ...]

    def fit(self) -> ScalingFit:
        """The least-squares curve through the points (ValueError when they cannot make one)."""
        return fit_scaling([(acc, cost) for _, acc, cost in self.points])

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: name, source and points."""
        return {"name": self.name, "source": self.source, "points": [list(p) for p in self.points]}


#: MedAgentsBench (Tang et al., 2025), GPT-4o on MedQA-hard: the figures the MedCoG paper fits its curve to.
REFERENCE_SETS: dict[str, ReferenceSet] = {
    "medagentsbench-gpt4o-medqa-hard": ReferenceSet(
        "medagentsbench-gpt4o-medqa-hard",
        "MedAgentsBench (Tang et al., 2025), GPT-4o on MedQA-hard, cost in USD per question",
        (
            ("zero-shot", 0.35, 0.0008),
            ("CoT", 0.39, 0.0056),
            ("CoT-SC", 0.39, 0.030),
            ("Self-Refine", 0.42, 0.011),
            ("MultiPersona", 0.45, 0.039),
            ("MedAgents", 0.43, 0.099),
            ("MDAgents", 0.36, 0.110),
            ("AFlow", 0.48, 0.062),
        ),
    )
}
DEFAULT_SCALING = "medagentsbench-gpt4o-medqa-hard"
CSV_COLUMNS = ("method", "accuracy", "cost_usd")


def load_reference(spec: str | Path) -> ReferenceSet:
    """A reference set by name (:data:`REFERENCE_SETS`), or from a file of the user's own runs:

    - a CSV with the columns ``method,accuracy,cost_usd`` (accuracy in [0, 1], USD per question);
    - an earlier ``metakg eval`` report (its folder or its ``summary.json``): each run with an accuracy
      and a positive cost per question is a point (the ORACLE row is not).

    Raises:
        UsageError: neither a known name nor an existing file.
        InputDataError: the file names its row or field that is wrong, or holds fewer than two points.
    """
    if str(spec) in REFERENCE_SETS:
        return REFERENCE_SETS[str(spec)]
    path = Path(spec)
    if path.is_dir():
        path = path / "summary.json"
    if not path.is_file():
        raise UsageError(
            f"unknown scaling reference {str(spec)!r}: not one of {', '.join(REFERENCE_SETS)}, and no such file "
            "(a CSV with method,accuracy,cost_usd, or an eval report folder or its summary.json)."
        )
    points = _report_points(path) if path.suffix == ".json" else _csv_points(path)
    if len(points) < 2:
        raise InputDataError(f"{path}: a scaling curve needs two or more reference points; found {len(points)}.")
    return ReferenceSet(path.stem if path.suffix != ".json" else path.parent.name, f"the runs in {path}", points)


def _csv_points(path: Path) -> tuple[tuple[str, float, float], ...]:
    points = []
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in CSV_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise InputDataError(f"{path}: missing column(s) {', '.join(missing)}; need {','.join(CSV_COLUMNS)}.")
        for number, row in enumerate(reader, start=2):
            try:
                accuracy, cost = float(row["accuracy"]), float(row["cost_usd"])
            except (TypeError, ValueError):
                raise InputDataError(f"{path} row {number}: accuracy and cost_usd must be numbers.") from None
            if not 0 <= accuracy <= 1:
                raise InputDataError(f"{path} row {number}: accuracy {accuracy} is not in [0, 1].")
            if cost <= 0:
                raise InputDataError(f"{path} row {number}: cost_usd {cost} is not a positive USD per question.")
            points.append((row["method"] or f"row {number}", accuracy, cost))
    return tuple(points)


def _report_points(path: Path) -> tuple[tuple[str, float, float], ...]:
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise InputDataError(f"{path}: not a readable eval summary ({e}).") from e
    if not isinstance(summary, dict):
        raise InputDataError(f"{path}: not an eval summary (expected an object keyed by run).")
    return tuple(
        (label, float(figures["accuracy"]), float(figures["cost_per_question"]))
        for label, figures in summary.items()
        if label != "ORACLE"
        and isinstance(figures, dict)
        and figures.get("accuracy") is not None
        and (figures.get("cost_per_question") or 0) > 0
    )


@dataclass(frozen=True)
class ScalingFit:
    """``accuracy = a * ln(cost) + b`` fitted by least squares, its R², and the accuracies it spans."""

    a: float
    b: float
    r2: float
    low: float
    high: float

    def cost_for(self, accuracy: float) -> float:
        """The cost the curve needs for ``accuracy``."""
        return math.exp((accuracy - self.b) / self.a)


def fit_scaling(points: Sequence[tuple[float, float]]) -> ScalingFit:
    """Fit (accuracy, cost) points; raises ValueError with fewer than two distinct costs or a flat curve."""
    xs = [math.log(c) for _, c in points if c > 0]
    ys = [acc for acc, c in points if c > 0]
    if len(set(xs)) < 2:
        raise ValueError("a scaling curve needs two or more reference points with different positive costs")
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    a = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    if a <= 0:
        raise ValueError("the reference points do not rise with cost; no scaling curve to compare against")
    b = my - a * mx
    total = sum((y - my) ** 2 for y in ys)
    residual = sum((y - (a * x + b)) ** 2 for x, y in zip(xs, ys, strict=True))
    return ScalingFit(a, b, 1 - residual / total if total else 1.0, min(ys), max(ys))


def inference_density(fit: ScalingFit, accuracy: float, cost: float) -> tuple[float | None, bool]:
    """(density, in range): the curve's cost for ``accuracy`` over ``cost``; None for a run that cost
    nothing. ``in range`` is False when the accuracy lies outside the fitted accuracies."""
    if cost <= 0:
        return None, fit.low <= accuracy <= fit.high
    return float(f"{fit.cost_for(accuracy) / cost:.4g}"), fit.low <= accuracy <= fit.high  # 4 significant digits


def iie(accuracy: float, cost: float, ref_accuracy: float, ref_cost: float) -> float | None:
    """Accuracy gained per extra USD over the reference run (None when the costs are equal)."""
    if cost == ref_cost:
        return None
    return round((accuracy - ref_accuracy) / (cost - ref_cost), 4)
