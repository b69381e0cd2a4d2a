"""The data of the network views beyond the hairball, from plain inputs (ids, edge pairs, state codes).

Which view reads at which size (:func:`suggested_view`): every agent drawn up to about 20,000
agents; above that one node per community. The functions return numpy arrays and dicts of
them; drawing is left to the report and the dashboard.

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


# =====================================================================================================
# A run's network pictures: the stored layout and communities, the frames of a state, the views' data.
#
# The functions above take plain arrays; the ones below read a run through the store's named reads
# (``desim.store.network_reads``), keep the layout and the communities of its network under the
# network's key (``desim.store.layouts``), and return what the report's player, its PNGs and the
# dashboard draw, as JSON-ready dicts. The drawing itself is ``desim.report.diffusion`` (PNG and the
# offline player) and the dashboard's page; both draw these same dicts with the same encodings.
# =====================================================================================================

import base64  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field as dc_field  # noqa: E402
from pathlib import Path  # noqa: E402

LAYOUT_SEED = 1            # one layout per network, whatever the seed of the run that drew it
NUMERIC_BINS = 32          # colours of a numeric state (viridis)
NO_VALUE = 255             # the code of "no value" in a frame
MAX_NODES = 20_000         # the offline player embeds every agent up to this many (then the community view)
MAX_CATEGORIES = 20        # a categorical state with more values than this (agent ids, free text) is refused
SIZE_BY_DEGREE_FROM = 4.0  # nodes are sized by degree when the largest degree is this many times the median
MISSING_COLOR = "#cccccc"


@dataclass
class RunNetwork:
    """A run's network: its agents (sorted ids), its undirected links as positions (u < v, unique),
    the key its layout and communities are stored under, and where the study is."""

    study_root: Path
    run_id: str
    ids: list[str]
    edges: np.ndarray
    key: str
    stored_rows: int = 0
    _degree: np.ndarray | None = dc_field(default=None, repr=False)

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def degree(self) -> np.ndarray:
        if self._degree is None:
            self._degree = np.bincount(self.edges.ravel(), minlength=self.n).astype(np.int64)
        return self._degree


def read_network(con, study_root, run_id: str) -> RunNetwork:
    """The run's network from its store (``con``, read-only): ids, canonical links and their key."""
    from desim.layout import indexed_key
    from desim.store import network_reads
    ids, rows = network_reads.network(con, run_id)
    edges = index_edges(rows, np.arange(len(ids)))
    return RunNetwork(Path(study_root), run_id, ids, edges, indexed_key(edges, ids, LAYOUT_SEED), len(rows))


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def stored_positions(net: RunNetwork, progress=None) -> tuple[np.ndarray, dict[str, Any]]:
    """The network's layout: read from ``runs/layouts/<key>.parquet``, or computed
    (:func:`desim.layout.layout`, with ``progress(fraction, message)``) and stored there first.
    Returns the (n, 2) positions and ``{method, seconds, reused, file}``."""
    from desim.layout import METHOD, layout
    from desim.store import layouts
    found = layouts.read_positions(net.study_root, net.key, net.ids)
    where = _relative(layouts.positions_file(net.study_root, net.key), net.study_root)
    levels = {"two_levels": two_level_layout(net)}
    if found is not None:
        xy, meta = found
        return xy, {"method": meta.get("method", METHOD), "seconds": meta.get("seconds"), "reused": True,
                    "file": where, **levels}
    c0, w0 = time.process_time(), time.perf_counter()
    xy = layout(net.edges, np.arange(net.n), seed=LAYOUT_SEED, progress=progress)
    meta = {"method": METHOD, "seed": LAYOUT_SEED, "n": net.n, "links": int(len(net.edges)),
            "seconds": round(time.perf_counter() - w0, 3), "cpu_seconds": round(time.process_time() - c0, 3),
            "run_id": net.run_id}
    layouts.write_positions(net.study_root, net.key, net.ids, xy, meta)
    return xy, {"method": METHOD, "seconds": meta["seconds"], "reused": False, "file": where, **levels}


