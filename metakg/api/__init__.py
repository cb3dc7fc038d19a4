"""The composition root: turns settings into objects, wires the stages, returns values.

The CLI (and any program using metakg as a library) calls only this package. Every function returns
plain results and reports progress through optional callbacks; none prints or exits. One module per
stage, everything re-exported here and loaded on first use, so a command (or a program) loads only the stages
it uses: ``metakg info`` starts in about half the time it took when every stage loaded with the package.

- :mod:`~metakg.api.ingest`: triple files and PrimeKG into bundles.
- :mod:`~metakg.api.bundles`: validate, describe, merge, embed, export as RDF.
- :mod:`~metakg.api.stores`: open a store (a context manager), query it, load Neo4j.
- :mod:`~metakg.api.schema`: the graph's schema for an LLM writing Cypher.
- :mod:`~metakg.api.llm`: the metered, cached LLM session; the local server.
- :mod:`~metakg.api.extract`: LLM triple extraction.
- :mod:`~metakg.api.extraction_eval`: extraction scored on a Text2KGBench-layout dataset.
- :mod:`~metakg.api.wikidata`: incremental Wikidata sync.
- :mod:`~metakg.api.qa`: ask, evaluate, the strategies.
- :mod:`~metakg.api.tune`: a grid over retrieval settings, without an LLM.
- :mod:`~metakg.api.calibrate`: MedCoG's thresholds from its five fixed routes.
- :mod:`~metakg.api.demo`: the demo.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from metakg.api.bundles import (
        REPORT_HTML,
        REPORT_JSON,
        EmbeddingsEntry,
        Manifest,
        RdfExport,
        RecordedDiff,
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
        check_casebank,
        grow_from_report,
    )
    from metakg.api.demo import DemoResult, demo_file, demo_triples_file, run_demo
    from metakg.api.extract import (
        FORMATS,
        PROMPT_MODES,
        READERS,
        DatasetFormat,
        ExtractEstimate,
        Extraction,
        ExtractOptions,
        Reader,
        RunStats,
        TextSource,
        benchmark_responder,
        estimate_extraction,
        extract,
        extracted_dataset,
        formats_help,
        formats_table,
        link_target,
    )
    from metakg.api.extraction_eval import (
        EVAL_EXTRACTION_COLUMNS,
        ExtractionEval,
        Responder,
        evaluate_extraction,
        extraction_table,
    )
    from metakg.api.identity import (
        GOLD_FORMATS,
        NAME_SCORERS,
        ClusterScore,
        ClusterView,
        IdentityCounts,
        NameScoring,
        Resolved,
        Split,
        curated_bundle,
        identity_eval,
        identity_eval_bundle,
        identity_show,
        identity_split,
        resolve,
    )
    from metakg.api.ingest import (
        TriplesAdded,
        add_triples,
        ingest_primekg,
        ingest_triples,
        primekg_download,
        rejects_tolerated,
        synthetic_primekg,
    )
    from metakg.api.llm import (
        SharedLLM,
        llm_reply,
        llm_session,
        run_with,
        start_local_server,
        stop_local_server,
        with_endpoint,
    )
    from metakg.api.local_graph import local_graph, with_local_kg
    from metakg.api.qa import (
        COLUMNS,
        EVAL_FORMATS,
        STRATEGIES,
        Answer,
        AnswerSnapshot,
        Benchmark,
        Question,
        Runs,
        RunSpec,
        StrategyInfo,
        answer_over,
        answer_snapshot,
        ask,
        comparison_table,
        create_strategy,
        describe_strategies,
        evaluate_benchmark,
        make_question,
        p_text,
        paired_text,
        qa_context,
        qa_services,
        read_questions,
        sign_test,
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
        check_settings,
        llm_runner,
    )
    from metakg.api.stores import (
        AdminImport,
        ElementVersion,
        Neo4jLoad,
        as_relations,
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
    from metakg.api.tune import TUNE_COLUMNS, Grid, TuneResult, parse_grid, tune_benchmark, tune_table, with_overrides
    from metakg.api.wikidata import WikidataSync, sparql_client, sync_wikidata
    from metakg.loaders.neo4j_loader import FollowReport, LoadReport
    from metakg.qa_engine.efficiency import DEFAULT_SCALING, REFERENCE_SETS
    from metakg.qa_engine.evaluate import efficiency_notes
    from metakg.schemas.graph_store import GraphPath, GraphStore
    from metakg.schemas.history import parse_time

#: where each public name lives: a name's module is imported when the name is first used, so a command
#: loads only the stages it runs (``metakg info`` never loads the QA engine or Great Expectations)
_HOMES: dict[str, tuple[str, ...]] = {
    # what the command line's help text reads as it loads comes from where it is defined, not through the stage
    # module that re-exports it (which would load that whole stage)
    "metakg.api._shared": ("DEFAULT_GRID",),
    "metakg.ingest.datasets": ("formats_help",),
    "metakg.api.bundles": (
        "REPORT_HTML",
        "REPORT_JSON",
        "EmbeddingsEntry",
        "Manifest",
        "RdfExport",
        "RecordedDiff",
        "bundle_info",
        "bundle_token",
        "diff",
        "embed_bundle",
        "export_rdf",
        "merge",
        "recorded_diff",
        "validate_bundle",
        "validation_page",
        "write_validated",
    ),
    "metakg.api.calibrate": (
        "Calibration",
        "CasebankGrowth",
        "Goal",
        "build_casebank",
        "calibrate_medcog",
        "check_casebank",
        "grow_from_report",
    ),
    "metakg.api.demo": (
        "DemoResult",
        "demo_file",
        "demo_triples_file",
        "run_demo",
    ),
    "metakg.api.extract": (
        "FORMATS",
        "PROMPT_MODES",
        "READERS",
        "DatasetFormat",
        "ExtractEstimate",
        "Extraction",
        "ExtractOptions",
        "Reader",
        "RunStats",
        "TextSource",
        "benchmark_responder",
        "estimate_extraction",
        "extract",
        "extracted_dataset",
        "formats_table",
        "link_target",
    ),
    "metakg.api.extraction_eval": (
        "EVAL_EXTRACTION_COLUMNS",
        "ExtractionEval",
        "Responder",
        "evaluate_extraction",
        "extraction_table",
    ),
    "metakg.api.identity": (
        "GOLD_FORMATS",
        "NAME_SCORERS",
        "ClusterScore",
        "ClusterView",
        "IdentityCounts",
        "NameScoring",
        "Resolved",
        "Split",
        "curated_bundle",
        "identity_eval",
        "identity_eval_bundle",
        "identity_show",
        "identity_split",
        "resolve",
    ),
    "metakg.api.ingest": (
        "TriplesAdded",
        "add_triples",
        "ingest_primekg",
        "ingest_triples",
        "primekg_download",
        "rejects_tolerated",
        "synthetic_primekg",
    ),
    "metakg.api.llm": (
        "SharedLLM",
        "llm_reply",
        "llm_session",
        "run_with",
        "start_local_server",
        "stop_local_server",
        "with_endpoint",
    ),
    "metakg.api.local_graph": (
        "local_graph",
        "with_local_kg",
    ),
    "metakg.api.qa": (
        "COLUMNS",
        "EVAL_FORMATS",
        "STRATEGIES",
        "Answer",
        "AnswerSnapshot",
        "Benchmark",
        "Question",
        "Runs",
        "RunSpec",
        "StrategyInfo",
        "answer_over",
        "answer_snapshot",
        "ask",
        "comparison_table",
        "create_strategy",
        "describe_strategies",
        "evaluate_benchmark",
        "make_question",
        "p_text",
        "paired_text",
        "qa_context",
        "qa_services",
        "read_questions",
        "sign_test",
        "strategies_left_out",
        "trace_lines",
    ),
    "metakg.api.schema": (
        "GraphSchema",
        "graph_schema",
    ),
    "metakg.api.session": (
        "EvalOptions",
        "EvaluationResult",
        "LLMRunner",
        "NoLLM",
        "OneShotLLM",
        "QASession",
        "SharedRunner",
        "StoreChoice",
        "check_settings",
        "llm_runner",
    ),
    "metakg.api.stores": (
        "AdminImport",
        "ElementVersion",
        "Neo4jLoad",
        "as_relations",
        "element_history",
        "export_neo4j_admin",
        "graph_as_of",
        "load_neo4j",
        "name_embedder",
        "neighbours_of",
        "node_by_id",
        "open_store",
        "paths_between",
        "resolve_node",
        "search_nodes",
        "snapshot",
    ),
    "metakg.api.tune": (
        "TUNE_COLUMNS",
        "Grid",
        "TuneResult",
        "parse_grid",
        "tune_benchmark",
        "tune_table",
        "with_overrides",
    ),
    "metakg.api.wikidata": (
        "WikidataSync",
        "sparql_client",
        "sync_wikidata",
    ),
    "metakg.loaders.neo4j_loader": (
        "FollowReport",
        "LoadReport",
    ),
    "metakg.qa_engine.efficiency": (
        "DEFAULT_SCALING",
        "REFERENCE_SETS",
    ),
    "metakg.qa_engine.evaluate": ("efficiency_notes",),
    "metakg.schemas.graph_store": (
        "GraphPath",
        "GraphStore",
    ),
    "metakg.schemas.history": ("parse_time",),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "COLUMNS",
    "DEFAULT_GRID",
    "DEFAULT_SCALING",
    "EVAL_EXTRACTION_COLUMNS",
    "EVAL_FORMATS",
    "FORMATS",
    "GOLD_FORMATS",
    "NAME_SCORERS",
    "PROMPT_MODES",
    "READERS",
    "REFERENCE_SETS",
    "REPORT_HTML",
    "REPORT_JSON",
    "STRATEGIES",
    "TUNE_COLUMNS",
    "AdminImport",
    "Answer",
    "AnswerSnapshot",
    "Benchmark",
    "Calibration",
    "CasebankGrowth",
    "ClusterScore",
    "ClusterView",
    "DatasetFormat",
    "DemoResult",
    "ElementVersion",
    "EmbeddingsEntry",
    "EvalOptions",
    "EvaluationResult",
    "ExtractEstimate",
    "ExtractOptions",
    "Extraction",
    "ExtractionEval",
    "FollowReport",
    "Goal",
    "GraphPath",
    "GraphSchema",
    "GraphStore",
    "Grid",
    "IdentityCounts",
    "LLMRunner",
    "LoadReport",
    "Manifest",
    "NameScoring",
    "Neo4jLoad",
    "NoLLM",
    "OneShotLLM",
    "QASession",
    "Question",
    "RdfExport",
    "Reader",
    "RecordedDiff",
    "Resolved",
    "Responder",
    "RunSpec",
    "RunStats",
    "Runs",
    "SharedLLM",
    "SharedRunner",
    "Split",
    "StoreChoice",
    "StrategyInfo",
    "TextSource",
    "TriplesAdded",
    "TuneResult",
    "WikidataSync",
    "add_triples",
    "answer_over",
    "answer_snapshot",
    "as_relations",
    "ask",
    "benchmark_responder",
    "build_casebank",
    "bundle_info",
    "bundle_token",
    "calibrate_medcog",
    "check_casebank",
    "check_settings",
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
    "estimate_extraction",
    "evaluate_benchmark",
    "evaluate_extraction",
    "export_neo4j_admin",
    "export_rdf",
    "extract",
    "extracted_dataset",
    "extraction_table",
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
    "p_text",
    "paired_text",
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
    "sign_test",
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
    "with_endpoint",
    "with_local_kg",
    "with_overrides",
    "write_validated",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use, and keep the name here for the next."""
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


class _Api(types.ModuleType):
    """The package as a module object that keeps its public names: importing a stage module sets the package's
    attribute of that name to the module (the import system does so), and ``metakg.api.extract`` is both a
    module and the stage's function; the function stays."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _HOME_OF.get(name) is not None:
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Api


def __dir__() -> list[str]:
    """The public names, loaded or not (for completion in an interactive session)."""
    return sorted(set(globals()) | set(__all__))
