"""Generated networks as edge arrays, without building a networkx graph.

A study's ``watts_strogatz`` or ``barabasi_albert`` network is networkx's graph: the same seed gives the same edges, listed in
the same order, and so the same neighbour order in ``ctx.graph`` and in the feeds (which the reference
studies' panels depend on). At a million nodes networkx needs its graph of dicts twice (drawn, then
relabelled to agent ids): several GiB and most of a minute. Here the same draws from the same
``random.Random(seed)`` are replayed over a lattice held as arithmetic, the few rewired edges are kept
in sets, and the result is the edge list networkx's ``G.edges()`` would give, as two integer arrays.
"""
from __future__ import annotations

import random

import numpy as np


def watts_strogatz_edges(n: int, k: int, p: float, seed: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``nx.watts_strogatz_graph(n, k, p, seed=seed).edges()`` as ``(source, target)`` position arrays, in
    that order; None where the lattice would wrap onto itself (``n <= 2 * k``: small graphs, which
    networkx builds quickly anyway).

    networkx's algorithm, replayed draw for draw: a ring where each node ``u`` is joined to ``u + j`` for
    ``j = 1 .. k // 2``; then, for each ``j`` and each node ``u`` in order, with probability ``p`` the edge
    ``(u, u + j)`` is replaced by ``(u, w)``, ``w`` drawn uniformly until it is neither ``u`` nor already
    a neighbour of ``u``. Neighbour order is a dict's insertion order in networkx: the ring's neighbours
    as they were first added, less the removed ones, then the rewired ones in the order they arrived."""
    h = k // 2
    if n <= 2 * k or h == 0:
        return None
    rng = random.Random(seed)
    draw, choice, nodes = rng.random, rng.choice, range(n)
    removed: set[int] = set()         # ring edges gone, as j * n + u (the edge (u, u + j))
    added: set[int] = set()           # rewired edges, as min * n + max
    order: list[tuple[int, int]] = []   # rewired edges (u, w) in the order networkx adds them
    degree = [2 * h] * n              # networkx checks u's degree while it redraws

    def has_edge(u: int, w: int) -> bool:
        d = (w - u) % n
        if 1 <= d <= h:                 # the ring edge (u, u + d)
            if d * n + u not in removed:
                return True
        elif n - d <= h:                # the ring edge (w, w + n - d)
            if (n - d) * n + w not in removed:
                return True
        return (min(u, w) * n + max(u, w)) in added

    for j in range(1, h + 1):
        for u in nodes:
            if draw() < p:
                w = choice(nodes)
                while w == u or has_edge(u, w):
                    w = choice(nodes)
                    if degree[u] >= n - 1:
                        break
                else:
                    v = (u + j) % n
                    key = j * n + u
                    if key in removed:          # (u, u + j) was taken away already: networkx would fail too
                        raise ValueError(f"watts_strogatz: edge ({u}, {v}) removed twice")
                    removed.add(key)
                    degree[v] -= 1
                    added.add(min(u, w) * n + max(u, w))
                    order.append((u, w))
                    degree[w] += 1
    return _edge_list(n, h, removed, order)


def _edge_list(n: int, h: int, removed: set[int], order: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """The graph's edges as ``G.edges()`` lists them: node by node, each node's neighbours in insertion
    order, an edge given once, from whichever end comes first."""
    u = np.arange(n, dtype=np.int64)
    # the ring's neighbours of u in the order networkx added them: for j = 1 .. h, the edge from u - j
    # (added while adding node u - j's edges) and the edge to u + j (added with u's own); the one whose
    # first end comes first in node order is added first, so u - j leads unless it wraps past 0
    cols, gone, gone_keys = [], [], _as_array(removed)
    for j in range(1, h + 1):
        back, ahead = (u - j) % n, (u + j) % n
        back_first = u >= j
        cols += [np.where(back_first, back, ahead), np.where(back_first, ahead, back)]
        # is the edge still there? (u - j, u) is ring edge j of u - j; (u, u + j) is ring edge j of u
        gone_back = np.isin(j * n + back, gone_keys)
        gone_ahead = np.isin(j * n + u, gone_keys)
        gone += [np.where(back_first, gone_back, gone_ahead), np.where(back_first, gone_ahead, gone_back)]
    ring = np.stack(cols, axis=1)
    keep = ~np.stack(gone, axis=1) & (ring > u[:, None])     # each edge once: from its smaller end
    src = np.repeat(u, keep.sum(axis=1))
    dst = ring[keep]
    if order:
        pairs = np.array(order, dtype=np.int64)
        a, b = np.minimum(pairs[:, 0], pairs[:, 1]), np.maximum(pairs[:, 0], pairs[:, 1])
        src, dst = np.concatenate([src, a]), np.concatenate([dst, b])
    by = np.argsort(src, kind="stable")      # ring neighbours first, then the rewired ones as they came
    return src[by], dst[by]


def _as_array(keys: set[int]) -> np.ndarray:
    return np.fromiter(keys, np.int64, len(keys))


def barabasi_albert_edges(n: int, m: int, seed: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``nx.barabasi_albert_graph(n, m, seed=seed).edges()`` as ``(source, target)`` position arrays, in that
    order; None for settings networkx refuses (``m < 1`` or ``m >= n``), so that its error is the one given.

    networkx's algorithm, replayed draw for draw: a star of ``m + 1`` nodes, then each new node joined to
    ``m`` distinct earlier ones, each drawn from the list of edge ends (preferential attachment) until
    ``m`` differ; the list grows by the chosen ends, in the set's order as networkx extends it, and by the
    new node ``m`` times. Every node's later neighbours arrive in node order, so ``G.edges()`` lists the
    edges sorted by their smaller end, then their larger."""
    if m < 1 or m >= n:
        return None
    choice = random.Random(seed).choice
    repeated = [0] * m + list(range(1, m + 1))      # the star's edge ends, as networkx lists them by degree
    chosen: list[int] = []
    for source in range(m + 1, n):
        targets: set[int] = set()
        while len(targets) < m:
            targets.add(choice(repeated))
        chosen.extend(targets)
        repeated.extend(targets)
        repeated.extend([source] * m)
    low = np.concatenate([np.zeros(m, np.int64), np.array(chosen, np.int64)])
    high = np.concatenate([np.arange(1, m + 1, dtype=np.int64), np.repeat(np.arange(m + 1, n, dtype=np.int64), m)])
    by = np.lexsort((high, low))
    return low[by], high[by]
