"""Agent tools: a name, a description, pydantic-validated arguments and a function; a tool box turns LLM
replies into calls and calls into text results.

Two ways to call: OpenAI-style function calling, where the endpoint supports it (:meth:`ToolBox.openai_tools`
gives the function schemas), and a JSON-in-text protocol for endpoints without it (the local SmolLM2
server): the reply holds ``{"tool_calls": [{"tool": "...", "args": {...}}]}`` (or a bare list, or one such
object). Every call ends as a :class:`ToolResult`: bad JSON, an unknown tool, invalid arguments and a failing
tool all become an error text the LLM sees on its next turn, never an exception.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from metakg.errors import MetakgError
from metakg.qa_engine.primitives import json_values
from metakg.schemas.graph_store import GraphStore, NodeRecord, ReadQueries

#: characters of a tool result shown to the LLM (the trace keeps the whole result)
RESULT_CHARS = 4000


class ToolArgs(BaseModel):
    """Base of every tool's arguments: unknown keys are refused, so a misspelt argument is reported."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Tool:
    """One tool: ``run`` takes the validated arguments and returns JSON-ready data."""

    name: str
    description: str
    args: type[ToolArgs]
    run: Callable[[Any], Any]


@dataclass(frozen=True)
class ToolResult:
    """One call: the tool, its arguments as given, whether it worked, and the result or error text."""

    tool: str
    args: dict[str, Any]
    ok: bool
    text: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, for the trace."""
        return {"tool": self.tool, "args": self.args, "ok": self.ok, "text": self.text}


class ToolBox:
    """A named set of tools."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        """The tools by name (names must be unique)."""
        self.tools = {t.name: t for t in tools}
        if len(self.tools) != len(tools):
            raise ValueError("tool names repeat")

    def describe(self) -> str:
        """One line per tool for a prompt: its name, its arguments (JSON Schema properties) and what it does."""
        lines = []
        for tool in self.tools.values():
            props = tool.args.model_json_schema().get("properties", {})
            args = ", ".join(f"{k}: {v.get('type', 'any')}" for k, v in props.items())
            lines.append(f"- {tool.name}({args}): {tool.description}")
        return "\n".join(lines)

    def openai_tools(self) -> list[dict[str, Any]]:
        """The tools as OpenAI function definitions."""
        return [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.args.model_json_schema()},
            }
            for t in self.tools.values()
        ]

    def call(self, name: str, args: Any) -> ToolResult:
        """Run one call; every failure is a result with the reason, for the LLM to read."""
        given = args if isinstance(args, dict) else {}
        tool = self.tools.get(name)
        if tool is None:
            return ToolResult(name, given, False, f"unknown tool {name!r}; the tools here are: {', '.join(self.tools)}")
        if not isinstance(args, dict):
            return ToolResult(name, given, False, f"the arguments of {name} must be a JSON object")
        try:
            parsed = tool.args.model_validate(args)
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'args'}: {err['msg']}" for err in e.errors())
            return ToolResult(name, given, False, f"invalid arguments for {name}: {problems}")
        try:
            data = tool.run(parsed)
        except (MetakgError, ValueError, KeyError) as e:  # StoreError (a refused query, a missing node) included
            return ToolResult(name, given, False, f"{name} failed: {e}")
        return ToolResult(name, given, True, json.dumps(data, ensure_ascii=False, default=str)[:RESULT_CHARS])

    def run_reply(self, reply: str) -> list[ToolResult]:
        """Every call a JSON-in-text reply holds, run in order."""
        return [self.call(name, args) for name, args in parse_calls(reply)]


def parse_calls(reply: str) -> list[tuple[str, Any]]:
    """The (tool, arguments) calls of a reply: the JSON values in it, each ``{"tool_calls": [...]}``, a list of
    calls, or one call ``{"tool": name, "args": {...}}`` (``name``/``arguments`` also read)."""
    calls: list[tuple[str, Any]] = []
    for value in json_values(reply):
        items = value.get("tool_calls") if isinstance(value, dict) and "tool_calls" in value else value
        for item in items if isinstance(items, list) else [items]:
            name = item.get("tool", item.get("name")) if isinstance(item, dict) else None
            if isinstance(item, dict) and isinstance(name, str):
                calls.append((name, item.get("args", item.get("arguments", {}))))
    return calls


# ---------------------------------------------------------------------------- local tools (read-only)
class NodeArgs(ToolArgs):
    id: str = Field(description="A local node id.")


class EdgeArgs(ToolArgs):
    id: str = Field(description="A local edge id (e:...).")


class NeighbourArgs(ToolArgs):
    id: str = Field(description="A local node id.")
    relation: str | None = Field(default=None, description="Only edges of this relation.")
    limit: int = Field(default=20, ge=1, le=200)


class PathArgs(ToolArgs):
    source: str = Field(description="A local node id.")
    target: str = Field(description="A local node id.")
    k: int = Field(default=3, ge=1, le=10)
    max_hops: int = Field(default=3, ge=1, le=6)


class SearchArgs(ToolArgs):
    text: str = Field(min_length=1, description="A name or alias.")
    k: int = Field(default=5, ge=1, le=50)


class TriplesArgs(ToolArgs):
    subject: str | None = Field(default=None, description="A local node id the edges leave.")
    relation: str | None = Field(default=None, description="Only edges of this relation.")
    object: str | None = Field(default=None, description="A local node id the edges reach.")
    limit: int = Field(default=20, ge=1, le=200)


class CypherArgs(ToolArgs):
    query: str = Field(min_length=1, max_length=4000, description="One read-only Cypher query.")
    limit: int = Field(default=50, ge=1, le=500)


def _node(n: NodeRecord) -> dict[str, Any]:
    return {"id": n.id, "name": n.name, "type": n.type, "description": n.description}


def local_tools(store: GraphStore) -> ToolBox:
    """Read-only tools over the local graph: a node, an edge, a node's neighbours, paths between two nodes,
    name search, a triple pattern (through the GraphStore, so on every store) and, on a store that runs
    queries in its own language (Neo4j), that query read-only (a query that would write is refused)."""

    def node(a: NodeArgs) -> Any:
        found = store.get_node(a.id)
        if found is None:
            raise KeyError(f"no local node {a.id}")
        return _node(found) | {"aliases": list(found.aliases)}

    def edge(a: EdgeArgs) -> Any:
        whole = getattr(store, "bundle", None)
        if whole is None:
            raise ValueError("this store cannot look an edge up by id; use local_triples")
        edges = whole().edges
        found = edges.filter(pl.col("id") == a.id).select("id", "src", "rel", "dst", "display", "source", "confidence")
        if found.height == 0:
            raise KeyError(f"no local edge {a.id}")
        return found.to_dicts()[0]

    def neighbours(a: NeighbourArgs) -> Any:
        relations = [a.relation] if a.relation else None
        return [
            {"edge": nb.edge.id, "relation": nb.edge.rel, "direction": nb.direction, "node": _node(nb.node)}
            for nb in store.neighbours(a.id, relations=relations, limit=a.limit)
        ]

    def paths(a: PathArgs) -> Any:
        return [
            {"nodes": list(p.nodes), "edges": [{"id": e.id, "src": e.src, "rel": e.rel, "dst": e.dst} for e in p.edges]}
            for p in store.shortest_paths(a.source, a.target, k=a.k, max_hops=a.max_hops)
        ]

    def search(a: SearchArgs) -> Any:
        return [_node(h.node) | {"score": round(h.score, 3)} for h in store.search(a.text, mode="auto", k=a.k)]

    def triples(a: TriplesArgs) -> Any:
        relations = [a.relation] if a.relation else None
        if a.subject is not None:
            around = store.neighbours(a.subject, relations=relations, direction="out")
            found = [nb.edge for nb in around if a.object is None or nb.node.id == a.object]
        elif a.object is not None:
            found = [nb.edge for nb in store.neighbours(a.object, relations=relations, direction="in")]
        else:
            whole = getattr(store, "bundle", None)
            if whole is None:
                raise ValueError("give a subject or an object")
            edges = whole().edges
            rows = (edges.filter(pl.col("rel") == a.relation) if a.relation else edges).head(a.limit)
            return rows.select("id", "src", "rel", "dst").to_dicts()
        return [{"id": e.id, "src": e.src, "rel": e.rel, "dst": e.dst} for e in found[: a.limit]]

    def query(a: CypherArgs) -> Any:
        return cast(ReadQueries, store).read_query(a.query, limit=a.limit)

    tools = [
        Tool("local_node", "A local node's name, type, description and aliases.", NodeArgs, node),
        Tool("local_edge", "A local edge's ends, relation, source and confidence.", EdgeArgs, edge),
        Tool("local_neighbours", "The edges and nodes next to a local node.", NeighbourArgs, neighbours),
        Tool("local_paths", "Shortest paths between two local nodes.", PathArgs, paths),
        Tool("local_search", "Local nodes whose name or alias matches a text.", SearchArgs, search),
        Tool(
            "local_triples",
            "Local edges matching a subject, a relation and an object (each optional).",
            TriplesArgs,
            triples,
        ),
    ]
    if isinstance(store, ReadQueries):
        tools.append(
            Tool(
                "local_query",
                f"Run one read-only {store.query_language} query on the local graph (nodes :Entity with id and "
                "name; a relationship's type is its relation).",
                CypherArgs,
                query,
            )
        )
    return ToolBox(tools)