def two_level_layout(net: RunNetwork) -> bool:
    """Whether :func:`desim.layout.layout` draws (part of) this network in two levels: it does so for each
    connected piece of ``MULTILEVEL_FROM`` agents or more (its clumps are then Leiden groups placed
    first, a drawing device, not the communities of the community view)."""
    from desim import layout as lay
    return net.n >= lay.MULTILEVEL_FROM and len(lay.components(net.n, net.edges)[0]) >= lay.MULTILEVEL_FROM


def stored_communities(net: RunNetwork, progress=None) -> tuple[np.ndarray, dict[str, Any]]:
    """Leiden communities of the network (:func:`communities`), read from beside its layout or
    computed and stored there first; ``(labels, {method, seconds, reused})``."""
    from desim.store import layouts
    found = layouts.read_communities(net.study_root, net.key, net.ids)
    if found is not None:
        labels, meta = found
        return labels, {"method": meta.get("method"), "seconds": meta.get("seconds"), "reused": True}
    if progress:
        progress(0.0, f"communities of {net.n:,} agents (Leiden)")
    w0 = time.perf_counter()
    labels = communities(net.edges, np.arange(net.n), seed=LAYOUT_SEED) if net.n else np.zeros(0, np.int64)
    meta = {"method": "igraph Leiden, modularity, 2 passes", "seed": LAYOUT_SEED, "n": net.n,
            "seconds": round(time.perf_counter() - w0, 3)}
    layouts.write_communities(net.study_root, net.key, net.ids, labels, meta)
    if progress:
        progress(1.0, f"{int(labels.max()) + 1 if net.n else 0} communities")
    return labels, {"method": meta["method"], "seconds": meta["seconds"], "reused": False}


# --- the frames of one state field ------------------------------------------------------------------

@dataclass
class StateFrames:
    """One state field of every agent at every step (step 0: the initial states).

    Categorical (text, booleans, integers with few values): ``codes`` (steps, n) int16 into
    ``categories`` (in the study's declared order, see ``desim.report.figures.ordered_categories``),
    -1 for no value; ``colors`` one per category. Numeric: ``values`` (steps, n) float, NaN for no
    value, drawn in ``NUMERIC_BINS`` viridis colours over ``range``.
    """

    field: str
    kind: str
    steps: list[int]
    categories: list[str]
    colors: list[str]
    codes: np.ndarray | None = None
    values: np.ndarray | None = None
    range: tuple[float, float] = (0.0, 1.0)

    def bins(self) -> np.ndarray:
        """(steps, n) uint8 colour codes: the category, or the numeric bin; ``NO_VALUE`` for none."""
        if self.kind == "categorical":
            return np.where(self.codes >= 0, self.codes, NO_VALUE).astype(np.uint8)
        lo, hi = self.range
        span = (hi - lo) or 1.0
        b = np.clip(((self.values - lo) / span * NUMERIC_BINS).astype(float), 0, NUMERIC_BINS - 1)
        return np.where(np.isfinite(self.values), np.nan_to_num(b).astype(np.int64), NO_VALUE).astype(np.uint8)

    def counts(self) -> np.ndarray:
        """(steps, categories) agents per category at each step, over every agent."""
        k = len(self.categories)
        valid = self.codes >= 0
        flat = (np.arange(len(self.steps))[:, None] * k + np.where(valid, self.codes, 0))[valid]
        return np.bincount(flat, minlength=len(self.steps) * k).reshape(len(self.steps), k)

    def means(self) -> list[float | None]:
        out = []
        for row in self.values:
            ok = np.isfinite(row)
            out.append(float(row[ok].mean()) if ok.any() else None)
        return out

    @property
    def palette(self) -> list[str]:
        if self.kind == "categorical":
            return list(self.colors)
        from desim.report.figures import ramp_colors
        return ramp_colors(NUMERIC_BINS)


