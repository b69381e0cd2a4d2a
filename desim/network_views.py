"""The data of the network views beyond the hairball, from plain inputs (ids, edge pairs, state codes).

Which view reads at which size (:func:`suggested_view`): every agent drawn up to about 20,000
agents; above that one node per community. The functions return numpy arrays and dicts of
them; drawing is left to the report and the dashboard. A run's pictures, read from its store
(its stored layout and communities, the frames of a state, the views' JSON-ready data), are
:mod:`desim.report.network_picture`'s: this module reads nothing and writes nothing.

* **Communities** (:func:`communities`, :func:`community_view`): Leiden (igraph, modularity, two
  passes), chosen by measurement: 2 s for a 100,000-agent Barabasi-Albert network, where
  igraph's Louvain took 50-130 s, with a higher modularity (0.41 against 0.37). Leiden also
  guarantees connected communities, which Louvain does not. The community view is one node
  per community, sized by its agents, coloured by its state shares step by step, with edges
  weighted by the links between communities: a few hundred nodes whatever the population.
* **Adoption** (:func:`hop_distances`, :func:`change_steps`, :func:`adoption_positions`): agents
  placed by their hop distance from the seeds, or by the step they changed state, on rings
  (distance from the centre) or in columns (left to right).
* **Node size by degree** (:func:`degree_radius`): area proportional to degree; never by how rare
  an agent's state is (a rare state drawn larger reads as a larger share).

State codes are integers per step and agent, shape ``(steps, n)``: ``0 .. n_categories - 1``,
and any other value (-1 by convention) for no value.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .layout import igraph_calls, index_edges

COMMUNITY_VIEW_FROM = 20_000   # from this many agents the community view is the one that reads


def suggested_view(n_agents: int) -> str:
    """``"network"`` (every agent, laid out by :func:`desim.layout.layout`) below
    :data:`COMMUNITY_VIEW_FROM` agents, ``"communities"`` from there on: at 20,000 agents a
    node-level picture of a few hundred pixels has several agents per pixel."""
    return "communities" if n_agents >= COMMUNITY_VIEW_FROM else "network"


def _graph(ig, n: int, edges: np.ndarray):
    return ig.Graph(n=n, edges=np.asarray(edges, dtype=np.int64))


def communities(graph_or_edges, ids: Sequence, *, seed: int = 0, resolution: float = 1.0) -> np.ndarray:
    """A community label per agent (in the order of ``ids``): int64, 0 the largest community.

    Leiden on modularity (igraph ``community_leiden``, two passes) at ``resolution``, its random
    choices drawn from ``seed``: the same inputs give the same labels. Labels are renumbered by
    size, largest first (ties: the community of the earliest agent first). An isolated agent is
    a community of its own.
    """
    n = len(ids)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    edges = index_edges(graph_or_edges, ids)
    with igraph_calls(seed) as ig:
        raw = np.asarray(_graph(ig, n, edges).community_leiden(
            objective_function="modularity", resolution=resolution, n_iterations=2).membership, dtype=np.int64)
    return _by_size(raw)


def _by_size(raw: np.ndarray) -> np.ndarray:
    k = int(raw.max()) + 1
    sizes = np.bincount(raw, minlength=k)
    first = np.full(k, len(raw))
    np.minimum.at(first, raw, np.arange(len(raw)))
    order = np.lexsort((first, -sizes))
    rank = np.empty(k, dtype=np.int64)
    rank[order] = np.arange(k)
    return rank[raw]


def community_links(labels: np.ndarray, edges: np.ndarray) -> dict[str, np.ndarray]:
    """Links between communities: ``source < target`` and ``weight`` (the number of agent links
    between them), sorted; ``internal`` per community (its links inside)."""
    labels = np.asarray(labels, dtype=np.int64)
    k = int(labels.max()) + 1 if len(labels) else 0
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    a, b = labels[edges[:, 0]], labels[edges[:, 1]]
    inside = a == b
    internal = np.bincount(a[inside], minlength=k)
    lo, hi = np.minimum(a[~inside], b[~inside]), np.maximum(a[~inside], b[~inside])
    keys, weight = np.unique(lo * max(k, 1) + hi, return_counts=True)
    return {"source": keys // max(k, 1), "target": keys % max(k, 1), "weight": weight, "internal": internal}


def state_counts(labels: np.ndarray, state_codes: np.ndarray, n_categories: int) -> np.ndarray:
    """Agents per community, step and category: int64 array (steps, communities, n_categories).
    Codes outside ``0 .. n_categories - 1`` (no value) are not counted."""
    labels = np.asarray(labels, dtype=np.int64)
    codes = np.asarray(state_codes)
    if codes.ndim == 1:
        codes = codes[None, :]
    steps, n = codes.shape
    if n != len(labels):
        raise ValueError(f"state codes for {n} agents, labels for {len(labels)}")
    k = int(labels.max()) + 1 if n else 0
    valid = (codes >= 0) & (codes < n_categories)
    flat = (np.arange(steps)[:, None] * k + labels[None, :]) * n_categories + np.where(valid, codes, 0)
    counts = np.bincount(flat[valid].ravel(), minlength=steps * k * n_categories)
    return counts.reshape(steps, k, n_categories)


def community_view(labels: np.ndarray, edges: np.ndarray, state_codes: np.ndarray, n_categories: int, *,
                   seed: int = 0) -> dict[str, Any]:
    """One node per community: the data of the community view.

    ``labels``: community per agent (from :func:`communities`); ``edges``: index pairs (m, 2)
    into the agents; ``state_codes``: (steps, n) codes. Returns

    * ``size`` (k,): agents per community; ``x``, ``y`` (k,): a layout of the community graph in
      [0, 1] (:func:`desim.layout.layout` on each community's 8 strongest links: the communities
      of a 5,000-agent ring lattice sit along a ring); ``radius`` (k,): a disc whose area is proportional to the size, the
      discs together covering about a quarter of the square, pushed apart until they do not
      overlap (then the positions are rescaled into [0, 1] again);
    * ``counts`` (steps, k, n_categories) and ``shares`` (the same divided by the agents with a
      value at that step: each row sums to 1, or is all 0 when no agent of it has a value);
    * ``source``, ``target``, ``weight``: links between communities (weight = number of agent
      links), ``internal`` (k,): links inside each community.
    """
    from .layout import layout as _layout
    labels = np.asarray(labels, dtype=np.int64)
    k = int(labels.max()) + 1 if len(labels) else 0
    size = np.bincount(labels, minlength=k)
    links = community_links(labels, edges)
    counts = state_counts(labels, state_codes, n_categories)
    present = counts.sum(axis=2, keepdims=True)
    shares = np.divide(counts, present, out=np.zeros(counts.shape, dtype=float), where=present > 0)
    if k:
        strongest = _strongest_links(links, k)
        xy = _layout(strongest, np.arange(k), seed=seed)
        radius = np.sqrt(0.25 * size / size.sum() / np.pi)
        xy, radius = _separate(xy, radius)
    else:
        xy, radius = np.zeros((0, 2)), np.zeros(0)
    return {"size": size, "x": xy[:, 0], "y": xy[:, 1], "radius": radius, "counts": counts, "shares": shares,
            **links}


def _strongest_links(links: dict[str, np.ndarray], k: int, keep: int = 8) -> np.ndarray:
    """Each community's ``keep`` heaviest links (pairs of community numbers), for the layout: a
    well-mixed network's communities are all linked to each other, and DrL costs per link."""
    src, dst, w = links["source"], links["target"], links["weight"]
    if len(src) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    node = np.concatenate([src, dst])
    edge = np.concatenate([np.arange(len(src))] * 2)
    order = np.lexsort((edge, -w[edge], node))
    node, edge = node[order], edge[order]
    rank = np.arange(len(node)) - np.searchsorted(node, node, side="left")
    chosen = np.unique(edge[rank < keep])
    return np.column_stack([src[chosen], dst[chosen]])


