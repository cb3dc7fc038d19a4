"""great-expectations suites for the node and edge tables (the only module that imports great_expectations).

Suites run on the tables as read, before any row is removed, so their results say which checks the input
failed and by how many rows; :mod:`metakg.schemas.validation` removes those rows with the same check names.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import polars as pl

from metakg.schemas.curie import NODE_ID_PATTERN
from metakg.schemas.tables import RELATION_PATTERN


@dataclass(frozen=True)
class ExpectationOutcome:
    """The result of one expectation on one table."""

    check: str
    table: str
    expectation: str
    success: bool
    unexpected_count: int
    element_count: int


def _node_suite(gx: Any, types: Iterable[str]) -> list[tuple[str, Any]]:
    e = gx.expectations
    return [
        ("nodes.table_not_empty", e.ExpectTableRowCountToBeBetween(min_value=1)),
        ("nodes.id_not_null", e.ExpectColumnValuesToNotBeNull(column="id")),
        ("nodes.id_curie", e.ExpectColumnValuesToMatchRegex(column="id", regex=NODE_ID_PATTERN)),
        ("nodes.id_unique", e.ExpectColumnValuesToBeUnique(column="id")),
        ("nodes.name_not_empty", e.ExpectColumnValueLengthsToBeBetween(column="name", min_value=1)),
        ("nodes.name_not_empty", e.ExpectColumnValuesToNotBeNull(column="name")),
        ("nodes.type_in_vocabulary", e.ExpectColumnValuesToBeInSet(column="type", value_set=sorted(types))),
    ]


def _edge_suite(gx: Any) -> list[tuple[str, Any]]:
    e = gx.expectations
    return [
        ("edges.id_not_null", e.ExpectColumnValuesToNotBeNull(column="id")),
        ("edges.id_unique", e.ExpectColumnValuesToBeUnique(column="id")),
        ("edges.endpoints_not_null", e.ExpectColumnValuesToNotBeNull(column="src")),
        ("edges.endpoints_not_null", e.ExpectColumnValuesToNotBeNull(column="dst")),
        ("edges.relation_format", e.ExpectColumnValuesToMatchRegex(column="rel", regex=RELATION_PATTERN)),
        ("edges.relation_format", e.ExpectColumnValuesToNotBeNull(column="rel")),
        ("edges.confidence_in_range", e.ExpectColumnValuesToNotBeNull(column="confidence")),
        (
            "edges.confidence_in_range",
            e.ExpectColumnValuesToBeBetween(column="confidence", min_value=0.0, max_value=1.0),
        ),
        ("edges.count_positive", e.ExpectColumnValuesToBeBetween(column="count", min_value=1)),
    ]


def run_suites(nodes: pl.DataFrame, edges: pl.DataFrame, types: Iterable[str]) -> list[ExpectationOutcome]:
    """Run the node and edge suites with an ephemeral great-expectations context.

    Args:
        nodes: the node table (columns id, name, type at least).
        edges: the edge table (columns id, src, dst, rel, confidence, count at least).
        types: the allowed node types.

    Returns:
        One outcome per expectation, in suite order.
    """
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    gx: Any = importlib.import_module("great_expectations")

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = gx.data_context.types.base.ProgressBarsConfig(globally=False)
    source = context.data_sources.add_pandas("metakg")
    outcomes: list[ExpectationOutcome] = []
    plan = [
        ("nodes", nodes.select("id", "name", "type"), _node_suite(gx, types)),
        ("edges", edges.select("id", "src", "dst", "rel", "confidence", "count"), _edge_suite(gx)),
    ]
    for table, frame, expectations in plan:
        asset = source.add_dataframe_asset(table)
        batch_def = asset.add_batch_definition_whole_dataframe(f"{table}-all")
        suite = context.suites.add(gx.ExpectationSuite(name=f"metakg.{table}"))
        for _check, expectation in expectations:
            suite.add_expectation(expectation)
        batch = batch_def.get_batch(batch_parameters={"dataframe": frame.to_pandas()})
        result = batch.validate(suite, result_format="SUMMARY")
        for (check, _e), res in zip(expectations, result.results, strict=True):
            outcomes.append(
                ExpectationOutcome(
                    check=check,
                    table=table,
                    expectation=str(getattr(res.expectation_config, "type", "")),
                    success=bool(res.success),
                    unexpected_count=int(res.result.get("unexpected_count") or 0),
                    element_count=int(res.result.get("element_count") or res.result.get("observed_value") or 0),
                )
            )
    return outcomes