def read_frames(con, run_id: str, name: str, n: int, declared: dict[str, str] | None = None,
                ids: Sequence[str] = ()) -> StateFrames:
    """The state field ``name`` of every agent and step, from the store (``con``).

    A categorical field of more than :data:`MAX_CATEGORIES` values is refused (``ReportError``): one
    colour per category cannot tell thousands apart (a field of agent ids such as ``infected_by``, whose
    picture is the transmission tree), and the frames hold a category in one byte. ``ids``, the run's
    agents, only make the message say when the values are agent ids."""
    from desim.report import data
    from desim.report.figures import ordered_categories
    from desim.report.palette import category_colors
    from desim.store import network_reads
    kind = data.display_kind(con, run_id, name)        # ReportError when the run has no such field
    raw = network_reads.field_frames(con, run_id, name, numeric=kind == "numeric")
    steps = raw["steps"]
    where = {s: i for i, s in enumerate(steps)}
    row = np.array([where[s] for s in raw["step"].tolist()], dtype=np.int64) if len(raw["step"]) else raw["step"]
    if kind == "numeric":
        values = np.full((len(steps), n), np.nan)
        values[row, raw["pos"]] = raw["value"]
        finite = values[np.isfinite(values)]
        rng = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        return StateFrames(name, kind, steps, [], [], values=values, range=rng)
    labels = raw["labels"]
    cats = ordered_categories(labels, declared)
    if len(cats) > MAX_CATEGORIES:
        raise data.ReportError(too_many_categories(run_id, name, cats, ids))
    remap = np.array([cats.index(c) for c in labels] + [-1], dtype=np.int64)
    codes = np.full((len(steps), n), -1, dtype=np.int16)
    codes[row, raw["pos"]] = remap[raw["code"]]
    return StateFrames(name, kind, steps, cats, category_colors(cats, declared), codes=codes)


def too_many_categories(run_id: str, name: str, categories: Sequence[str], ids: Sequence[str] = ()) -> str:
    """Why a state field with too many values has no network picture, and what to draw instead."""
    known = set(ids)
    agent_ids = bool(known) and sum(c in known for c in categories) > len(categories) / 2
    what = " (most are agent ids)" if agent_ids else ""
    instead = ("; who passed the state to whom is the transmission tree: `--view tree` with the model's state "
               "field (e.g. --state state)" if agent_ids else "")
    return (f"run {run_id}: state field '{name}' has {len(categories):,} distinct values{what}; the network "
            f"views colour agents by category and draw at most {MAX_CATEGORIES} categories: choose a state field "
            f"with fewer values{instead}")


def seed_agents(frames: StateFrames) -> tuple[np.ndarray, str]:
    """The seeds of a diffusion: the agents not in the most common initial category (the ones a model's
    ``seeds`` put in its seed state; the initial spreaders of a rumour). Positions and the rule in words."""
    if frames.kind != "categorical" or not len(frames.steps):
        return np.zeros(0, np.int64), ""
    first = frames.codes[0]
    valid = first[first >= 0]
    if not len(valid):
        return np.zeros(0, np.int64), ""
    common = int(np.bincount(valid).argmax())
    seeds = np.flatnonzero((first >= 0) & (first != common))
    return seeds, f"the agents not in the most common initial state ('{frames.categories[common]}')"


# --- the views ---------------------------------------------------------------------------------------

def _r(values, digits: int = 4) -> list:
    return np.round(np.asarray(values, dtype=float), digits).tolist()


def _b64(arr: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(arr, dtype=np.uint8).tobytes()).decode("ascii")


def size_rule(degree: np.ndarray) -> tuple[str, np.ndarray]:
    """How nodes are sized: ``("degree", radius)`` (area proportional to degree, :func:`degree_radius`)
    when degrees vary (the largest at least :data:`SIZE_BY_DEGREE_FROM` times the median), else
    ``("constant", ones)``: a ring lattice's nodes all look alike. Never by state."""
    degree = np.asarray(degree)
    positive = degree[degree > 0]
    if len(positive) and degree.max() >= SIZE_BY_DEGREE_FROM * float(np.median(positive)):
        return "degree", degree_radius(degree, r_min=1.0, r_max=6.0)
    return "constant", np.ones(len(degree))