def _separate(xy: np.ndarray, radius: np.ndarray, rounds: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Push overlapping discs apart (each overlapping pair moves apart along its centre line by
    half the overlap, a few dozen rounds), then fit everything into [0, 1] again, radii scaled alike."""
    xy = xy.astype(float).copy()
    k = len(xy)
    if k > 1:
        for _ in range(rounds if k <= 1000 else 0):       # O(k²) memory per round
            d = xy[:, None, :] - xy[None, :, :]
            dist = np.sqrt((d ** 2).sum(axis=2))
            need = radius[:, None] + radius[None, :] + 0.002
            overlap = np.clip(need - dist, 0, None)
            np.fill_diagonal(overlap, 0)
            if not overlap.any():
                break
            unit = d / np.where(dist > 0, dist, 1)[:, :, None]
            xy += 0.5 * (overlap[:, :, None] * unit).sum(axis=1)
    lo = (xy - radius[:, None]).min(axis=0)
    hi = (xy + radius[:, None]).max(axis=0)
    span = float((hi - lo).max()) or 1.0
    xy = (xy - lo) / span + (1 - (hi - lo) / span) / 2
    return xy, radius / span


def hop_distances(graph_or_edges, ids: Sequence, seeds: Sequence) -> np.ndarray:
    """Hops from the nearest of ``seeds`` (ids) to every agent, in the order of ``ids``: int64, 0 for
    a seed, -1 for an agent no seed reaches. One breadth-first search (igraph) from a virtual
    source linked to every seed."""
    n = len(ids)
    edges = index_edges(graph_or_edges, ids)
    where = {a: i for i, a in enumerate(ids)}
    start = sorted({where[s] for s in seeds if s in where})
    if not start:
        return np.full(n, -1, dtype=np.int64)
    extra = np.column_stack([np.full(len(start), n), start])
    with igraph_calls(0) as ig:
        g = _graph(ig, n + 1, np.concatenate([edges, extra]) if len(edges) else extra)
        dist = np.asarray(g.distances(source=[n])[0][:n], dtype=float)
    out = np.where(np.isfinite(dist), dist - 1, -1)
    return out.astype(np.int64)


def change_steps(state_codes: np.ndarray, *, target: int | None = None) -> np.ndarray:
    """Per agent, the first step (row of ``state_codes``) at which it changed state: its code
    differs from row 0, or, with ``target``, equals ``target`` (0 when it starts there). -1: never."""
    codes = np.asarray(state_codes)
    hit = codes == target if target is not None else codes != codes[:1]
    first = hit.argmax(axis=0)
    return np.where(hit.any(axis=0), first, -1).astype(np.int64)


def adoption_positions(levels: np.ndarray, edges: np.ndarray | None = None, *, shape: str = "rings") -> np.ndarray:
    """Positions in [0, 1] from a level per agent (hops from the seeds, or the step it changed
    state; -1 = never, drawn last): ``rings`` around the centre (level 0 in the middle, one ring
    per level, "never" the outer ring), or ``columns`` from left to right.

    Inside a level, agents are ordered by the mean position of their neighbours in the level
    before (the barycentre heuristic of layered drawings, when ``edges`` are given), else by
    index, so the agents one seed reached sit together; each level is a band, its agents
    spread over the band's width by a golden-ratio sequence so that dense levels do not print
    as a line.
    """
    levels = np.asarray(levels, dtype=np.int64)
    n = len(levels)
    if n == 0:
        return np.zeros((0, 2))
    if shape not in ("rings", "columns"):
        raise ValueError("shape must be 'rings' or 'columns'")
    top = int(levels.max()) if (levels >= 0).any() else -1
    band = np.where(levels >= 0, levels, top + 1)
    n_bands = int(band.max()) + 1
    order_key = np.zeros(n)                     # where each agent sits along its band, in [0, 1)
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2) if edges is not None else np.zeros((0, 2), np.int64)
    for b in range(n_bands):
        members = np.flatnonzero(band == b)
        if not len(members):
            continue
        key = members.astype(float)
        if b > 0 and len(e):
            prev = band == b - 1
            s = np.zeros(n)
            c = np.zeros(n)
            for u, v in ((e[:, 0], e[:, 1]), (e[:, 1], e[:, 0])):
                m = prev[u] & (band[v] == b)
                np.add.at(s, v[m], order_key[u[m]])
                np.add.at(c, v[m], 1)
            has = c[members] > 0
            key = np.where(has, s[members] / np.maximum(c[members], 1), 2.0 + members / n)
        rank = np.empty(len(members))
        rank[np.lexsort((members, key))] = np.arange(len(members))
        order_key[members] = (rank + 0.5) / len(members)
    jitter = (np.arange(n) * 0.6180339887498949) % 1.0 - 0.5
    if shape == "rings":
        width = 0.5 / (n_bands + 0.5)
        radius = np.where(band == 0, width * 0.5 * np.sqrt((jitter + 0.5)), width * (band + 0.5) + 0.7 * width * jitter)
        angle = 2 * np.pi * order_key
        xy = 0.5 + np.column_stack([radius * np.cos(angle), radius * np.sin(angle)])
    else:
        width = 1.0 / n_bands
        xy = np.column_stack([width * (band + 0.5) + 0.7 * width * jitter, 1.0 - order_key])
    return np.clip(xy, 0.0, 1.0)


def degree_radius(degrees: np.ndarray, *, r_min: float = 1.0, r_max: float = 6.0,
                  reference: float | None = None) -> np.ndarray:
    """A drawing radius per agent from its degree: area proportional to degree.

    ``r = r_min * sqrt(degree / reference)``, at least ``r_min`` and at most ``r_max``;
    ``reference`` defaults to the median of the positive degrees, so a typical agent is drawn at
    ``r_min`` and a hub of 25 times the median degree at 5 ``r_min``. Non-decreasing in degree;
    an agent's state never changes its size.
    """
    d = np.asarray(degrees, dtype=float)
    if reference is None:
        positive = d[d > 0]
        reference = float(np.median(positive)) if len(positive) else 1.0
    reference = max(float(reference), 1e-12)
    return np.clip(r_min * np.sqrt(np.maximum(d, 0) / reference), r_min, max(r_min, r_max))



# named as ``desim.network_views.<name>`` in the README and in error messages before they moved up to the
# report (desim.report.network_picture): still found here, looked up there when asked for
MOVED_TO_REPORT = ("diffusion_player", "picture")


def __getattr__(name: str):
    """``desim.network_views.diffusion_player`` and ``.picture``, the spellings users were told about, kept
    working (PEP 562, as the package face keeps its old names): imported from the report only when asked
    for, by name (importlib), so that this module imports nothing above it."""
    if name in MOVED_TO_REPORT:
        import importlib
        return getattr(importlib.import_module("desim.report.network_picture"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
