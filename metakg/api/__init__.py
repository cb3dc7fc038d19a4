"""The composition root: turns settings into objects, wires the stages, returns values.

The CLI (and any program using metakg as a library) calls only this package. Every function returns
plain results and reports progress through optional callbacks; none prints or exits. One module per
stage, everything re-exported here:

- :mod:`~metakg.api.ingest`: triple files and PrimeKG into bundles.
- :mod:`~metakg.api.bundles`: validate, describe, merge, embed, export as RDF.
- :mod:`~metakg.api.stores`: open a store (a context manager), query it, load Neo4j.
- :mod:`~metakg.api.schema`: the graph's schema for an LLM writing Cypher.
- :mod:`~metakg.api.llm`: the metered, cached LLM session; the local server.
- :mod:`~metakg.api.extract`: LLM triple extraction.
- :mod:`~metakg.api.wikidata`: incremental Wikidata sync.
- :mod:`~metakg.api.qa`: ask, evaluate, the strategies.
- :mod:`~metakg.api.tune`: a grid over retrieval settings, without an LLM.
- :mod:`~metakg.api.calibrate`: MedCoG's thresholds from its five fixed routes.
- :mod:`~metakg.api.demo`: the demo.
"""

from __future__ import annotations

from metakg.api.bundles import (
    REPORT_HTML,
    REPORT_JSON,
    RdfExport,
    bundle_info,
    bundle_token,
    diff,
    embed_bundle,
    export_rdf,
    merge,
    recorded_diff,
    validate_bundle,
    validation_page,
    write_validated,
)
from metakg.api.calibrate import (
    DEFAULT_GRID,
    Calibration,
    CasebankGrowth,
    Goal,
    build_casebank,
    calibrate_medcog,
    grow_from_report,
)
from metakg.api.demo import DemoResult, demo_file, demo_triples_file, run_demo
from metakg.api.extract import (
    FORMATS,
    READERS,
    DatasetFormat,
    Reader,
    RunStats,
    extract,
    extracted_dataset,
    formats_help,
    formats_table,
    link_target,
)
from metakg.api.identity import (
    GOLD_FORMATS,
    NAME_SCORERS,
    curated_bundle,
    identity_eval,
    identity_eval_bundle,
    identity_show,
    identity_split,
    resolve,
)
from metakg.api.ingest import (
    add_triples,
    ingest_primekg,
    ingest_triples,
    primekg_download,
    rejects_tolerated,
    synthetic_primekg,
)
from metakg.api.llm import SharedLLM, llm_reply, llm_session, run_with, start_local_server, stop_local_server
from metakg.api.local_graph import local_graph, with_local_kg
from metakg.api.qa import (
    COLUMNS,
    EVAL_FORMATS,
    STRATEGIES,
    Answer,
    Benchmark,
    Question,
    Runs,
    RunSpec,
    answer_over,
    answer_snapshot,
    ask,
    comparison_table,
    create_strategy,
    describe_strategies,
    evaluate_benchmark,
    make_question,
    qa_context,
    qa_services,
    read_questions,
    strategies_left_out,
    trace_lines,
)
from metakg.api.schema import GraphSchema, graph_schema
from metakg.api.session import (
    EvalOptions,
    EvaluationResult,
    LLMRunner,
    NoLLM,
    OneShotLLM,
    QASession,
    SharedRunner,
    StoreChoice,
    llm_runner,
)
from metakg.api.stores import (
    element_history,
    export_neo4j_admin,
    graph_as_of,
    load_neo4j,
    name_embedder,
    neighbours_of,
    node_by_id,
    open_store,
    paths_between,
    resolve_node,
    search_nodes,
    snapshot,
)
from metakg.api.tune import TUNE_COLUMNS, TuneResult, parse_grid, tune_benchmark, tune_table, with_overrides
from metakg.api.wikidata import sparql_client, sync_wikidata
from metakg.qa_engine.efficiency import DEFAULT_SCALING, REFERENCE_SETS
from metakg.qa_engine.evaluate import efficiency_notes
from metakg.schemas.graph_store import GraphPath, GraphStore
from metakg.schemas.history import parse_time

__all__ = [
    "COLUMNS",
    "DEFAULT_GRID",
    "DEFAULT_SCALING",
    "EVAL_FORMATS",
    "FORMATS",
    "GOLD_FORMATS",
    "NAME_SCORERS",
    "READERS",
    "REFERENCE_SETS",
    "REPORT_HTML",
    "REPORT_JSON",
    "STRATEGIES",
    "TUNE_COLUMNS",
    "Answer",
    "Benchmark",
    "Calibration",
    "CasebankGrowth",
    "DatasetFormat",
    "DemoResult",
    "EvalOptions",
    "EvaluationResult",
    "Goal",
    "GraphPath",
    "GraphSchema",
    "GraphStore",
    "LLMRunner",
    "NoLLM",
    "OneShotLLM",
    "QASession",
    "Question",
    "RdfExport",
    "Reader",
    "RunSpec",
    "RunStats",
    "Runs",
    "SharedLLM",
    "SharedRunner",
    "StoreChoice",
    "TuneResult",
    "add_triples",
    "answer_over",
    "answer_snapshot",
    "ask",
    "build_casebank",
    "bundle_info",
    "bundle_token",
    "calibrate_medcog",
    "comparison_table",
    "create_strategy",
    "curated_bundle",
    "demo_file",
    "demo_triples_file",
    "describe_strategies",
    "diff",
    "efficiency_notes",
    "element_history",
    "embed_bundle",
    "evaluate_benchmark",
    "export_neo4j_admin",
    "export_rdf",
    "extract",
    "extracted_dataset",
    "formats_help",
    "formats_table",
    "graph_as_of",
    "graph_schema",
    "grow_from_report",
    "identity_eval",
    "identity_eval_bundle",
    "identity_show",
    "identity_split",
    "ingest_primekg",
    "ingest_triples",
    "link_target",
    "llm_reply",
    "llm_runner",
    "llm_session",
    "load_neo4j",
    "local_graph",
    "make_question",
    "merge",
    "name_embedder",
    "neighbours_of",
    "node_by_id",
    "open_store",
    "parse_grid",
    "parse_time",
    "paths_between",
    "primekg_download",
    "qa_context",
    "qa_services",
    "read_questions",
    "recorded_diff",
    "rejects_tolerated",
    "resolve",
    "resolve_node",
    "run_demo",
    "run_with",
    "search_nodes",
    "snapshot",
    "sparql_client",
    "start_local_server",
    "stop_local_server",
    "strategies_left_out",
    "sync_wikidata",
    "synthetic_primekg",
    "trace_lines",
    "tune_benchmark",
    "tune_table",
    "validate_bundle",
    "validation_page",
    "with_local_kg",
    "with_overrides",
    "write_validated",
]