def tree_data(parent: np.ndarray, when: np.ndarray, roots: np.ndarray) -> dict[str, np.ndarray]:
    """A transmission tree laid out in time: ``nodes`` (positions of the agents in it: the roots and
    every agent with a parent), ``x`` their step, ``y`` in [0, 1] (leaves evenly spaced, a parent
    midway between its first and last child, each chain of infections a contiguous band, the largest
    first), ``parent`` (-1 for a root), ``offspring`` (how many it infected).

    ``parent``, ``when``: per agent, the position of its infector (-1: none) and the step it was
    infected (-1: never); ``roots``: the seeds (step 0 unless ``when`` says otherwise)."""
    n = len(parent)
    inside = (parent >= 0) | np.isin(np.arange(n), roots)
    nodes = np.flatnonzero(inside)
    children: dict[int, list[int]] = {}
    for c in nodes.tolist():
        p = int(parent[c])
        if p >= 0 and inside[p]:
            children.setdefault(p, []).append(c)
    root_list = [int(c) for c in nodes if parent[c] < 0 or not inside[parent[c]]]
    for kids in children.values():
        kids.sort(key=lambda c: (when[c], c))
    size = {}
    for c in sorted(nodes.tolist(), key=lambda c: -int(max(when[c], 0))):   # latest first: children before parents
        size[c] = 1 + sum(size.get(k, 1) for k in children.get(c, []))
    # iterative post-order: leaves get the next slot, parents the middle of their children
    y = {}
    slot = 0
    for r in sorted(root_list, key=lambda c: (-size.get(c, 1), when[c], c)):
        stack = [(r, False)]
        while stack:
            node, done = stack.pop()
            kids = children.get(node, [])
            if done or not kids:
                if kids:
                    y[node] = (y[kids[0]] + y[kids[-1]]) / 2
                else:
                    y[node] = slot
                    slot += 1
                continue
            stack.append((node, True))
            for k in reversed(kids):
                stack.append((k, False))
    ys = np.array([y[c] for c in nodes.tolist()], dtype=float)
    ys = 1 - ys / max(slot - 1, 1)
    offspring = np.bincount(parent[nodes][parent[nodes] >= 0], minlength=n)[nodes] if len(nodes) else np.zeros(0)
    x = np.where(when[nodes] >= 0, when[nodes], 0)
    return {"nodes": nodes, "x": x.astype(np.int64), "y": ys, "parent": parent[nodes], "offspring": offspring}


def _posted_share(labels: np.ndarray, steps: list[int], post_step: np.ndarray, post_pos: np.ndarray) -> np.ndarray:
    k = int(labels.max()) + 1 if len(labels) else 0
    size = np.bincount(labels, minlength=k).astype(float)
    out = np.zeros((len(steps), k))
    where = {s: i for i, s in enumerate(steps)}
    for i, s in enumerate(post_step.tolist()):
        if s in where:
            out[where[s], labels[post_pos[i]]] += 1
    return out / np.maximum(size, 1)[None, :]


