"""The embedded GraphStore: a bundle held in memory as CSR adjacency arrays, with name and vector indexes.

No server. Traversals run level by level on numpy arrays (a whole BFS frontier per step); only the final
path enumeration walks node by node, pruned by distances to the target.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt
import polars as pl

from metakg.errors import NodeNotFound, StoreError
from metakg.identity.strings import close_keys, similarity
from metakg.llm.embedder import Embedder
from metakg.loaders.path_core import PathCore, address, load_library
from metakg.schemas.bundle import Bundle, merge_bundles
from metakg.schemas.graph_store import (
    ClosingStore,
    Direction,
    EdgeRecord,
    GraphPath,
    Neighbour,
    NodeRecord,
    SearchHit,
    SearchMode,
    Subgraph,
    Vector,
    check_path_query,
    run_search,
)
from metakg.schemas.tables import conform_edges, conform_nodes, match_key, match_key_expr

IntArray = npt.NDArray[np.int64]
_T = TypeVar("_T", bound=np.generic)


@dataclass(frozen=True)
class _Csr:
    """Compressed adjacency: the neighbours of node i are ``nbr[ptr[i]:ptr[i+1]]`` via edges ``eid[...]``."""

    ptr: IntArray
    nbr: IntArray
    eid: IntArray
    rel: IntArray

    @classmethod
    def build(cls, n_nodes: int, a: IntArray, b: IntArray, eid: IntArray, rel: IntArray) -> _Csr:
        order = np.argsort(a, kind="stable")
        ptr = np.zeros(n_nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(a, minlength=n_nodes), out=ptr[1:])
        return cls(ptr=ptr, nbr=b[order], eid=eid[order], rel=rel[order])

    def grown(self, n_nodes: int, a: IntArray, b: IntArray, eid: IntArray, rel: IntArray, at: IntArray) -> _Csr:
        """This adjacency over ``n_nodes`` nodes (at least as many as now) with entries added: entry ``k`` goes
        from node ``a[k]`` to ``b[k]`` and is inserted before position ``at[k]`` of the current arrays (entries
        sharing a position keep their order). No sort of the existing entries: a copy of each array."""
        ptr = _padded(self.ptr, n_nodes)
        ptr[1:] += np.cumsum(np.bincount(a, minlength=n_nodes))
        return _Csr(
            ptr=ptr, nbr=np.insert(self.nbr, at, b), eid=np.insert(self.eid, at, eid), rel=np.insert(self.rel, at, rel)
        )

    @cached_property
    def addresses(self) -> tuple[int, int, int, int]:
        """Addresses of ptr, nbr, eid and rel, for the compiled path core."""
        return address(self.ptr), address(self.nbr), address(self.eid), address(self.rel)

    def expand(self, frontier: IntArray) -> tuple[IntArray, IntArray]:
        """Positions into nbr/eid/rel of every edge leaving ``frontier``, and the frontier node of each."""
        starts = self.ptr[frontier]
        lengths = self.ptr[frontier + 1] - starts
        total = int(lengths.sum())
        if total == 0:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty
        owner = np.repeat(np.arange(len(frontier)), lengths)
        base = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        return base + np.arange(total), frontier[owner]


class _Dictionary:
    """A string column as distinct values plus one int32 code per row: record reads without polars calls.
    It grows with appended rows and takes changed rows in place (upserts)."""

    def __init__(self, values: list[str | None], codes: npt.NDArray[np.int32]) -> None:
        self.values, self.codes = values, codes
        self._code = {v: i for i, v in enumerate(values)}

    @classmethod
    def encode(cls, column: pl.Series) -> _Dictionary:
        values = column.unique(maintain_order=True)
        lookup = pl.DataFrame({column.name: values, "_code": pl.int_range(len(values), eager=True, dtype=pl.Int32)})
        codes = column.to_frame().join(lookup, on=column.name, how="left", nulls_equal=True, maintain_order="left")
        return cls(values=values.to_list(), codes=codes["_code"].to_numpy())

    def _codes_of(self, values: list[str | None]) -> npt.NDArray[np.int32]:
        for v in values:
            if v not in self._code:
                self._code[v] = len(self.values)
                self.values.append(v)
        return np.asarray([self._code[v] for v in values], dtype=np.int32)

    def append(self, values: list[str | None]) -> None:
        """Codes for rows added at the end."""
        self.codes = np.concatenate([self.codes, self._codes_of(values)])

    def set(self, rows: IntArray, values: list[str | None]) -> None:
        """New values for existing rows."""
        self.codes = _set(self.codes, rows, self._codes_of(values))

    def __getitem__(self, row: int) -> str | None:
        value: str | None = self.values[self.codes[row]]
        return value


def _padded(ptr: IntArray, n_nodes: int) -> IntArray:
    """A copy of the CSR pointers ``ptr`` for ``n_nodes`` nodes: the nodes added have no entries."""
    return np.concatenate([ptr, np.full(n_nodes + 1 - len(ptr), ptr[-1], dtype=np.int64)])


def _set(array: npt.NDArray[_T], rows: IntArray, values: npt.NDArray[Any]) -> npt.NDArray[_T]:
    """``array`` with ``values`` at ``rows``, copied first when it is a read-only view of a polars column."""
    out = array if array.flags.writeable else array.copy()
    out[rows] = values
    return out


def _strings(value: pl.Series | None) -> tuple[str, ...]:
    """A list cell (a Series when read by scalar access) as a tuple of strings."""
    return () if value is None else tuple(value.to_list())


class EmbeddedStore(ClosingStore):
    """GraphStore over an in-memory bundle (the default store)."""

    def __init__(
        self,
        nodes: pl.DataFrame,
        edges: pl.DataFrame,
        *,
        embedder: Embedder | None = None,
        embeddings: pl.DataFrame | None = None,
        compiled: bool = True,
    ) -> None:
        """Index ``nodes`` and ``edges`` (validated common-schema frames).

        Args:
            nodes: node table; ids must be unique.
            edges: edge table; endpoints must be node ids.
            embedder: used for embedding search (names are embedded on first use unless ``embeddings``).
            embeddings: precomputed name embeddings (columns ``id`` and ``vector``), e.g. from the bundle.
            compiled: use the compiled path core when it is installed (False: the numpy implementation).

        Raises:
            StoreError: duplicate node ids or dangling edge endpoints (validate the bundle first).
        """
        self._embedder = embedder
        self._precomputed = embeddings
        self._compiled = compiled
        # one thread embeds the names; the others wait for its vectors (a server's concurrent searches once
        # each embedded every name again)
        self._vector_lock = threading.Lock()
        self._index(conform_nodes(nodes), conform_edges(edges))

    @classmethod
    def from_bundle(
        cls, bundle: Bundle, *, embedder: Embedder | None = None, embeddings: pl.DataFrame | None = None
    ) -> EmbeddedStore:
        """A store over a bundle already read."""
        return cls(bundle.nodes, bundle.edges, embedder=embedder, embeddings=embeddings)

    @property
    def embedder(self) -> Embedder | None:
        """The embedder names are embedded with (None: embedding search uses precomputed vectors only)."""
        return self._embedder

    # ------------------------------------------------------------------ indexing
    def _index(self, nodes: pl.DataFrame, edges: pl.DataFrame) -> None:
        if nodes["id"].n_unique() != nodes.height or nodes["id"].null_count():
            raise StoreError(
                "node ids are not unique or some are null; validate the bundle first.", cli_fix="metakg validate BUNDLE"
            )
        self._nodes = nodes
        self._edges = edges
        ids = nodes["id"].to_list()
        self._ids: list[str] = ids
        self._idx: dict[str, int] = {node_id: i for i, node_id in enumerate(ids)}
        lookup = pl.DataFrame(
            {"id": pl.Series(ids, dtype=pl.String), "_i": pl.int_range(0, len(ids), eager=True, dtype=pl.Int64)}
        )
        ends = edges.select("src", "dst", "rel").with_row_index("_e")
        ends = ends.join(lookup.rename({"id": "src", "_i": "_s"}), on="src", how="left")
        ends = ends.join(lookup.rename({"id": "dst", "_i": "_d"}), on="dst", how="left").sort("_e")
        if ends["_s"].null_count() or ends["_d"].null_count():
            raise StoreError(
                "some edges point at node ids that do not exist; validate the bundle first.",
                cli_fix="metakg validate BUNDLE",
            )
        self._rels: list[str] = sorted(edges["rel"].unique().to_list())
        self._rel_code = {r: i for i, r in enumerate(self._rels)}
        rel = (
            ends["rel"].replace_strict(self._rel_code, return_dtype=pl.Int64).to_numpy()
            if edges.height
            else (np.empty(0, dtype=np.int64))
        )
        s = ends["_s"].to_numpy().astype(np.int64)
        d = ends["_d"].to_numpy().astype(np.int64)
        self._src, self._dst, self._rel_of_edge = s, d, rel
        self._cache_columns(nodes, edges)
        self._library = load_library() if self._compiled else None
        self._reset_derived()
        self._names: dict[str, list[int]] | None = None
        self._keys: dict[str, list[int]] | None = None
        self._key_order: list[str] | None = None  # the keys of ``_keys`` as a list, for edit-distance search
        self._vectors: npt.NDArray[np.float32] | None = None
        self._edge_rows: dict[str, int] | None = None
        self._edge_rank: IntArray | None = None
        self._csr()  # built now, so the first traversal does not pay for it

    def _reset_derived(self) -> None:
        """Drop the adjacency and the path core; the next traversal builds them for the graph as it is now.
        (After an upsert appends rows, the next traversal grows the adjacency it has instead.)"""
        self._adjacency: tuple[_Csr, _Csr, _Csr] | None = None
        self._path_core: PathCore | None = None

    def _csr(self) -> tuple[_Csr, _Csr, _Csr]:
        if self._adjacency is not None and (len(self._adjacency[0].ptr) - 1, len(self._adjacency[0].eid)) != (
            len(self._ids),
            len(self._src),
        ):  # rows were appended since: the adjacency takes them in (no new rows: nothing to do)
            self._adjacency = self._grown_adjacency(self._adjacency, len(self._adjacency[0].eid))
        if self._adjacency is None:
            s, d, rel, n = self._src, self._dst, self._rel_of_edge, len(self._ids)
            e = np.arange(len(s), dtype=np.int64)
            both = _Csr.build(
                n, np.concatenate([s, d]), np.concatenate([d, s]), np.concatenate([e, e]), np.concatenate([rel, rel])
            )
            self._adjacency = (_Csr.build(n, s, d, e, rel), _Csr.build(n, d, s, e, rel), both)
        return self._adjacency

    @property
    def _out(self) -> _Csr:
        return self._csr()[0]

    @property
    def _in(self) -> _Csr:
        return self._csr()[1]

    @property
    def _both(self) -> _Csr:
        return self._csr()[2]

    @property
    def _core(self) -> PathCore | None:
        if self._library is not None and self._path_core is None:
            self._path_core = PathCore(self._library, len(self._ids))
        return self._path_core

    def _cache_columns(self, nodes: pl.DataFrame, edges: pl.DataFrame) -> None:
        """Per-column caches that make a record a handful of array reads instead of polars calls."""
        self._node_cols = {name: nodes.get_column(name) for name in ("description", "aliases", "xrefs")}
        self._names_list: list[str] = nodes["name"].to_list()
        self._node_type = _Dictionary.encode(nodes["type"])
        self._node_source = _Dictionary.encode(nodes["source"])
        self._has_description = nodes["description"].is_not_null().to_numpy()
        self._n_aliases = nodes["aliases"].list.len().fill_null(0).to_numpy()
        self._n_xrefs = nodes["xrefs"].list.len().fill_null(0).to_numpy()
        self._edge_display = _Dictionary.encode(edges["display"])
        self._edge_source = _Dictionary.encode(edges["source"])
        self._confidence = edges["confidence"].to_numpy()
        self._count = edges["count"].fill_null(1).to_numpy()
        # Edge ids as fixed-width bytes (18 bytes each for metakg's own ids); long custom ids stay in polars.
        longest = int(edges["id"].str.len_bytes().max() or 0) if edges.height else 0  # type: ignore[arg-type]
        self._edge_id_bytes: npt.NDArray[np.bytes_] | None = (
            np.asarray(edges["id"].cast(pl.Binary).to_list(), dtype=f"S{max(1, longest)}") if longest <= 64 else None
        )

    def _name_indexes(self) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
        if self._names is None or self._keys is None:
            names = pl.concat(
                [
                    self._nodes.select(pl.col("name").alias("text"), pl.int_range(pl.len()).alias("i")),
                    self._nodes.select(pl.col("aliases").alias("text"), pl.int_range(pl.len()).alias("i"))
                    .explode("text")
                    .drop_nulls(),
                ]
            ).with_columns(match_key_expr(pl.col("text")).alias("key"))
            by_name = names.group_by("text", maintain_order=True).agg(pl.col("i").unique(maintain_order=True))
            by_key = names.group_by("key", maintain_order=True).agg(pl.col("i").unique(maintain_order=True))
            self._names = dict(zip(by_name["text"].to_list(), by_name["i"].to_list(), strict=True))
            self._keys = dict(zip(by_key["key"].to_list(), by_key["i"].to_list(), strict=True))
        return self._names, self._keys

    def _node_vectors(self) -> npt.NDArray[np.float32]:
        if self._vectors is None:
            with self._vector_lock:
                if self._vectors is None:
                    self._vectors = self._embedded_names()
        return self._vectors

    def _embedded_names(self) -> npt.NDArray[np.float32]:
        """Every node's name vector: the stored ones, the missing ones embedded now."""
        if self._precomputed is None and self._embedder is None:
            raise StoreError(
                "embedding search needs an embedder or the bundle's name embeddings.",
                cli_fix="metakg embed BUNDLE",
            )
        names = self._nodes["name"]
        if self._precomputed is None:
            missing = np.arange(self._nodes.height)
            vectors = np.zeros((self._nodes.height, 0), dtype=np.float32)
        else:
            frame = self._precomputed
            if not frame["id"].equals(self._nodes["id"]):  # not row for row (`metakg embed` writes them so)
                frame = self._nodes.select("id").join(frame, on="id", how="left", maintain_order="left")
            missing = np.flatnonzero(frame["vector"].is_null().to_numpy())
            width = int(frame["vector"].list.len().max() or 0)  # type: ignore[arg-type]
            filled = frame["vector"].cast(pl.List(pl.Float32)).fill_null(pl.lit([0.0] * width, pl.List(pl.Float32)))
            # one copy through Arrow: a list of Python floats per node took seconds for 100k nodes
            vectors = np.array(filled.list.to_array(width).to_numpy(), dtype=np.float32).reshape(
                self._nodes.height, width
            )  # a writable copy: nodes added later are filled in below
        if len(missing):  # nodes added after the embeddings were computed (upsert) are embedded now
            if self._embedder is None:
                raise StoreError(
                    "the bundle's name embeddings do not cover every node; embed the bundle again.",
                    cli_fix="metakg embed BUNDLE",
                )
            fresh = self._embedder.embed(names.gather(missing).to_list())
            if vectors.shape[1] == 0:
                vectors = np.zeros((self._nodes.height, fresh.shape[1]), dtype=np.float32)
            vectors[missing] = fresh
        return vectors

    # ------------------------------------------------------------------ records
    def _nodes_at(self, indices: Sequence[int]) -> list[NodeRecord]:
        """Node records for row indices, read from per-column caches (no polars call per row)."""
        c = self._node_cols
        records = []
        for i in indices:
            records.append(
                NodeRecord(
                    id=self._ids[i],
                    name=self._names_list[i],
                    type=str(self._node_type[i]),
                    source=str(self._node_source[i]),
                    description=c["description"][i] if self._has_description[i] else None,
                    aliases=_strings(c["aliases"][i]) if self._n_aliases[i] else (),
                    xrefs=_strings(c["xrefs"][i]) if self._n_xrefs[i] else (),
                )
            )
        return records

    def _edges_at(self, indices: Sequence[int]) -> list[EdgeRecord]:
        """Edge records for row indices, read from per-column caches (one array gather per column)."""
        idx = np.asarray(indices, dtype=np.int64)
        ids = self._ids
        rels = [self._rels[r] for r in self._rel_of_edge[idx].tolist()]
        displays = [self._edge_display.values[c] for c in self._edge_display.codes[idx].tolist()]
        sources = [self._edge_source.values[c] for c in self._edge_source.codes[idx].tolist()]
        return [
            EdgeRecord(
                id=self._edge_id(e),
                src=ids[s],
                dst=ids[d],
                rel=rel,
                display=display or rel,
                source=str(source),
                confidence=confidence,
                count=count,
            )
            for e, s, d, rel, display, source, confidence, count in zip(
                idx.tolist(),
                self._src[idx].tolist(),
                self._dst[idx].tolist(),
                rels,
                displays,
                sources,
                self._confidence[idx].tolist(),
                self._count[idx].tolist(),
                strict=True,
            )
        ]

    def _edge_id(self, e: int) -> str:
        if self._edge_id_bytes is not None:
            return bytes(self._edge_id_bytes[e]).decode("utf-8")
        return str(self._edges.get_column("id")[e])

    def _require(self, node_id: str) -> int:
        try:
            return self._idx[node_id]
        except KeyError:
            raise NodeNotFound(
                f"no node with id {node_id!r} in this graph; find ids by searching the names.",
                cli_fix="metakg query search GRAPH TEXT",
            ) from None

    def _rel_filter(self, relations: Sequence[str] | None) -> IntArray | None:
        if relations is None:
            return None
        return np.asarray([self._rel_code[r] for r in relations if r in self._rel_code], dtype=np.int64)

    # ------------------------------------------------------------------ protocol
    def bundle(self) -> Bundle:
        """The whole graph as a bundle (the frames the store holds; write it with ``write_bundle``)."""
        return Bundle(self._nodes, self._edges)

    def counts(self) -> dict[str, int]:
        """Node and edge counts."""
        return {"nodes": self._nodes.height, "edges": self._edges.height}

    def get_node(self, node_id: str) -> NodeRecord | None:
        """The node with this id, or None."""
        i = self._idx.get(node_id)
        return None if i is None else self._nodes_at([i])[0]

    def neighbours(
        self,
        node_id: str,
        *,
        relations: Sequence[str] | None = None,
        direction: Direction = "both",
        limit: int | None = None,
    ) -> list[Neighbour]:
        """Nodes one edge away (outgoing first, each side in edge-id order), optionally only through ``relations``."""
        i = self._require(node_id)
        allowed = self._rel_filter(relations)
        sides: list[tuple[_Csr, Literal["out", "in"]]] = []
        if direction in ("out", "both"):
            sides.append((self._out, "out"))
        if direction in ("in", "both"):
            sides.append((self._in, "in"))
        node_idx: list[int] = []
        edge_idx: list[int] = []
        ways: list[Literal["out", "in"]] = []
        for csr, way in sides:
            lo, hi = int(csr.ptr[i]), int(csr.ptr[i + 1])
            positions = np.arange(lo, hi)
            if allowed is not None:
                positions = positions[np.isin(csr.rel[positions], allowed)]
            positions = self._by_edge_id(positions, csr, None if limit is None else max(0, limit - len(node_idx)))
            node_idx.extend(csr.nbr[positions].tolist())
            edge_idx.extend(csr.eid[positions].tolist())
            ways.extend([way] * len(positions))
        return [
            Neighbour(node=n, edge=e, direction=w)
            for n, e, w in zip(self._nodes_at(node_idx), self._edges_at(edge_idx), ways, strict=True)
        ]

    def _by_edge_id(self, positions: IntArray, csr: _Csr, limit: int | None) -> IntArray:
        """The adjacency ``positions`` in edge-id order, the first ``limit``: the neighbour order both stores
        share (Neo4j's ``ORDER BY r.id LIMIT``). A top-k selection, then a sort of the k kept, so a hub's
        whole list is not sorted for a short limit."""
        if len(positions) < 2:
            return positions[:limit] if limit is not None else positions
        rank = self._edge_ranks()[csr.eid[positions]]
        if limit is not None and limit < len(positions):
            if limit == 0:
                return positions[:0]
            kept = np.argpartition(rank, limit - 1)[:limit]
            return positions[kept[np.argsort(rank[kept])]]
        return positions[np.argsort(rank)]

    def _edge_ranks(self) -> IntArray:
        """Each edge row's position among all edge ids in sorted order (made on first use, and again after
        an upsert adds edges)."""
        if self._edge_rank is None or len(self._edge_rank) != self._edges.height:
            order = self._edges["id"].arg_sort().to_numpy()
            rank = np.empty(len(order), dtype=np.int64)
            rank[order] = np.arange(len(order), dtype=np.int64)
            self._edge_rank = rank
        return self._edge_rank

    def search(self, text: str, *, mode: SearchMode = "auto", k: int = 10) -> list[SearchHit]:
        """Nodes matching ``text``: exact name or alias, then normalised (``auto`` falls back to embeddings)."""
        return run_search(
            text,
            mode=mode,
            k=k,
            exact=lambda: self._nodes_at(self._by_id(self._name_indexes()[0].get(text.strip(), []))[:k]),
            normalised=lambda: self._by_key(match_key(text), k),
            fuzzy=lambda: self._fuzzy(match_key(text), k),
            embedding=self._embedding_search if self._embedder is not None else None,
        )

    def _fuzzy(self, key: str, k: int) -> list[SearchHit]:
        """The nodes whose name or alias key is within a few edits of ``key`` (:func:`close_keys`), closest
        first, then by id; each node once, scored by its closest key."""
        keys = self._key_list()
        hits: dict[int, SearchHit] = {}
        for position, _distance in close_keys(key, keys):
            for row in self._by_id(self._name_indexes()[1][keys[position]]):
                if row not in hits and len(hits) < k:
                    hits[row] = SearchHit(self._nodes_at([row])[0], similarity(key, keys[position]), "fuzzy")
        return list(hits.values())

    def _key_list(self) -> list[str]:
        if self._key_order is None:
            self._key_order = list(self._name_indexes()[1])
        return self._key_order

    def _by_key(self, key: str, k: int) -> list[NodeRecord]:
        """The nodes whose name or alias has the normalised form ``key`` (none for an empty key: a text without
        a letter or digit has no normalised form)."""
        return self._nodes_at(self._by_id(self._name_indexes()[1].get(key, []))[:k]) if key else []

    def _by_id(self, rows: list[int]) -> list[int]:
        """Node rows in id order: nodes sharing a name are listed as Neo4j lists them (``ORDER BY n.id``)."""
        return sorted(rows, key=self._ids.__getitem__) if len(rows) > 1 else rows

    def names(self) -> list[str]:
        """Every distinct node name and alias."""
        return list(self._name_indexes()[0])

    def name_vectors(self, ids: Sequence[str]) -> dict[str, Vector]:
        """Name embeddings of these nodes, when the store has them (precomputed, or built by a search)."""
        if self._precomputed is None and self._vectors is None:
            return {}
        matrix = self._node_vectors()
        rows = [(i, self._idx.get(i)) for i in ids]
        return {i: matrix[r] for i, r in rows if r is not None}

    def _embedding_search(self, text: str, k: int) -> list[SearchHit]:
        if self._embedder is None:
            raise StoreError("embedding search needs an embedder to embed the query; configure the embedder.")
        matrix = self._node_vectors()
        if matrix.shape[0] == 0:
            return []
        query = self._embedder.embed([text])[0]
        scores = matrix @ query
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = np.asarray(sorted(top.tolist(), key=lambda i: (-scores[i], self._ids[i])), dtype=np.int64)  # ties: id
        nodes = self._nodes_at(top.tolist())
        return [SearchHit(n, float(np.clip(scores[i], 0.0, 1.0)), "embedding") for n, i in zip(nodes, top, strict=True)]

    def _distinct(self, values: IntArray) -> IntArray:
        """The distinct node indices in ``values`` (unordered), in O(len) without sorting."""
        if len(values) < 64:
            return np.asarray(np.unique(values), dtype=np.int64)
        slots = np.empty(self._nodes.height, dtype=np.int64)  # uninitialised: only written slots are read
        order = np.arange(len(values))
        slots[values] = order  # one occurrence of each value wins the slot, whichever it is
        distinct: IntArray = values[slots[values] == order]
        return distinct

    def _distances_to(
        self,
        csr: _Csr,
        target: int,
        depth: int,
        allowed: IntArray | None,
        dist: npt.NDArray[np.int8] | None = None,
        frontier: IntArray | None = None,
    ) -> tuple[npt.NDArray[np.int8], IntArray]:
        """BFS levels from ``target``: dist[v] = hops from v to target (-1 beyond ``depth``)."""
        if dist is None or frontier is None:
            dist = np.full(self._nodes.height, -1, dtype=np.int8)
            dist[target] = 0
            frontier = np.asarray([target], dtype=np.int64)
        level = int(dist[frontier[0]]) if len(frontier) else depth
        while level < depth and len(frontier):
            positions, _owners = csr.expand(frontier)
            if allowed is not None:
                positions = positions[np.isin(csr.rel[positions], allowed)]
            nxt = csr.nbr[positions]
            nxt = self._distinct(nxt[dist[nxt] < 0])
            level += 1
            dist[nxt] = level
            frontier = nxt
        return dist, frontier

    def shortest_paths(
        self,
        src: str,
        dst: str,
        *,
        k: int = 1,
        max_hops: int = 3,
        relations: Sequence[str] | None = None,
        directed: bool = False,
    ) -> list[GraphPath]:
        """Up to ``k`` simple paths of at most ``max_hops`` edges, shortest first (ties in storage order)."""
        check_path_query(k, max_hops)
        s, t = self._require(src), self._require(dst)
        if s == t:
            return [GraphPath(nodes=(src,), edges=())]
        allowed = self._rel_filter(relations)
        forward = self._out if directed else self._both
        backward = self._in if directed else self._both
        # Distances are computed by BFS from one end and paths enumerated from the other. BFS from the end
        # whose two-hop neighbourhood is smaller: on hub-heavy graphs that is often 100x less work.
        swap = self._two_hop_cost(forward, s) < self._two_hop_cost(backward, t)
        if swap:
            s, t, forward, backward = t, s, backward, forward
        if self._core is not None:
            rel_ok = None
            if allowed is not None:
                rel_ok = np.zeros(max(1, len(self._rels)), dtype=np.uint8)
                rel_ok[allowed] = 1
            raw = self._core.paths(
                forward.addresses,
                (backward.addresses[0], backward.addresses[1], backward.addresses[3]),
                rel_ok,
                s,
                t,
                max_hops,
                k,
            )
        else:
            raw = self._paths_numpy(forward, backward, s, t, k, max_hops, allowed)
        paths: list[GraphPath] = []
        for edge_list, node_list in raw:
            nodes = [self._ids[s], *(self._ids[i] for i in node_list)]
            edges = self._edges_at(edge_list)
            if swap:
                nodes.reverse()
                edges.reverse()
            paths.append(GraphPath(nodes=tuple(nodes), edges=tuple(edges)))
        return paths

    def _paths_numpy(
        self, forward: _Csr, backward: _Csr, s: int, t: int, k: int, max_hops: int, allowed: IntArray | None
    ) -> list[tuple[list[int], list[int]]]:
        """The reference implementation of the compiled core: same paths, same order."""
        found: list[tuple[list[int], list[int]]] = []
        dist: npt.NDArray[np.int8] | None = None
        frontier: IntArray | None = None
        for length in range(1, max_hops + 1):
            # distances to the BFS root are needed up to length-1 hops to enumerate paths of `length`
            dist, frontier = self._distances_to(backward, t, length - 1, allowed, dist, frontier)
            for path in self._paths_of_length(forward, s, t, length, dist, allowed):
                found.append(path)
                if len(found) >= k:
                    return found
        return found

    def _two_hop_cost(self, csr: _Csr, u: int) -> int:
        """How many adjacency entries a BFS from ``u`` reads to reach two hops."""
        if self._core is not None:
            return self._core.two_hop_cost(csr.addresses[0], csr.addresses[1], u)
        nbrs = csr.nbr[csr.ptr[u] : csr.ptr[u + 1]]
        return int((csr.ptr[nbrs + 1] - csr.ptr[nbrs]).sum())

    def _paths_of_length(
        self, csr: _Csr, s: int, t: int, length: int, dist: npt.NDArray[np.int8], allowed: IntArray | None
    ) -> Iterator[tuple[list[int], list[int]]]:
        """Simple paths s -> t of exactly ``length`` edges, as (edge indices, node indices after s)."""
        on_path = {s}
        edges: list[int] = []
        nodes: list[int] = []

        def step(u: int, remaining: int) -> Iterator[tuple[list[int], list[int]]]:
            lo, hi = int(csr.ptr[u]), int(csr.ptr[u + 1])
            nbr = csr.nbr[lo:hi]
            # v must reach t in exactly remaining-1 more hops at best: 0 <= dist[v] <= remaining-1
            d = dist[nbr]
            ok = (d >= 0) & (d <= remaining - 1)
            if allowed is not None:
                ok &= np.isin(csr.rel[lo:hi], allowed)
            for p in np.flatnonzero(ok):
                v = int(nbr[p])
                if v in on_path or (remaining == 1) != (v == t):
                    continue
                edges.append(int(csr.eid[lo + p]))
                nodes.append(v)
                if remaining == 1:
                    yield list(edges), list(nodes)
                else:
                    on_path.add(v)
                    yield from step(v, remaining - 1)
                    on_path.discard(v)
                edges.pop()
                nodes.pop()

        yield from step(s, length)

    def subgraph(
        self,
        seeds: Sequence[str],
        *,
        hops: int = 1,
        relations: Sequence[str] | None = None,
        max_nodes: int | None = None,
    ) -> Subgraph:
        """Nodes within ``hops`` of ``seeds`` (either direction) and every edge among them."""
        allowed = self._rel_filter(relations)
        frontier = np.unique(np.asarray([self._require(x) for x in seeds], dtype=np.int64))
        keep = np.zeros(self._nodes.height, dtype=bool)
        keep[frontier] = True
        for _ in range(hops):
            if not len(frontier):
                break
            positions, _owners = self._both.expand(frontier)
            if allowed is not None:
                positions = positions[np.isin(self._both.rel[positions], allowed)]
            nxt = self._both.nbr[positions]
            nxt = np.sort(self._distinct(nxt[~keep[nxt]]))
            if max_nodes is not None:
                nxt = nxt[: max(0, max_nodes - int(keep.sum()))]
            keep[nxt] = True
            frontier = nxt
        edge_mask = keep[self._src] & keep[self._dst]
        if allowed is not None:
            edge_mask &= np.isin(self._rel_of_edge, allowed)
        return Subgraph(nodes=self._nodes.filter(pl.Series(keep)), edges=self._edges.filter(pl.Series(edge_mask)))

    def upsert(self, nodes: pl.DataFrame, edges: pl.DataFrame) -> None:
        """Add or update nodes (by id) and edges (by edge id) with the merge semantics of :func:`merge_bundles`.

        Only the rows given are merged with the rows they update; new rows are appended and the indexes grow
        with them, so the cost follows the size of the upsert, not of the graph. Rows the merge leaves as they
        were are not rewritten. After new rows, the adjacency arrays are rebuilt by the next traversal (not by
        the upsert), so many upserts in a row pay for one rebuild.

        Raises:
            StoreError: a null node id, or an edge whose endpoint is neither in the graph nor in ``nodes``
                (nothing is changed then).
        """
        nodes, edges = conform_nodes(nodes), conform_edges(edges)
        if nodes["id"].null_count():
            raise StoreError("an upserted node has no id; every node needs one.")
        edge_rows = self._edge_index()
        node_ids = nodes["id"].unique(maintain_order=True).to_list()
        edge_ids = edges["id"].unique(maintain_order=True).to_list()
        old_node_rows = np.asarray([self._idx[i] for i in node_ids if i in self._idx], dtype=np.int64)
        old_edge_rows = np.asarray([edge_rows[i] for i in edge_ids if i in edge_rows], dtype=np.int64)
        old_nodes = self._nodes[old_node_rows] if len(old_node_rows) else self._nodes.clear()
        old_edges = self._edges[old_edge_rows] if len(old_edge_rows) else self._edges.clear()
        merged = merge_bundles([Bundle(old_nodes, old_edges), Bundle(nodes, edges)])
        # the merge keeps first appearances first: the updated rows, in the order gathered, then the new ones
        merged_nodes, merged_edges = conform_nodes(merged.nodes), conform_edges(merged.edges)
        new_nodes, new_edges = merged_nodes[len(old_node_rows) :], merged_edges[len(old_edge_rows) :]
        added = set(new_nodes["id"].to_list())
        for e, src, dst in new_edges.select("id", "src", "dst").iter_rows():
            for end in (src, dst):
                if end not in self._idx and end not in added:
                    raise StoreError(f"edge {e} points at node {end!r}, which is neither in the graph nor upserted.")
        self._update_nodes(old_node_rows, old_nodes, merged_nodes[: len(old_node_rows)])
        self._update_edges(old_edge_rows, old_edges, merged_edges[: len(old_edge_rows)])
        if new_nodes.height:
            self._append_nodes(new_nodes)
        if new_edges.height:
            self._append_edges(new_edges)

    def edge_records(self, ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """``{edge id: its record ids}`` for the edges of ``ids`` that exist (:class:`EdgeSources`). A scan of
        the id column (milliseconds for millions of edges), not the id index, which an answer does not need."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        records = "record_ids" in self._edges.columns
        found = self._edges.select("id", *(["record_ids"] if records else [])).filter(pl.col("id").is_in(wanted))
        return {
            row["id"]: tuple(row.get("record_ids") or ())
            for row in found.unique("id", keep="first").iter_rows(named=True)
        }

    def _edge_index(self) -> dict[str, int]:
        if self._edge_rows is None:
            self._edge_rows = {e: i for i, e in enumerate(self._edges["id"].to_list())}
        return self._edge_rows

    @staticmethod
    def _changed(rows: IntArray, old: pl.DataFrame, merged: pl.DataFrame) -> tuple[IntArray, pl.DataFrame]:
        """The rows (and their merged values) that the merge changed."""
        keep = [a != b for a, b in zip(old.rows(), merged.rows(), strict=True)]
        return rows[np.asarray(keep, dtype=bool)], merged.filter(pl.Series(keep, dtype=pl.Boolean))

    @staticmethod
    def _appended(frame: pl.DataFrame, rows: pl.DataFrame) -> pl.DataFrame:
        """``frame`` with ``rows`` appended as a new chunk (the chunks are joined now and then)."""
        out = pl.concat([frame, rows], how="vertical", rechunk=False)
        return out.rechunk() if out.n_chunks() > 32 else out

    def _update_nodes(self, rows: IntArray, old: pl.DataFrame, merged: pl.DataFrame) -> None:
        rows, merged = self._changed(rows, old, merged)
        if not len(rows):
            return
        self._nodes = self._nodes.update(merged, on="id", how="left", include_nulls=True)
        for r, name in zip(rows.tolist(), merged["name"].to_list(), strict=True):
            self._names_list[r] = name  # a merge keeps the first name, so the vectors stay valid
        self._node_type.set(rows, merged["type"].to_list())
        self._node_source.set(rows, merged["source"].to_list())
        self._has_description = _set(self._has_description, rows, merged["description"].is_not_null().to_numpy())
        self._n_aliases = _set(self._n_aliases, rows, merged["aliases"].list.len().to_numpy())
        self._n_xrefs = _set(self._n_xrefs, rows, merged["xrefs"].list.len().to_numpy())
        self._node_cols = {name: self._nodes.get_column(name) for name in self._node_cols}
        self._names = self._keys = self._key_order = None  # a merge adds aliases: rebuilt on the next lookup

    def _append_nodes(self, new: pl.DataFrame) -> None:
        start = len(self._ids)
        ids = new["id"].to_list()
        self._nodes = self._appended(self._nodes, new)
        self._ids.extend(ids)
        self._idx.update((node_id, start + k) for k, node_id in enumerate(ids))
        self._names_list.extend(new["name"].to_list())
        self._node_type.append(new["type"].to_list())
        self._node_source.append(new["source"].to_list())
        self._has_description = np.concatenate([self._has_description, new["description"].is_not_null().to_numpy()])
        self._n_aliases = np.concatenate([self._n_aliases, new["aliases"].list.len().to_numpy()])
        self._n_xrefs = np.concatenate([self._n_xrefs, new["xrefs"].list.len().to_numpy()])
        self._node_cols = {name: self._nodes.get_column(name) for name in self._node_cols}
        if self._names is not None and self._keys is not None:
            for k, (name, aliases) in enumerate(new.select("name", "aliases").iter_rows()):
                for text in [name, *(aliases or [])]:
                    if text is not None:
                        self._names.setdefault(text, []).append(start + k)
                        self._keys.setdefault(match_key(text), []).append(start + k)
        if self._vectors is not None:
            self._vectors = (
                np.vstack([self._vectors, self._embedder.embed(new["name"].to_list())])
                if self._embedder is not None
                else None
            )
        self._path_core = None  # its scratch is sized by the node count

    def _update_edges(self, rows: IntArray, old: pl.DataFrame, merged: pl.DataFrame) -> None:
        rows, merged = self._changed(rows, old, merged)
        if not len(rows):
            return
        self._edges = self._edges.update(merged, on="id", how="left", include_nulls=True)
        self._edge_display.set(rows, merged["display"].to_list())
        self._edge_source.set(rows, merged["source"].to_list())
        self._confidence = _set(self._confidence, rows, merged["confidence"].to_numpy())
        self._count = _set(self._count, rows, merged["count"].fill_null(1).to_numpy())

    def _append_edges(self, new: pl.DataFrame) -> None:
        start = self._edges.height
        for r in new["rel"].unique(maintain_order=True).to_list():
            if r not in self._rel_code:
                self._rel_code[r] = len(self._rels)
                self._rels.append(r)
        self._src = np.concatenate([self._src, np.asarray([self._idx[x] for x in new["src"].to_list()], np.int64)])
        self._dst = np.concatenate([self._dst, np.asarray([self._idx[x] for x in new["dst"].to_list()], np.int64)])
        rel = np.asarray([self._rel_code[r] for r in new["rel"].to_list()], dtype=np.int64)
        self._rel_of_edge = np.concatenate([self._rel_of_edge, rel])
        self._edges = self._appended(self._edges, new)
        self._edge_display.append(new["display"].to_list())
        self._edge_source.append(new["source"].to_list())
        self._confidence = np.concatenate([self._confidence, new["confidence"].to_numpy()])
        self._count = np.concatenate([self._count, new["count"].fill_null(1).to_numpy()])
        ids = new["id"].to_list()
        if self._edge_id_bytes is not None:
            fresh = [e.encode("utf-8") for e in ids]
            width = max(max(map(len, fresh)), self._edge_id_bytes.dtype.itemsize)
            known = self._edge_id_bytes.astype(f"S{width}")
            self._edge_id_bytes = np.concatenate([known, np.asarray(fresh, f"S{width}")]) if width <= 64 else None
        if self._edge_rows is not None:
            self._edge_rows.update((e, start + k) for k, e in enumerate(ids))

    def _grown_adjacency(self, adjacency: tuple[_Csr, _Csr, _Csr], start: int) -> tuple[_Csr, _Csr, _Csr]:
        """The adjacency with the edges from row ``start`` on added, placed exactly where a fresh build puts
        them: after a node's earlier entries of the same kind (a node's entries in ``both`` are its
        out-entries, then its in-entries, each in edge order)."""
        out, into, both = adjacency
        s, d, rel = self._src[start:], self._dst[start:], self._rel_of_edge[start:]
        e = np.arange(start, start + len(s), dtype=np.int64)
        by_s, by_d = np.argsort(s, kind="stable"), np.argsort(d, kind="stable")
        s_o, d_o, e_o, r_o = s[by_s], d[by_s], e[by_s], rel[by_s]
        d_i, s_i, e_i, r_i = d[by_d], s[by_d], e[by_d], rel[by_d]
        n = len(self._ids)
        out_ptr, in_ptr, both_ptr = _padded(out.ptr, n), _padded(into.ptr, n), _padded(both.ptr, n)
        out_degree = out_ptr[1:] - out_ptr[:-1]
        # in ``both``, by node, then its out-entries before its in-entries: nodes without entries share an
        # insertion position with the next node, so the order, not only the position, must be right
        owner, other = np.concatenate([s_o, d_i]), np.concatenate([d_o, s_i])
        eids, rels = np.concatenate([e_o, e_i]), np.concatenate([r_o, r_i])
        kind = np.concatenate([np.zeros(len(s_o), np.int64), np.ones(len(d_i), np.int64)])
        at = np.concatenate([both_ptr[s_o] + out_degree[s_o], both_ptr[d_i + 1]])
        order = np.lexsort((eids, kind, owner))
        return (
            out.grown(n, s_o, d_o, e_o, r_o, out_ptr[s_o + 1]),
            into.grown(n, d_i, s_i, e_i, r_i, in_ptr[d_i + 1]),
            both.grown(n, owner[order], other[order], eids[order], rels[order], at[order]),
        )
