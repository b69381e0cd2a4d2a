"""The study's graph as compressed sparse rows (CSR) over agent positions, built once per run.

Every diffusion model works on two adjacency arrays in population order
(``ctx.agent_ids[i]`` is node ``i``):

* ``out`` -- for node ``u``, the nodes ``u`` can influence: ``out_indices[out_ptr[u]:out_ptr[u+1]]``.
  On an undirected graph these are the neighbours; on a directed one the successors
  (an edge ``a -> b`` lets ``a`` infect, activate or persuade ``b``, the direction in
  which ``desim`` routes posts: ``b`` reads its predecessors).
* ``in`` -- for node ``v``, the nodes that influence ``v`` (neighbours, or predecessors).

An undirected graph gives one array for both. The order of a node's entries is
the order networkx keeps its neighbours in, so the same graph always gives the
same arrays, and a per-edge value (``edge_values``) sits at the same position as
its edge. Building it reads the graph once in Python (about a second per
million edges); everything after that is numpy.
"""
from __future__ import annotations

import weakref

from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np

from desim.records import is_number


@dataclass
class Network:
    """CSR adjacency of a graph over positions ``0..n-1``; ``out_*`` and ``in_*`` may be the same arrays."""

    n: int
    directed: bool
    out_ptr: np.ndarray
    out_indices: np.ndarray
    in_ptr: np.ndarray
    in_indices: np.ndarray
    graph: Any = field(default=None, repr=False)
    ids: list = field(default_factory=list, repr=False)
    _rows: dict = field(default_factory=dict, repr=False)
    in_from_out: np.ndarray | None = field(default=None, repr=False)   # directed: in-entry -> out-entry
    out_edge: np.ndarray | None = field(default=None, repr=False)      # from edge arrays: out-entry -> edge
    edge_attributes: dict | None = field(default=None, repr=False)     # from edge arrays: name -> per edge

    @property
    def in_degree(self) -> np.ndarray:
        return np.diff(self.in_ptr)

    def rows(self, direction: str = "out") -> np.ndarray:
        """For every CSR entry, the node whose row it is (the source of an ``out`` entry, the
        target of an ``in`` entry). Cached: models use it every step."""
        got = self._rows.get(direction)
        if got is None:
            ptr = self.out_ptr if direction == "out" else self.in_ptr
            got = self._rows[direction] = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(ptr))
        return got

    def edge_values(self, name: str, direction: str = "out", default: float | None = None) -> np.ndarray:
        """The networkx edge attribute ``name`` at every CSR entry of ``direction``, as float64.

        Entry ``k`` of the ``out`` rows of ``u`` holds the attribute of edge ``(u, v)``; of the
        ``in`` rows of ``v``, of edge ``(u, v)`` too (on an undirected graph, the one edge). An
        edge without the attribute takes ``default``; with no default it is an error naming the
        edge (``MissingEdgeValue``).
        """
        if self.out_edge is not None:
            return self._edge_values_from_arrays(name, direction, default)
        adj = dict(self.graph.adjacency())
        values = []
        add = values.append
        for a in self.ids:
            for b, data in adj[a].items():
                v = data.get(name, default)
                if v is None:
                    raise MissingEdgeValue(name, (a, b))
                add(v)
        try:
            out = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            bad = next(v for v in values if not is_number(v))
            raise MissingEdgeValue(name, None, f"edge attribute '{name}' holds {bad!r}, not a number") from None
        if direction == "in" and self.in_from_out is not None:
            return out[self.in_from_out]
        return out

    def _edge_values_from_arrays(self, name: str, direction: str, default: float | None) -> np.ndarray:
        per_edge = (self.edge_attributes or {}).get(name)
        n_edges = int(self.out_edge.max()) + 1 if len(self.out_edge) else 0
        if per_edge is None:
            per_edge = np.full(n_edges, np.nan)
        out = np.asarray(per_edge, np.float64)[self.out_edge]
        missing = np.isnan(out)
        if missing.any():
            if default is None:
                k = int(np.flatnonzero(missing)[0])
                raise MissingEdgeValue(name, (self.ids[int(self.rows("out")[k])], self.ids[int(self.out_indices[k])]))
            out = np.where(missing, float(default), out)
        if direction == "in" and self.in_from_out is not None:
            return out[self.in_from_out]
        return out