def picture(study_root, state: str, run_id: str | None = None, *, views: Sequence[str] | None = None,
            max_nodes: int = MAX_NODES, progress=None) -> dict[str, Any]:
    """Everything the network views of one run and one state field draw, as JSON-ready data.

    ``views``: which of ``network`` (every agent at its stored layout position), ``communities``
    (one disc per Leiden community, its state shares), ``adoption`` (agents on rings by hops from
    the seeds, or by the step they changed state) and ``tree`` (who passed the state to whom, when
    the model records ``infected_by``) to include (``"suggested"``: the one that reads at this size);
    default: every one the run allows, the
    node-level ones only up to ``max_nodes`` agents. ``progress(fraction, message)`` hears about
    the slow parts (reading, the layout, the communities).

    The keys: ``meta`` (study, run, field, kind, steps, categories in the declared order and their
    colours, counts or means over **all** agents per step, whether the run stored messages, the
    seeds, the available views and the suggested one) and one entry per included view; ``node``
    (ids, positions, links, radius and size rule, frames as base64 uint8 codes per step, posters per
    step) is there when a node-level view is.
    """
    from desim.report import data
    from desim.report.diffusion import study_colors
    from desim.store import network_reads

    say = progress or (lambda f, m: None)
    root = Path(study_root)
    declared = study_colors(root, state)
    say(0.0, "reading the run's network and states")
    with data.connect(root) as con:
        run = data.recorded_run(con, run_id, root)
        rid = run["run_id"]
        net = read_network(con, root, rid)
        frames = read_frames(con, rid, state, net.n, declared, net.ids)
        n_messages = network_reads.message_count(con, rid)
        post_step, post_pos = network_reads.posters(con, rid) if n_messages else (np.zeros(0, np.int64),) * 2
        transmissions = network_reads.first_transmissions(con, rid) if frames.kind == "categorical" else None
    categorical = frames.kind == "categorical"
    seeds, seed_rule = seed_agents(frames)
    has_tree = transmissions is not None and len(transmissions[0]) > 0
    node_ok = net.n <= max_nodes
    allowed = (["network"] if node_ok else []) + ["communities"] \
        + (["adoption"] if node_ok and categorical and net.n else []) + (["tree"] if node_ok and has_tree else [])
    # each view this run does not allow, and why, so a caller can say what it left out
    left_out: dict[str, str] = {}
    if not node_ok:
        left_out = dict.fromkeys(("network", "adoption", "tree"), f"{net.n:,} agents, more than max_nodes ({max_nodes:,})")
    else:
        if not categorical:
            left_out["adoption"] = f"'{state}' is a number, not a state agents adopt"
        if not has_tree:
            left_out["tree"] = ("the run records no 'infected_by' (who passed the state to whom)" if categorical
                                else f"'{state}' is a number")
    suggested = suggested_view(net.n) if suggested_view(net.n) in allowed else (allowed[0] if allowed else "communities")
    wanted = [v for v in dict.fromkeys(suggested if v == "suggested" else v for v in (allowed if views is None else views))
              if v in allowed]
    size_by, radius = size_rule(net.degree)
    meta: dict[str, Any] = {
        "study": run["study_id"], "title": _study_title(root), "run_id": rid, "field": state, "kind": frames.kind,
        "time_unit": run.get("time_unit") or "step", "n_agents": net.n, "n_links": int(len(net.edges)),
        "steps": frames.steps, "categories": frames.categories, "palette": frames.palette, "missing": MISSING_COLOR,
        "n_messages": int(n_messages), "has_messages": bool(n_messages),
        "seeds": {"count": int(len(seeds)), "rule": seed_rule},
        "available": allowed, "views": wanted, "suggested": suggested, "left_out": left_out,
        # how far the run had got: a run still going, stopped or failed is drawn up to its last stored step
        "run": {"status": run["status"], "n_steps": run.get("n_steps"), "error": run.get("error")},
        "size_by": size_by, "degree": {"min": int(net.degree.min()) if net.n else 0,
                                       "median": float(np.median(net.degree)) if net.n else 0.0,
                                       "max": int(net.degree.max()) if net.n else 0},
        "max_nodes": max_nodes,
    }
    if categorical:
        meta["counts"] = frames.counts().tolist()
    else:
        meta["range"] = list(frames.range)
        meta["means"] = frames.means()
    out: dict[str, Any] = {"meta": meta}

    node_views = [v for v in wanted if v in ("network", "adoption", "tree")]
    if node_views:
        bins = frames.bins()
        node: dict[str, Any] = {"ids": net.ids, "radius": _r(radius, 3), "frames": [_b64(b) for b in bins]}
        if n_messages:
            posters: dict[str, list[int]] = {}
            for s, p in zip(post_step.tolist(), post_pos.tolist()):
                posters.setdefault(str(s), []).append(p)
            node["posters"] = posters
        out["node"] = node
    if "network" in wanted:
        xy, info = stored_positions(net, progress)
        out["network"] = {"x": _r(xy[:, 0]), "y": _r(xy[:, 1]), "edges": net.edges.ravel().tolist(), "layout": info}
    if "communities" in wanted:
        labels, cinfo = stored_communities(net, progress)
        say(0.9, "community view")
        if categorical:
            codes, k = frames.codes, len(frames.categories)
        else:
            codes, k = frames.bins().astype(np.int64), NUMERIC_BINS
            codes = np.where(codes == NO_VALUE, -1, codes)
        view = community_view(labels, net.edges, codes, k, seed=LAYOUT_SEED) if net.n else None
        if view is not None:
            entry = {"size": view["size"].tolist(), "x": _r(view["x"]), "y": _r(view["y"]),
                     "radius": _r(view["radius"], 5), "source": view["source"].tolist(),
                     "target": view["target"].tolist(), "weight": view["weight"].tolist(),
                     "internal": view["internal"].tolist(), "method": cinfo["method"], "reused": cinfo["reused"]}
            if categorical:
                entry["shares"] = np.round(view["shares"], 4).tolist()
            else:
                sums = np.zeros((len(frames.steps), len(view["size"])))
                cnt = np.zeros_like(sums)
                vals = frames.values
                ok = np.isfinite(vals)
                for t in range(len(frames.steps)):
                    np.add.at(sums[t], labels[ok[t]], vals[t][ok[t]])
                    np.add.at(cnt[t], labels[ok[t]], 1)
                means = np.divide(sums, cnt, out=np.full_like(sums, np.nan), where=cnt > 0)
                entry["means"] = [[None if not np.isfinite(v) else round(float(v), 5) for v in row] for row in means]
            if n_messages:
                entry["posted"] = np.round(_posted_share(labels, frames.steps, post_step, post_pos), 4).tolist()
            if node_ok and "node" in out:
                entry["labels"] = labels.tolist()
            out["communities"] = entry
    if "adoption" in wanted:
        hops = hop_distances(net.edges, np.arange(net.n), seeds.tolist()) if len(seeds) else np.full(net.n, -1)
        changed = change_steps(frames.codes) if len(frames.steps) else np.full(net.n, -1)
        changed = np.where(np.isin(np.arange(net.n), seeds), 0, changed)
        entry = {"changed": {"levels": changed.tolist()}}
        by_change = adoption_positions(changed, net.edges)
        entry["changed"].update({"x": _r(by_change[:, 0]), "y": _r(by_change[:, 1])})
        if len(seeds):
            by_hops = adoption_positions(hops, net.edges)
            entry["hops"] = {"levels": hops.tolist(), "x": _r(by_hops[:, 0]), "y": _r(by_hops[:, 1])}
        out["adoption"] = entry
    if "tree" in wanted:
        pos, step, by = transmissions
        parent = np.full(net.n, -1, dtype=np.int64)
        when = np.full(net.n, -1, dtype=np.int64)
        parent[pos] = by
        when[pos] = step
        # a seed is a root infected at step 0: in SIS a seed that recovers and is infected again has an
        # infector in its state, and keeping it would close a loop (it infected its infector first)
        parent[seeds] = -1
        when[seeds] = 0
        t = tree_data(parent, when, seeds)
        offspring = t["offspring"]
        out["tree"] = {"nodes": t["nodes"].tolist(), "x": t["x"].tolist(), "y": _r(t["y"], 5),
                       "parent": t["parent"].tolist(), "offspring": offspring.tolist(),
                       "transmitted": int((t["parent"] >= 0).sum()), "roots": int((t["parent"] < 0).sum()),
                       "field": "infected_by"}
    say(1.0, "view data ready")
    return out


