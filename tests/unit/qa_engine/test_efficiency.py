"""Inference density and IIE on points where the answers are known by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from metakg.errors import InputDataError, UsageError
from metakg.qa_engine.efficiency import REFERENCE_SETS, fit_scaling, iie, inference_density, load_reference
from metakg.qa_engine.evaluate import add_efficiency, efficiency_notes

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
    fit = REFERENCE_SETS["medagentsbench-gpt4o-medqa-hard"].fit()
    assert fit.a > 0 and 0 < fit.r2 < 1 and (fit.low, fit.high) == (0.35, 0.48)


def test_the_harness_adds_cost_density_and_iie() -> None:
    summary = {
        "medcog[route=scot]": {"questions": 10, "accuracy": 0.4, "cost_per_question": 0.005},
        "medcog": {
            "questions": 10,
            "accuracy": 0.45,
            "cost_per_question": 0.003,
            "routes": {"scot": 7, "zero_shot": 3},
        },
    }
    add_efficiency(summary, "medagentsbench-gpt4o-medqa-hard", None)
    meta, scot = summary["medcog"], summary["medcog[route=scot]"]
    assert meta["cost_per_question"] == 0.003 and meta["iie_reference"] == "medcog[route=scot]"
    assert meta["iie"] == pytest.approx((0.45 - 0.4) / (0.003 - 0.005), abs=1e-3)
    assert meta["inference_density"] > scot["inference_density"] > 0 and meta["density_in_fitted_range"]
    assert meta["scaling_fit"]["r2"] == round(REFERENCE_SETS["medagentsbench-gpt4o-medqa-hard"].fit().r2, 4)
    with pytest.raises(UsageError, match="not among the runs"):
        add_efficiency(summary, "medagentsbench-gpt4o-medqa-hard", "cot")
    with pytest.raises(UsageError, match="unknown scaling reference 'mine'"):
        add_efficiency(summary, "mine", None)
    notes = efficiency_notes(summary)
    assert "R\u00b2" in notes[0] and "IIE" in notes[1] and notes[-1] == "medcog routes: scot 7, zero_shot 3."


def test_a_reference_from_the_users_own_runs(tmp_path: Path) -> None:
    table = tmp_path / "mine.csv"
    table.write_text("method,accuracy,cost_usd\n" + "".join(f"m{i},{a},{c}\n" for i, (a, c) in enumerate(LINE)))
    own = load_reference(table)
    assert own.name == "mine" and len(own.points) == 4 and own.fit().a == pytest.approx(0.2)
    report = tmp_path / "report"
    report.mkdir()
    runs = {f"run{i}": {"accuracy": a, "cost_per_question": c} for i, (a, c) in enumerate(LINE)}
    runs["ORACLE"] = {"accuracy": 0.99, "cost_per_question": None}
    runs["free"] = {"accuracy": 0.5, "cost_per_question": 0.0}  # a run that cost nothing is not a point
    (report / "summary.json").write_text(json.dumps(runs))
    assert [p[0] for p in load_reference(report).points] == ["run0", "run1", "run2", "run3"]
    summary = {"x": {"questions": 2, "accuracy": 0.3, "cost_per_question": 0.25}}
    add_efficiency(summary, table, None)
    assert summary["x"]["inference_density"] == pytest.approx(4.0) and summary["x"]["scaling_fit"]["r2"] == 1.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("method,accuracy\nm,0.3\n", "missing column.*cost_usd"),
        ("method,accuracy,cost_usd\nm,35,0.01\nn,0.4,0.02\n", "row 2: accuracy 35.0 is not in"),
        ("method,accuracy,cost_usd\nm,0.3,x\n", "row 2: accuracy and cost_usd must be numbers"),
        ("method,accuracy,cost_usd\nm,0.3,0\n", "row 2: cost_usd 0.0 is not a positive"),
        ("method,accuracy,cost_usd\nm,0.3,0.1\n", "two or more reference points; found 1"),
    ],
)
def test_a_wrong_reference_file_names_its_row(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "ref.csv"
    path.write_text(text)
    with pytest.raises(InputDataError, match=message):
        load_reference(path)


def test_a_tiny_density_keeps_its_significant_digits() -> None:
    # far below the fitted accuracies the curve's cost is tiny: the density must not round to 0
    density, in_range = inference_density(fit_scaling(LINE), 0.3 + 0.2 * math.log(1e-6), 0.01)
    assert density == pytest.approx(1e-4, rel=1e-3) and density > 0 and not in_range