class MissingEdgeValue(ValueError):
    """An edge lacks the attribute a parameter reads (or holds something that is not a number)."""

    def __init__(self, name: str, edge: tuple | None, message: str | None = None):
        self.name, self.edge = name, edge
        super().__init__(message or f"edge '{edge[0]}' - '{edge[1]}' has no attribute '{name}' "
                                    "(give every edge one, or a \"default\")")


def _csr(adj: dict, ids: list[str], index: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Row pointers and column positions from ``adj`` (node -> plain dict of neighbours)."""
    n = len(ids)
    rows = list(map(adj.__getitem__, ids))
    degree = np.fromiter(map(len, rows), np.int64, n)
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(degree, out=ptr[1:])
    indices = np.fromiter(map(index.__getitem__, chain.from_iterable(rows)), np.int64, int(ptr[-1]))
    return ptr, indices


def transpose(n: int, ptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CSR of the reversed graph, and for each of its entries the entry of ``(ptr, indices)``
    it reverses (stable: a node's in-entries in the order of their sources)."""
    order = np.argsort(indices, kind="stable")
    sources = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    in_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(indices, minlength=n), out=in_ptr[1:])
    return in_ptr, sources[order], order


def from_graph(graph, ids: list[str], index: dict[str, int]) -> Network:
    """The CSR of ``graph`` (a networkx graph over the agent ids) in population order.

    Reads ``graph.adjacency()`` once (the plain neighbour dicts, no view objects); a directed
    graph's in-rows are the transpose of its out-rows, made in numpy."""
    n = len(ids)
    if graph is None or graph.number_of_nodes() == 0:
        empty_ptr, empty = np.zeros(n + 1, np.int64), np.zeros(0, np.int64)
        return Network(n, False, empty_ptr, empty, empty_ptr, empty, graph, ids)
    directed = graph.is_directed()
    adj = dict(graph.adjacency())
    out_ptr, out_idx = _csr(adj, ids, index)
    if directed:
        in_ptr, in_idx, in_from_out = transpose(n, out_ptr, out_idx)
    else:
        in_ptr, in_idx, in_from_out = out_ptr, out_idx, None
    net = Network(n, directed, out_ptr, out_idx, in_ptr, in_idx, graph, ids)
    net.in_from_out = in_from_out
    return net


_SHARED: dict[int, tuple] = {}       # id(source array) -> (weak reference to it, its ids, the CSR)


def from_edges(network) -> Network:
    """The CSR of a run's network given as edge arrays (``ctx.network``: ``source``, ``target``), without a
    networkx graph. A node's entries are in the order of its edges, which is the order networkx keeps
    the neighbours of a graph built from those edges in, so both ways give the same arrays.

    A network file's arrays are read once per process and shared, read-only, by its runs (the
    replicates of a sweep): their CSR is built once too and shared, read-only (0.07 s a run at
    100,000 nodes and 300,000 edges)."""
    source = network.source
    if not source.flags.writeable:
        hit = _SHARED.get(id(source))
        if hit and hit[0]() is source and hit[1] == network.ids:
            return hit[2]
        net = _from_edges(network)
        for array in (net.out_ptr, net.out_indices, net.in_ptr, net.in_indices, net.out_edge, net.in_from_out):
            if array is not None:
                array.flags.writeable = False
        if len(_SHARED) > 8:
            _SHARED.clear()
        _SHARED[id(source)] = (weakref.ref(source), list(network.ids), net)
        return net
    return _from_edges(network)


def _from_edges(network) -> Network:
    ids, n = network.ids, len(network.ids)
    out_ptr, out_idx, out_edge = network.rows()
    if network.directed:
        in_ptr, in_idx, in_from_out = transpose(n, out_ptr, out_idx)
    else:
        in_ptr, in_idx, in_from_out = out_ptr, out_idx, None
    net = Network(n, network.directed, out_ptr, out_idx, in_ptr, in_idx, None, ids)
    net.in_from_out, net.out_edge, net.edge_attributes = in_from_out, out_edge, dict(network.attributes)
    return net


def edges_of(ptr: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """The CSR entry positions of the rows ``nodes``, row after row (a vectorised
    ``concatenate([arange(ptr[u], ptr[u+1]) for u in nodes])``)."""
    starts = ptr[nodes]
    counts = ptr[nodes + 1] - starts
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    ends = np.cumsum(counts)
    return np.repeat(starts - ends + counts, counts) + np.arange(total, dtype=np.int64)
