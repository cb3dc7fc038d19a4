"""The graph: health, counts, nodes, neighbours, search, paths, the strategies, and the one write (triples,
only on a server started with ``--allow-writes``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query

import metakg
from metakg import api
from metakg.server.examples import example
from metakg.server.models import TriplesRequest, error_responses, printable
from metakg.server.served import MAX_HOPS, MAX_K, MAX_NEIGHBOURS, ServedGraph


def router(served: ServedGraph, graphs: list[dict[str, Any]]) -> APIRouter:
    """The graph's routes over ``served``; ``graphs``: every graph the server serves (``GET /api/graphs``)."""
    router = APIRouter()
    bundle, neo4j, limits = served.bundle, served.neo4j, served.limits

    @router.get("/api/graphs", responses=error_responses() | example("get", "/api/graphs"))
    def graphs_served() -> list[dict[str, Any]]:
        """The graphs this server serves (``metakg serve --bundle NAME=DIR`` repeated): each one's name, the
        path of its page (the first at ``/``, the others under ``/graphs/NAME/`` with the same routes), its
        store, and ``current``, the one this route is of."""
        return graphs

    @router.get("/api/health", responses=error_responses() | example("get", "/api/health"))
    def health() -> dict[str, Any]:
        """Liveness, the version, and which store is served."""
        return {"status": "ok", "version": metakg.__version__, "store": "neo4j" if neo4j else "embedded"}

    @router.get("/api/graph", responses=error_responses() | example("get", "/api/graph"))
    def graph() -> dict[str, Any]:
        """The graph's node and edge counts (and, for a bundle, its sources and validation summary)."""
        info: dict[str, Any] = {"counts": served.store.counts()}
        if bundle is not None:
            manifest = api.bundle_info(bundle)
            info["sources"] = [s.get("name") for s in manifest.sources]
            info["validation"] = {k: (manifest.validation or {}).get(k) for k in ("ok", "rejected", "warned")}
        shown: dict[str, Any] = printable(info)  # a received bundle's manifest may hold text that is not Unicode
        return shown

    @router.get("/api/nodes/{node_id:path}", responses=error_responses(404) | example("get", "/api/nodes/{node_id}"))
    def node(node_id: str) -> dict[str, Any]:
        """One node by id (as written or in its one form: ``MONDO:4975`` is ``mondo:0004975``)."""
        return asdict(served.node(node_id))

    @router.get("/api/neighbours", responses=error_responses(404) | example("get", "/api/neighbours"))
    def neighbours(
        id: Annotated[str, Query(min_length=1, max_length=1000, description="The node's id.")],
        relation: Annotated[list[str] | None, Query(description="Only these relations.")] = None,
        direction: Literal["out", "in", "both"] = "both",
        limit: Annotated[int, Query(ge=1, le=MAX_NEIGHBOURS)] = 50,
    ) -> list[dict[str, Any]]:
        """The node's neighbours: outgoing first, then incoming, each side in edge-id order."""
        return [asdict(nb) for nb in served.neighbours(id, relations=relation, direction=direction, limit=limit)]

    @router.get("/api/search", responses=error_responses(503) | example("get", "/api/search"))
    def search(
        q: Annotated[str, Query(min_length=1, max_length=500, description="A name or description.")],
        mode: Literal["exact", "normalised", "fuzzy", "embedding", "auto"] = "auto",
        k: Annotated[int, Query(ge=1, le=MAX_K)] = 10,
    ) -> list[dict[str, Any]]:
        """Nodes matching the text: exact name or alias, normalised, then by name embedding (``auto``)."""
        return [asdict(hit) for hit in served.search(q, mode=mode, k=k)]

    @router.get("/api/paths", responses=error_responses(404) | example("get", "/api/paths"))
    def paths(
        src: Annotated[str, Query(min_length=1, max_length=1000)],
        dst: Annotated[str, Query(min_length=1, max_length=1000)],
        k: Annotated[int, Query(ge=1, le=MAX_K)] = 3,
        max_hops: Annotated[int, Query(ge=1, le=MAX_HOPS)] = 3,
        directed: bool = False,
    ) -> list[dict[str, Any]]:
        """Up to ``k`` shortest simple paths between two node ids, shortest first."""
        found = served.paths(src, dst, k=k, max_hops=max_hops, directed=directed)
        return [asdict(path) | {"hops": path.hops} for path in found]

    @router.get("/api/strategies", responses=error_responses() | example("get", "/api/strategies"))
    def strategies() -> list[dict[str, Any]]:
        """The QA strategies, their settings and switches."""
        return [d.as_dict() for d in api.describe_strategies()]

    @router.post(
        "/api/triples",
        responses=error_responses(403, 408, 409, 413, 503, 507) | example("post", "/api/triples"),
        include_in_schema=limits.allow_writes,  # a read-only server answers 403, and does not list it
    )
    def add_triples(request: TriplesRequest) -> dict[str, Any]:
        """Add triples to the graph, read as ``metakg ingest triples`` reads a file (each failing triple
        rejected with its reason); a served bundle is validated and written back. Only on a server started
        with ``--allow-writes`` (403 otherwise)."""
        if not limits.allow_writes:
            raise HTTPException(status_code=403, detail="this server is read-only; start it with --allow-writes")
        return served.add_triples(request.triples, request.dataset).as_dict()

    return router
