"""``metakg query ...``: ask a bundle's graph through the configured GraphStore."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from enum import StrEnum

import typer

from metakg import api
from metakg.cli._common import AS_OF_HELP, JSON_HELP, err, finish, guarded, out, progress, settings
from metakg.errors import UsageError

app = typer.Typer(rich_markup_mode=None, help="Query a bundle: neighbours, paths, name search.", no_args_is_help=True)

GRAPH_HELP = "A bundle directory (embedded store), or a Neo4j URI such as bolt://127.0.0.1:7687 (Neo4j store)."
NODE_HELP = "A node id (kg:commonsenseqa/car) or a name; names are matched exactly, normalised, then by embedding."
REL_HELP = "Only follow this relation (repeat for several)."


#: the most a query asks of a store from the command line, as the HTTP API allows (a path search grows fast
#: with both; a larger ask is a typo more often than a need)
MAX_PATHS = 100
MAX_HOPS = 6
MAX_HITS = 1000


def _time(text: str | None) -> datetime | None:
    return api.parse_time(text) if text is not None else None


def path_text(path: api.GraphPath) -> str:
    """A path as ``a -[rel]-> b <-[rel]- c`` (arrows in each edge's stored direction)."""
    parts = [path.nodes[0]]
    for edge, node in zip(path.edges, path.nodes[1:], strict=True):
        arrow = f"-[{edge.display}]->" if edge.dst == node else f"<-[{edge.display}]-"
        parts.extend([arrow, node])
    return " ".join(parts)


@app.command("neighbours")
def neighbours(
    graph: str = typer.Argument(..., help=GRAPH_HELP),
    node: str = typer.Argument(..., help=NODE_HELP),
    rel: list[str] | None = typer.Option(None, "--rel", help=REL_HELP),
    limit: int = typer.Option(20, min=1, max=100_000, help="At most this many neighbours."),
    as_of: str | None = typer.Option(None, "--as-of", help=AS_OF_HELP),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """List the neighbours of a node, outgoing edges first."""
    cfg = settings()
    with guarded("query neighbours", json_mode):
        if rel is not None and any(not r.strip() for r in rel):
            raise UsageError("--rel is empty: give a relation name (metakg query schema lists them).")
        with progress("loading store") as say, api.open_store(cfg, graph, as_of=_time(as_of), progress=say) as store:
            found, items = api.neighbours_of(store, node, relations=rel, limit=limit)
        if not json_mode:
            out.print(f"{found.name} ({found.id}, {found.type}): {len(items)} neighbours", markup=False)
            for n in items:
                arrow = f"-[{n.edge.display}]->" if n.direction == "out" else f"<-[{n.edge.display}]-"
                out.print(f"  {arrow} {n.node.name} ({n.node.id})", highlight=False, markup=False)
        hint = _relations_hint(graph, rel, "at this node") if rel and not items else None
        if hint and not json_mode:
            err.print(hint, markup=False, highlight=False)
        finish(
            True,
            {
                "command": "query neighbours",
                "node": asdict(found),
                "count": len(items),
                **({"hint": hint} if hint else {}),
                "neighbours": [
                    {"direction": n.direction, "edge": asdict(n.edge), "node": asdict(n.node)} for n in items
                ],
            },
            json_mode=json_mode,
        )


@app.command("path")
def path(
    graph: str = typer.Argument(..., help=GRAPH_HELP),
    start: str = typer.Argument(..., help=NODE_HELP),
    end: str = typer.Argument(..., help=NODE_HELP),
    k: int = typer.Option(1, "--k", "-k", min=1, max=MAX_PATHS, help=f"How many shortest paths (at most {MAX_PATHS})."),
    max_hops: int | None = typer.Option(
        None, min=1, max=MAX_HOPS, help=f"Longest path considered (default: store.max_hops, 3; at most {MAX_HOPS})."
    ),
    rel: list[str] | None = typer.Option(None, "--rel", help=REL_HELP),
    as_of: str | None = typer.Option(None, "--as-of", help=AS_OF_HELP),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Find up to k shortest simple paths between two nodes (edges followed in either direction).
    Exit 1 when there is none within the hop limit."""
    cfg = settings()
    with guarded("query path", json_mode):
        with progress("loading store") as say, api.open_store(cfg, graph, as_of=_time(as_of), progress=say) as store:
            a, b, paths = api.paths_between(
                store,
                start,
                end,
                k=k,
                max_hops=cfg.store.max_hops if max_hops is None else max_hops,
                relations=rel,
            )
        hint = _relations_hint(graph, rel, "on a path between them") if rel and not paths else None
        if not json_mode:
            out.print(f"{len(paths)} path(s) from {a.name} to {b.name}", markup=False)
            for p in paths:
                out.print(f"  {p.hops} hops: {path_text(p)}", highlight=False, markup=False)
            if hint:
                err.print(hint, markup=False, highlight=False)
        finish(
            bool(paths),
            {
                "command": "query path",
                "from": a.id,
                "to": b.id,
                "count": len(paths),
                **({"hint": hint} if hint else {}),
                "paths": [{"nodes": list(p.nodes), "edges": [asdict(e) for e in p.edges]} for p in paths],
            },
            json_mode=json_mode,
        )


def _relations_hint(graph: str, rel: list[str], where: str) -> str:
    """What to say when nothing was found with ``--rel``: a relation may be misspelt."""
    return f"no edge of {', '.join(rel)} {where}; `metakg query schema {graph}` lists the relations"


class ModeChoice(StrEnum):
    """Search modes."""

    auto = "auto"
    exact = "exact"
    normalised = "normalised"
    fuzzy = "fuzzy"
    embedding = "embedding"


@app.command("search")
def search(
    graph: str = typer.Argument(..., help=GRAPH_HELP),
    text: str = typer.Argument(..., help="A name to look for."),
    mode: ModeChoice = typer.Option(
        ModeChoice.auto,
        help="auto: the exact and normalised matches, then typos (fuzzy), then the most similar names (embedding), "
        "up to -k nodes.",
    ),
    k: int = typer.Option(10, "--k", "-k", min=1, max=MAX_HITS, help=f"At most this many hits (at most {MAX_HITS})."),
    as_of: str | None = typer.Option(None, "--as-of", help=AS_OF_HELP),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Find nodes by name or alias: exact, normalised (case, punctuation, leading article), within a few letter
    edits (typos), or by embedding similarity; auto gives each node once, in the first way that found it."""
    cfg = settings()
    with guarded("query search", json_mode):
        with progress("searching") as say, api.open_store(cfg, graph, as_of=_time(as_of), progress=say) as store:
            hits = api.search_nodes(store, text, mode=mode.value, k=k)
        if not json_mode:
            for h in hits:
                out.print(f"{h.score:.3f} {h.match:<10} {h.node.name} ({h.node.id})", highlight=False, markup=False)
            if not hits:
                out.print("no match")
        finish(
            True,
            {
                "command": "query search",
                "count": len(hits),
                "hits": [{"score": h.score, "match": h.match, "node": asdict(h.node)} for h in hits],
            },
            json_mode=json_mode,
        )


@app.command("schema")
def schema(
    graph: str | None = typer.Argument(None, help=GRAPH_HELP + " Omit for the configured Neo4j."),
    top: int = typer.Option(50, "--top", min=1, max=10_000, help="Relation patterns in the text, most frequent first."),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """The graph's schema as an LLM writing Cypher needs it (Text2Cypher): labels, what each property holds,
    the relationship layout, and the relation patterns with their counts (for a graph loaded generic, the
    values of r.rel). Give the text to neo4j-graphrag's Text2CypherRetriever(neo4j_schema=...) or LangChain's
    Neo4jGraph.schema."""
    cfg = settings()
    with guarded("query schema", json_mode):
        found = api.graph_schema(cfg, graph, top=top)
        if not json_mode:
            out.print(found.text, markup=False, highlight=False)
        finish(True, {"command": "query schema", **found.as_dict()}, json_mode=json_mode)
