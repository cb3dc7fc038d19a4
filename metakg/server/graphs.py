"""The graphs one ``metakg serve`` serves: each a bundle or a Neo4j database, under a name.

The first graph is the default, served at ``/`` as a server of one graph is; every other one is served the same
way under ``/graphs/NAME/`` (its page, its API, its reference pages), with its own API key when
``server.graph_keys`` names one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from metakg.config import Settings
from metakg.errors import UsageError

#: a graph's name: it is a path segment of its routes
GRAPH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Graph:
    """One served graph: a ``bundle`` folder, or the Neo4j ``database`` of the configured server."""

    name: str
    bundle: Path | None = None
    database: str | None = None

    @property
    def neo4j(self) -> bool:
        return self.bundle is None

    @property
    def path(self) -> str:
        """Where its page is, on a server whose first graph is ``default``."""
        return f"/graphs/{self.name}/"


def _named(value: str, option: str) -> tuple[str | None, str]:
    """``NAME=VALUE`` split (a name only when the part before ``=`` is one), else ``(None, value)``."""
    name, sep, rest = value.partition("=")
    if sep and GRAPH_NAME.match(name) and rest:
        return name, rest
    if sep and not Path(value).exists():
        raise UsageError(
            f"{option} {value!r}: write NAME=VALUE with a name of letters, digits, '_', '.' and '-' (at most 64)."
        )
    return None, value


def parse_graphs(bundles: Sequence[str], neo4j: bool, databases: Sequence[str], settings: Settings) -> list[Graph]:
    """The graphs of ``serve``'s options: each ``--bundle [NAME=]PATH`` (named after its folder when no name
    is given), ``--neo4j`` (the configured database, named after it) and each ``--neo4j-db NAME=DATABASE``; the
    first is the default.

    Raises:
        UsageError: no graph, a name given twice or not a name, a Neo4j database without a name.
    """
    graphs: list[Graph] = []
    for value in bundles:
        name, path = _named(value, "--bundle")
        folder = Path(path)
        graphs.append(Graph(name or _name_of(folder.resolve().name or "bundle"), bundle=folder))
    if neo4j:
        graphs.append(Graph(_name_of(settings.neo4j.database), database=settings.neo4j.database))
    for value in databases:
        name, database = _named(value, "--neo4j-db")
        if name is None:
            raise UsageError(f"--neo4j-db {value!r}: write NAME=DATABASE (the name its routes are under).")
        graphs.append(Graph(name, database=database))
    if not graphs:
        raise UsageError("give --bundle DIR or --neo4j (or several: --bundle NAME=DIR, --neo4j-db NAME=DATABASE).")
    seen: set[str] = set()
    for graph in graphs:
        if graph.name in seen:
            raise UsageError(f"two graphs are named {graph.name!r}: name them (--bundle NAME=DIR).")
        seen.add(graph.name)
    unknown = sorted(set(settings.server.graph_keys) - seen)
    if unknown and len(graphs) > 1:
        raise UsageError(f"server.graph_keys names {', '.join(unknown)}, which no graph served is called.")
    return graphs


def given_graphs(bundle: Path | None, neo4j: bool, graphs: Sequence[Graph], settings: Settings) -> Sequence[Graph]:
    """``graphs``, or else the one graph of ``bundle`` or the configured Neo4j database (the API's callers of
    ``serve`` and ``mcp`` that name no graphs).

    Raises:
        UsageError: no graph, or a bundle and Neo4j both.
    """
    if graphs:
        return graphs
    if (bundle is None) == (not neo4j):
        raise UsageError("serve a bundle (--bundle DIR) or the configured Neo4j database (--neo4j), one of them.")
    if bundle is not None:
        return [Graph(_name_of(bundle.resolve().name or "bundle"), bundle=bundle)]
    return [Graph(_name_of(settings.neo4j.database), database=settings.neo4j.database)]


def _name_of(text: str) -> str:
    """A graph name made of a folder's or database's name (characters a name cannot hold as ``_``)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "_", text).lstrip("_.-")[:64]
    return cleaned or "graph"


def graph_settings(settings: Settings, graph: Graph, *, several: bool) -> Settings:
    """``settings`` as the graph ``graph`` is served with: its own key from ``server.graph_keys`` (also when it
    is served alone: a key given is never dropped), its Neo4j database. ``several`` is kept for callers."""
    server = settings.server
    key = server.graph_keys.get(graph.name)
    updates: dict[str, object] = {}
    if key is not None:
        updates["server"] = server.model_copy(update={"api_key": SecretStr(key.get_secret_value())})
    if graph.database is not None and graph.database != settings.neo4j.database:
        updates["neo4j"] = settings.neo4j.model_copy(update={"database": graph.database})
    return settings.model_copy(update=updates) if updates else settings
