"""Inference efficiency of a run: inference density against a scaling curve, and incremental efficiency (IIE).

MedCoG (Zhao et al., arXiv 2602.07905) fits the accuracy of reference methods to their cost per question
as ``Acc = a * ln(C) + b``. A run's **inference density** is the cost the curve needs for the run's
accuracy over the run's actual cost: above 1, the run buys its accuracy cheaper than the reference
methods. An accuracy outside the accuracies the curve was fitted on is flagged, not extrapolated
silently. **IIE** is the accuracy gained per extra USD over a reference run (MedCoG uses chain of thought;
metakg's default reference is MedCoG's fixed SCoT route).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: MedAgentsBench (Tang et al., 2025), GPT-4o on MedQA-hard: (method, accuracy, USD per question), the
#: figures the MedCoG paper fits its scaling curve to.
REFERENCE_SETS: dict[str, dict[str, object]] = {
    "medagentsbench-gpt4o-medqa-hard": {
        "source": "MedAgentsBench (Tang et al., 2025), GPT-4o on MedQA-hard, cost in USD per question",
        "points": (
            ("zero-shot", 0.35, 0.0008),
            ("CoT", 0.39, 0.0056),
            ("CoT-SC", 0.39, 0.030),
            ("Self-Refine", 0.42, 0.011),
            ("MultiPersona", 0.45, 0.039),
            ("MedAgents", 0.43, 0.099),
            ("MDAgents", 0.36, 0.110),
            ("AFlow", 0.48, 0.062),
        ),
    }
}


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


def reference_fit(name: str) -> ScalingFit:
    """The fit of a named reference set (:data:`REFERENCE_SETS`)."""
    points = REFERENCE_SETS[name]["points"]
    return fit_scaling([(acc, cost) for _, acc, cost in points])  # type: ignore[attr-defined]


def inference_density(fit: ScalingFit, accuracy: float, cost: float) -> tuple[float | None, bool]:
    """(density, in range): the curve's cost for ``accuracy`` over ``cost``; None for a run that cost
    nothing. ``in range`` is False when the accuracy lies outside the fitted accuracies."""
    if cost <= 0:
        return None, fit.low <= accuracy <= fit.high
    return round(fit.cost_for(accuracy) / cost, 3), fit.low <= accuracy <= fit.high


def iie(accuracy: float, cost: float, ref_accuracy: float, ref_cost: float) -> float | None:
    """Accuracy gained per extra USD over the reference run (None when the costs are equal)."""
    if cost == ref_cost:
        return None
    return round((accuracy - ref_accuracy) / (cost - ref_cost), 4)
