"""Inference density and IIE on points where the answers are known by hand."""

from __future__ import annotations

import math

import pytest

from metakg.errors import UsageError
from metakg.qa_engine.efficiency import fit_scaling, iie, inference_density, reference_fit
from metakg.qa_engine.evaluate import add_efficiency

LINE = [(0.2 * math.log(c) + 0.3, c) for c in (0.5, 1.0, 2.0, 4.0)]  # accuracy = 0.2 ln(C) + 0.3 exactly


def test_fit_density_and_range() -> None:
    fit = fit_scaling(LINE)
    assert fit.a == pytest.approx(0.2) and fit.b == pytest.approx(0.3) and fit.r2 == pytest.approx(1.0)
    # accuracy 0.3 + 0.2 ln 2 costs 2.0 on the curve: a run reaching it for 0.5 has density 4
    density, in_range = inference_density(fit, 0.3 + 0.2 * math.log(2), 0.5)
    assert density == pytest.approx(4.0) and in_range
    assert inference_density(fit, 0.9, 1.0)[1] is False  # above every reference accuracy: flagged
    assert inference_density(fit, 0.4, 0.0) == (None, True)  # a free run has no density
    with pytest.raises(ValueError, match="two or more"):
        fit_scaling([(0.4, 1.0), (0.5, 1.0)])
    with pytest.raises(ValueError, match="do not rise"):
        fit_scaling([(0.5, 1.0), (0.4, 2.0)])


def test_iie() -> None:
    assert iie(0.5, 0.02, 0.4, 0.01) == pytest.approx(10.0)
    assert iie(0.5, 0.01, 0.4, 0.01) is None


def test_the_published_reference_set_fits_a_rising_curve() -> None:
    fit = reference_fit("medagentsbench-gpt4o-medqa-hard")
    assert fit.a > 0 and 0 < fit.r2 < 1 and (fit.low, fit.high) == (0.35, 0.48)


def test_the_harness_adds_cost_density_and_iie() -> None:
    summary = {
        "medcog[route=scot]": {"questions": 10, "accuracy": 0.4, "cost_usd": 0.05},
        "medcog": {"questions": 10, "accuracy": 0.45, "cost_usd": 0.03},
    }
    add_efficiency(summary, "medagentsbench-gpt4o-medqa-hard", None)
    meta, scot = summary["medcog"], summary["medcog[route=scot]"]
    assert meta["cost_per_question"] == 0.003 and meta["iie_reference"] == "medcog[route=scot]"
    assert meta["iie"] == pytest.approx((0.45 - 0.4) / (0.003 - 0.005), abs=1e-3)
    assert meta["inference_density"] > scot["inference_density"] > 0 and meta["density_in_fitted_range"]
    assert meta["scaling_fit"]["r2"] == round(reference_fit("medagentsbench-gpt4o-medqa-hard").r2, 4)
    with pytest.raises(UsageError, match="not among the runs"):
        add_efficiency(summary, "medagentsbench-gpt4o-medqa-hard", "cot")
    with pytest.raises(UsageError, match="unknown scaling reference"):
        add_efficiency(summary, "mine", None)
