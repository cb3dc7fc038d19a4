"""Example answers of the HTTP API, shown by the reference pages (``/docs``, ``/redoc``) beside each route.

The routes answer JSON built from metakg's own records rather than response models, so without these the
pages would show ``{ }`` for every answer. Each is an answer of a real server over a small graph, cut short;
a test checks that every example has the keys the route's real answer has.
"""

from __future__ import annotations

from typing import Any

ASPIRIN: dict[str, Any] = {
    "id": "drugbank:DB00945",
    "name": "aspirin",
    "type": "drug",
    "source": "primekg",
    "description": "a common painkiller",
    "aliases": ["acetylsalicylic acid", "ASA"],
    "xrefs": ["wd:Q18216"],
}
HEADACHE: dict[str, Any] = {
    "id": "hp:0002315",
    "name": "headache",
    "type": "phenotype",
    "source": "primekg",
    "description": None,
    "aliases": ["cephalalgia"],
    "xrefs": [],
}
TREATS: dict[str, Any] = {
    "id": "e:f7596a9ccf76c6b7",
    "src": "drugbank:DB00945",
    "dst": "hp:0002315",
    "rel": "treats",
    "display": "treats",
    "source": "primekg",
    "confidence": 0.9,
    "count": 1,
}
PATH: dict[str, Any] = {
    "nodes": ["drugbank:DB00945", "hp:0002315"],
    "edges": ["e:f7596a9ccf76c6b7"],
    "triples": [["aspirin", "treats", "headache"]],
    "ends": [["drugbank:DB00945", "hp:0002315"]],
}
RUN: dict[str, Any] = {
    "id": "20261202-101500-3f2a",
    "status": "running",
    "created": 1764670500.0,
    "started": 1764670500.2,
    "finished": None,
    "progress": {"done": 12, "total": 50},
    "error": None,
}

#: the example answer of each route, by method and path
EXAMPLES: dict[tuple[str, str], Any] = {
    ("get", "/api/health"): {"status": "ok", "version": "0.1.0", "store": "embedded"},
    ("get", "/api/graphs"): [
        {"name": "primekg", "path": "/", "store": "embedded", "current": True},
        {"name": "trials", "path": "/graphs/trials/", "store": "embedded", "current": False},
    ],
    ("get", "/api/graph"): {
        "counts": {"nodes": 129375, "edges": 4050249},
        "sources": [{"name": "primekg", "records": 8100498}],
        "validation": {"ok": True, "rejected": 0, "warned": 3},
    },
    ("get", "/api/nodes/{node_id}"): ASPIRIN,
    ("get", "/api/neighbours"): [{"node": HEADACHE, "edge": TREATS, "direction": "out"}],
    ("get", "/api/search"): [{"node": ASPIRIN, "score": 1.0, "match": "exact"}],
    ("get", "/api/paths"): [{"nodes": PATH["nodes"], "edges": [TREATS], "hops": 1}],
    ("get", "/api/strategies"): [
        {
            "name": "metakgrag",
            "summary": "MetaKGRAG: greedy multi-start paths refined by a Perceive-Evaluate-Adjust cycle.",
            "section": "qa.metakgrag",
            "uses_graph": True,
            "needs_llm": False,
            "switches": ["no_completeness", "no_relevance", "no_restart", "no_cycle"],
            "settings": [
                {"key": "n_max", "type": "int", "default": 3, "description": "Most cycles per path."},
            ],
        }
    ],
    ("post", "/api/triples"): {
        "read": 2,
        "accepted": 1,
        "rejected": [{"triple": 2, "check": "bad_relation", "reason": "relation has no letters"}],
        "nodes": ["kg:notes/aspirin", "kg:notes/headache"],
        "edges": ["e:0b1c2d3e4f5a6b7c"],
    },
    ("post", "/api/ask"): {
        "question_id": "q1",
        "strategy": "metakgrag",
        "status": "ok",
        "text": "headache",
        "choice": "A",
        "reason": "",
        "evidence": [PATH],
        "support": [0],
        "sources": [{"edge": TREATS["id"], "cited": ["leaflet.pdf p. 2, 1 Uses"]}],
        "usage": {
            "llm_calls": 1,
            "cache_hits": 0,
            "failures": 0,
            "prompt_tokens": 362,
            "completion_tokens": 4,
            "saved_tokens": 0,
            "cost_usd": 0.0,
            "list_cost_usd": 0.0,
            "llm_ms": 812.0,
            "retrieval_ms": 41.0,
            "setup_ms": 0.0,
            "total_ms": 853.0,
            "calls": [],
            "tokens": 366,
        },
        "trace": {
            "concepts": ["aspirin", "headache"],
            "question_concepts": ["aspirin"],
            "concept_method": "rules",
            "start_entities": [
                {"concept": "aspirin", "id": "drugbank:DB00945", "name": "aspirin", "score": 1.0, "match": "exact"}
            ],
            "ablation": "full",
            "paths": [],
            "cycles": 1,
            "refined_paths": 0,
            "path_refinement_rate": 0.0,
        },
        "trace_lines": ["concepts, by rules: aspirin, headache", "start entities: aspirin (1.0)"],
    },
    ("post", "/api/evaluations"): RUN | {"status": "queued", "started": None, "url": f"/api/evaluations/{RUN['id']}"},
    ("get", "/api/evaluations"): [RUN],
    ("get", "/api/evaluations/{run_id}"): RUN
    | {
        "status": "done",
        "finished": 1764670620.5,
        "request": {"benchmark": "csqa_dev.jsonl", "format": "csqa", "strategies": ["metakgrag"], "limit": 50},
        "summary": {"metakgrag": {"questions": 50, "accuracy": 0.62, "recall@10": 0.97}},
        "comparison": "| run | accuracy | recall@10 |\n| metakgrag | 0.62 | 0.97 |",
    },
    ("delete", "/api/evaluations/{run_id}"): RUN | {"status": "cancelled", "finished": 1764670530.0},
}


def example(method: str, path: str, status: int = 200) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` entry that shows the example answer of the route ``method path``."""
    return {
        status: {
            "description": "Successful Response",
            "content": {"application/json": {"example": EXAMPLES[(method, path)]}},
        }
    }
