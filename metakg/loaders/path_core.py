"""ctypes binding of the compiled path core (``_paths.c``); None when the extension was not built.

The C function enumerates the same paths in the same order as the numpy implementation in
:mod:`metakg.loaders.embedded_store`, which is the fallback and the reference in tests.
"""

from __future__ import annotations

import ctypes
import importlib.util
import threading
from functools import lru_cache

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
_P = ctypes.c_void_p
_I = ctypes.c_int64


@lru_cache(maxsize=1)
def load_library() -> ctypes.CDLL | None:
    """The compiled library, or None when it is not installed (the numpy path is used then)."""
    spec = importlib.util.find_spec("metakg.loaders._paths")
    if spec is None or spec.origin is None:
        return None
    try:
        lib = ctypes.CDLL(spec.origin)
    except OSError:
        return None
    fn = lib.k_shortest_paths
    fn.restype = _I
    fn.argtypes = [_P, _P, _P, _P, _P, _P, _P, _P, _I, _I, _I, _I, _P, _P, _P, _P, _P]
    cost = lib.two_hop_cost
    cost.restype = _I
    cost.argtypes = [_P, _P, _I]
    return lib


def address(array: npt.NDArray[np.generic]) -> int:
    """The address of an array's first element (the array must stay alive and C-contiguous)."""
    if not array.flags.c_contiguous:
        raise ValueError("the path core needs C-contiguous arrays")
    return int(array.ctypes.data)


class PathCore:
    """Scratch buffers and the C entry point for one graph; calls are serialised by a lock."""

    def __init__(self, lib: ctypes.CDLL, n_nodes: int) -> None:
        """Allocate the per-graph scratch: distances (kept all -1 between calls by the C code) and a queue."""
        self._fn = lib.k_shortest_paths
        self._cost = lib.two_hop_cost
        self._lock = threading.Lock()
        self._dist = np.full(n_nodes, -1, dtype=np.int8)
        self._queue = np.empty(n_nodes, dtype=np.int64)
        self._scratch = (address(self._dist), address(self._queue))
        self._out_size = 0
        self._grow(64)

    def _grow(self, size: int) -> None:
        self._out_edges = np.empty(size, dtype=np.int64)
        self._out_nodes = np.empty(size, dtype=np.int64)
        self._out_len = np.empty(size, dtype=np.int64)
        self._outputs = (address(self._out_edges), address(self._out_nodes), address(self._out_len))
        self._out_size = size

    def two_hop_cost(self, ptr: int, nbr: int, u: int) -> int:
        """Adjacency entries read by a BFS from ``u`` to two hops (``ptr``, ``nbr``: array addresses)."""
        return int(self._cost(ptr, nbr, u))

    def paths(
        self,
        forward: tuple[int, int, int, int],
        backward: tuple[int, int, int],
        rel_ok: npt.NDArray[np.uint8] | None,
        s: int,
        t: int,
        max_hops: int,
        k: int,
    ) -> list[tuple[list[int], list[int]]]:
        """Up to ``k`` simple paths s -> t, shortest first, as (edge indices, node indices after s).

        Args:
            forward: addresses of the ptr, nbr, eid and rel arrays walked from ``s``.
            backward: addresses of the ptr, nbr and rel arrays of the BFS from ``t``.
            rel_ok: one byte per relation code, 1 where the relation may be followed; None for all.
        """
        with self._lock:
            if k * max_hops > self._out_size:
                self._grow(k * max_hops)
            found = int(
                self._fn(
                    *forward,
                    *backward,
                    None if rel_ok is None else address(rel_ok),
                    s,
                    t,
                    max_hops,
                    k,
                    *self._scratch,
                    *self._outputs,
                )
            )
            lengths = self._out_len[:found].tolist()
            edges = self._out_edges[: found * max_hops].tolist()
            nodes = self._out_nodes[: found * max_hops].tolist()
        return [
            (edges[i * max_hops : i * max_hops + n], nodes[i * max_hops : i * max_hops + n])
            for i, n in enumerate(lengths)
        ]