def _study_title(root: Path) -> str:
    from desim.study.files import study_file_or_none
    study = study_file_or_none(root)
    return study.title if study is not None else ""


def diffusion_player(study_root, state: str, run_id: str | None = None, *, out_dir=None, view: str | None = None,
                     pngs: list[str] | None = None, messages: bool = False, max_nodes: int = MAX_NODES,
                     max_panels: int = 12, progress=None) -> dict[str, Any]:
    """The report's diffusion player of one run and state, in one call: :func:`picture` (the stored
    layout and communities reused, or computed and stored first), then
    :func:`desim.report.diffusion.diffusion_player` draws it. Returns its paths (and ``picture``)."""
    from desim.report.diffusion import diffusion_player as draw
    views = None
    if view or pngs:
        wanted = {view} | set(pngs or []) if pngs != ["all"] else None
        views = None if wanted is None else sorted(v for v in wanted if v)
        if views is not None:
            views = sorted(set(views) | {"communities"} | ({"network"} if "adoption" in views or "tree" in views else set()))
    pic = picture(study_root, state, run_id, views=views, max_nodes=max_nodes, progress=progress)
    if progress:
        progress(1.0, "drawing the player and its figures")
    paths = draw(study_root, state, pic["meta"]["run_id"], picture=pic, out_dir=out_dir, view=view, pngs=pngs,
                 messages=messages, max_panels=max_panels)
    paths["picture"] = pic
    return paths
