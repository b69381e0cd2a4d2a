"""One layout per network: 2-D positions in [0, 1] for every agent, computed once in Python.

``layout(graph_or_edges, ids, seed=...)`` returns a numpy array of shape ``(len(ids), 2)``,
row ``i`` the position of ``ids[i]``. The same ids, edges and seed give the same array, bit
for bit, whatever ran before in the process. The report's player, the dashboard, branches and
effects can all reuse one stored copy (``desim.store.layouts`` keeps it), and ``network_key``
names the network a stored layout belongs to (a branch shares its parent's network, so its key).

The method, chosen by measurement (``benchmarks/bench_network_views.py``, RESULTS.md):

* **igraph's DrL** (Martin et al., the force-directed layout behind OpenOrd) for each connected
  piece of fewer than :data:`MULTILEVEL_FROM` agents. Its repulsion comes from a density grid, so it
  costs O(n) per iteration, and it cuts long, stressed edges late in its schedule: a small-world
  network reads as its ring lattice (ropes of neighbours, shortcuts as long faint lines) and the
  hubs of a scale-free network stand apart, each with its own leaves, instead of the uniform
  disc with the hubs piled in the middle that Fruchterman-Reingold, sfdp and spring layouts give.
  igraph's own DrL schedule (750 iterations, 100 of them in the costly "simmer" phase) takes
  16 s for 5,000 agents; :func:`drl_schedule` keeps its phases in proportion at 125
  iterations and no simmer, about 2 s at 5,000 (more iterations for small networks).
* From :data:`MULTILEVEL_FROM` agents on (a connected piece of that many) DrL's set-up alone grows to tens of seconds (its per-node
  neighbour maps), so a piece is laid out in two levels: Leiden groups (igraph, modularity at a
  high resolution: groups of some tens of agents) are contracted into a graph of at most
  :data:`COARSE_MAX` nodes, kept to each group's :data:`BACKBONE` heaviest links that weigh at
  least a quarter of its heaviest (a well-mixed network's groups touch hundreds of others by one
  link each), DrL lays that out, every agent starts at its group's place (spread over a disc of
  the group's size), and igraph's grid Fruchterman-Reingold, started cold (a small temperature,
  few iterations, repulsion only between close neighbours), untangles each group locally without
  undoing the arrangement of the groups: at 100,000 agents the groups read as separate clouds,
  along bands for a small world. About 10 s. (A hotter polish, or Fruchterman-Reingold alone,
  collapses it into the disc with the hubs in the middle.)
* Pieces of fewer than :data:`SMALL` agents get Kamada-Kawai (exact, and neat for a dorm or a
  household); pairs a segment; isolated agents a tidy grid in id order below the rest.

Connected pieces are packed side by side, largest first, in rows, each in a square whose area
is proportional to its number of agents (separate groups never overlap). The whole picture is
scaled uniformly (no axis stretched) so that its longer side spans [0, 1], the shorter centred.

igraph's random numbers and progress reports are process-wide: a lock serialises the calls,
each call gets its own ``random.Random`` seeded from ``seed``, and igraph's defaults (the
``random`` module, no progress handler) are put back after it.
"""
from __future__ import annotations

import hashlib
import random
import threading
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, Callable, Sequence

import numpy as np

METHOD = "desim-drl-1"      # stored with a layout: a new method or schedule gets a new name
SMALL = 50                  # below this a piece gets Kamada-Kawai
MULTILEVEL_FROM = 30_000    # from this size on a piece is laid out in two levels
COARSE_RESOLUTION = 20.0    # Leiden resolution of the grouping: groups of some tens of agents
BACKBONE = 8                # links kept per group in the coarse graph (its heaviest)
COARSE_MAX = 5_000          # the largest coarse graph the two-level layout hands to DrL
POLISH_ITERATIONS = 60      # grid Fruchterman-Reingold iterations after the coarse layout
POLISH_TEMPERATURE = 0.5    # their start temperature (FR units: an edge is about 1 long)

Progress = Callable[[float, str], Any]

# igraph's DrL defaults (igraph_layout_drl_options_init, "default"); the schedule changes the iterations.
# python-igraph reads the options as attributes: a dict silently loses all but edge_cut.
_DRL_DEFAULTS = dict(
    edge_cut=32 / 40,
    init_iterations=0, init_temperature=2000.0, init_attraction=10.0, init_damping_mult=1.0,
    liquid_iterations=200, liquid_temperature=2000.0, liquid_attraction=10.0, liquid_damping_mult=1.0,
    expansion_iterations=200, expansion_temperature=2000.0, expansion_attraction=2.0, expansion_damping_mult=1.0,
    cooldown_iterations=200, cooldown_temperature=2000.0, cooldown_attraction=1.0, cooldown_damping_mult=0.1,
    crunch_iterations=50, crunch_temperature=250.0, crunch_attraction=1.0, crunch_damping_mult=0.25,
    simmer_iterations=100, simmer_temperature=250.0, simmer_attraction=0.5, simmer_damping_mult=0.0)
_SCHEDULE = dict(liquid_iterations=25, expansion_iterations=60, cooldown_iterations=25, crunch_iterations=15,
                 simmer_iterations=0)

_LOCK = threading.Lock()


def drl_schedule(n: int) -> dict[str, int]:
    """DrL's iterations per phase for a piece of ``n`` agents.

    125 iterations without the "simmer" phase (whose exact density sums cost more than the
    other phases together) from 1,500 agents on, up to twice as many for smaller pieces.
    Measured at 5,000 agents: the liquid and expansion phases untangle the picture, the cooldown
    and crunch phases (where DrL cuts stressed edges) draw a small world's ropes.
    """
    factor = min(2.0, max(1.0, 1500 / max(n, 1)))
    return {k: int(round(v * factor)) for k, v in _SCHEDULE.items()}


def index_edges(graph_or_edges, ids: Sequence) -> np.ndarray:
    """The undirected edges as positions into ``ids``: an int64 array (m, 2), each row u < v, sorted, unique.

    ``graph_or_edges`` is a networkx graph or pairs of ids (a list of tuples or an (m, 2) array).
    Self-loops and pairs naming an id not in ``ids`` (the edges of a sample to the agents outside
    it) are left out; ``ids`` must be unique.
    """
    keys = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids)
    n = len(keys)
    if hasattr(graph_or_edges, "edges") and callable(graph_or_edges.edges):
        pairs = list(graph_or_edges.edges())
    else:
        pairs = graph_or_edges
    if isinstance(pairs, np.ndarray):
        arr = pairs
    else:
        pairs = list(pairs)
        arr = np.asarray(pairs) if pairs else np.zeros((0, 2), dtype=keys.dtype if n else np.int64)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    if n > 1 and np.any(sorted_keys[1:] == sorted_keys[:-1]):
        raise ValueError("ids must be unique")
    if arr.size == 0 or n == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"edges must be pairs of ids, got an array of shape {arr.shape}")
    try:
        pos = np.searchsorted(sorted_keys, arr)
    except TypeError as exc:
        raise ValueError("edges must name ids of the same type as ids") from exc
    pos = np.minimum(pos, n - 1)
    known = (sorted_keys[pos] == arr).all(axis=1)
    idx = order[pos[known]].astype(np.int64)
    idx = idx[idx[:, 0] != idx[:, 1]]
    idx.sort(axis=1)
    return np.unique(idx, axis=0) if len(idx) else np.zeros((0, 2), dtype=np.int64)


@contextmanager
def igraph_calls(seed, progress: Callable[[str, float], Any] | None = None):
    """Serialise igraph calls and make them repeatable: igraph draws from a ``random.Random(seed)``
    of this call's own; ``progress(message, percent)`` receives igraph's reports. igraph's
    defaults (the ``random`` module, no handler) are put back afterwards."""
    import igraph as ig
    with _LOCK:
        ig.set_random_number_generator(random.Random(seed))
        ig.set_progress_handler(progress)
        try:
            yield ig
        finally:
            ig.set_progress_handler(None)
            ig.set_random_number_generator(random)


def components(n: int, edges: np.ndarray) -> list[np.ndarray]:
    """The connected pieces as arrays of positions, largest first (ties: the smallest position first)."""
    if n == 0:
        return []
    parent = np.arange(n)
    if len(edges):
        import igraph as ig
        parent = np.asarray(ig.Graph(n=n, edges=edges).connected_components().membership)
    order = np.argsort(parent, kind="stable")
    labels = parent[order]
    cuts = np.flatnonzero(np.diff(labels)) + 1
    parts = np.split(order, cuts)
    parts.sort(key=lambda p: (-len(p), int(p[0])))
    return parts


def _unit_box(xy: np.ndarray) -> np.ndarray:
    """Centre in [0, 1]² with the longer side spanning it (aspect kept)."""
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    span = float((hi - lo).max())
    if span <= 0:
        return np.full_like(xy, 0.5)
    return (xy - lo) / span + (1 - (hi - lo) / span) / 2


def _drl(ig, graph, n: int, weights=None) -> np.ndarray:
    opts = SimpleNamespace(**{**_DRL_DEFAULTS, **drl_schedule(n)})
    return np.asarray(graph.layout_drl(weights=weights, options=opts).coords, dtype=float)


def _multilevel(ig, graph, rng: np.random.Generator, stage: Callable[[float, float, str], None]) -> np.ndarray:
    """Two levels for a large piece: Leiden groups laid out by DrL, then a cold grid FR polish.
    ``stage(start, end, what)`` says which share of the piece's work begins."""
    n = graph.vcount()
    stage(0.0, 0.15, "grouping agents (Leiden)")
    member = np.asarray(graph.community_leiden(objective_function="modularity", resolution=COARSE_RESOLUTION,
                                               n_iterations=2).membership)
    coarse = _contract(graph, member)
    while coarse.vcount() > COARSE_MAX:            # a second grouping of the groups
        upper = np.asarray(coarse.community_leiden(objective_function="modularity", weights="weight",
                                                   resolution=COARSE_RESOLUTION, n_iterations=2).membership)
        if upper.max() + 1 >= coarse.vcount():
            break
        member = upper[member]
        coarse = _contract(coarse, upper)
    k = coarse.vcount()
    stage(0.15, 0.75, f"laying out {k:,} groups (DrL)")
    coarse = _backbone(coarse, BACKBONE)
    if k > 2 and coarse.ecount():
        opts = SimpleNamespace(**{**_DRL_DEFAULTS, **drl_schedule(k)})
        cxy = np.asarray(coarse.layout_drl(weights="weight", options=opts).coords, dtype=float)
    else:
        cxy = rng.uniform(-1, 1, (k, 2))
    stage(0.75, 0.8, "placing agents in their groups")
    cxy -= cxy.mean(axis=0)
    rms = float(np.sqrt((cxy ** 2).sum(axis=1).mean())) or 1.0
    cxy *= 0.5 * np.sqrt(n) / rms            # FR's scale: about one unit of area per agent
    sizes = np.bincount(member, minlength=k)
    angle = rng.uniform(0, 2 * np.pi, n)
    radius = 0.5 * np.sqrt(sizes[member]) * np.sqrt(rng.uniform(0, 1, n))
    start = cxy[member] + np.column_stack([radius * np.cos(angle), radius * np.sin(angle)])
    stage(0.8, 1.0, "polishing (grid Fruchterman-Reingold)")
    xy = graph.layout_fruchterman_reingold(seed=start.tolist(), niter=POLISH_ITERATIONS,
                                           start_temp=POLISH_TEMPERATURE, grid=True)
    return np.asarray(xy.coords, dtype=float)


def _backbone(graph, keep: int):
    """Each node's ``keep`` heaviest links (ties: the first listed) that weigh at least a quarter
    of its heaviest, the union over nodes.

    The groups of a well-mixed network (Barabasi-Albert) are linked to hundreds of other groups
    by one or two links each: 1,700 groups of 100,000 agents had 184,000 links, and DrL costs
    about the same per link as per node. The strongest links keep the arrangement, and leaving
    out the light ones (a small world's single shortcuts beside the dozens of links to the next
    stretch of the ring) lets the groups of a ring lattice draw a ring."""
    m = graph.ecount()
    if m == 0:
        return graph
    ends = np.asarray(graph.get_edgelist(), dtype=np.int64)
    weight = np.asarray(graph.es["weight"], dtype=float)
    node = np.concatenate([ends[:, 0], ends[:, 1]])
    edge = np.concatenate([np.arange(m), np.arange(m)])
    order = np.lexsort((edge, -weight[edge], node))
    node, edge = node[order], edge[order]
    first = np.searchsorted(node, node, side="left")
    rank = np.arange(len(node)) - first
    strong = weight[edge] >= 0.25 * weight[edge[first]]     # at least a quarter of the node's heaviest link
    chosen = np.unique(edge[(rank < keep) & strong])
    if len(chosen) == m:
        return graph
    return graph.subgraph_edges(chosen.tolist(), delete_vertices=False)


def _contract(graph, member: np.ndarray):
    """The graph of groups: one node per group, edges weighted by the links between groups."""
    coarse = graph.copy()
    if "weight" not in coarse.es.attributes():
        coarse.es["weight"] = [1.0] * coarse.ecount()
    coarse.contract_vertices(member.tolist())
    coarse.simplify(combine_edges={"weight": "sum"})
    return coarse


def _pack(parts: list[np.ndarray], inner: list[np.ndarray], isolated: np.ndarray, n: int) -> np.ndarray:
    """Shelf-pack the pieces (each in a square of area ~ its size) and the isolated agents' grid."""
    xy = np.zeros((n, 2))
    sides = [np.sqrt(len(p)) for p in parts]
    area = sum(s * s for s in sides) + len(isolated)
    width = max(max(sides, default=1.0), np.sqrt(area) * 1.15, 1.0)
    x = y = row = 0.0
    for part, side, local in zip(parts, sides, inner):
        if x > 0 and x + side > width + 1e-9:
            x, y, row = 0.0, y + row, 0.0
        xy[part] = np.column_stack([x + side * (0.08 + 0.84 * local[:, 0]),
                                    y + side * (0.08 + 0.84 * local[:, 1])])
        x, row = x + side, max(row, side)
    if len(isolated):
        y += row
        cols = max(1, int(np.floor(width)))
        k = np.arange(len(isolated))
        xy[isolated] = np.column_stack([(k % cols) + 0.5, y + (k // cols) + 0.5])
    xy[:, 1] = -xy[:, 1]                       # first row at the top
    return _unit_box(xy)


def layout(graph_or_edges, ids: Sequence, *, seed: int, progress: Progress | None = None) -> np.ndarray:
    """Positions in [0, 1] for ``ids`` (row i is ``ids[i]``): an array of shape (len(ids), 2).

    ``graph_or_edges``: a networkx graph or pairs of ids (see :func:`index_edges`); its nodes
    outside ``ids`` are ignored. ``seed``: any int; the same inputs and seed give the same array
    bit for bit. ``progress(fraction, message)``, if given, is called as the work advances
    (fraction from 0 to 1, at most about once per per cent), so a caller can print it.
    """
    ids = list(ids) if not isinstance(ids, np.ndarray) else ids
    n = len(ids)
    if n == 0:
        return np.zeros((0, 2))
    edges = index_edges(graph_or_edges, ids)
    parts = components(n, edges)
    isolated = np.sort(np.concatenate([p for p in parts if len(p) == 1] or [np.zeros(0, np.int64)]))
    parts = [p for p in parts if len(p) > 1]
    total = float(sum(len(p) for p in parts)) or 1.0
    state = {"done": 0.0, "last": -1.0, "message": ""}

    def report(fraction: float, message: str) -> None:
        if progress is None:
            return
        fraction = min(1.0, max(0.0, fraction))
        if fraction - state["last"] >= 0.01 or message != state["message"] or (fraction >= 1.0 > state["last"]):
            state["last"], state["message"] = fraction, message
            progress(fraction, message)

    report(0.0, f"layout of {n:,} agents, {len(edges):,} edges, {len(parts):,} connected piece{'s' if len(parts) != 1 else ''}")
    local_index = np.full(n, -1, dtype=np.int64)
    inner: list[np.ndarray] = []
    current: dict[str, Any] = {"part": 0}

    def on_igraph(message: str, percent: float) -> None:
        size = len(parts[current["part"]])
        base, span, text = current.get("stage", (0.0, 1.0, ""))
        local = base + span * min(1.0, max(0.0, percent / 100.0))
        report((state["done"] + size * local) / total, text or message)

    with igraph_calls(seed, on_igraph if progress else None) as ig:
        rng = np.random.default_rng(np.random.SeedSequence([abs(int(seed)), 0x1A70]))
        for i, part in enumerate(parts):
            current["part"] = i
            size = len(part)
            if size == 2:
                local = np.array([[0.0, 0.5], [1.0, 0.5]])
            else:
                local_index[part] = np.arange(size)
                mask = local_index[edges[:, 0]] >= 0
                sub = ig.Graph(n=size, edges=local_index[edges[mask]])
                local_index[part] = -1
                if size < SMALL:
                    local = np.asarray(sub.layout_kamada_kawai().coords, dtype=float)
                elif size < MULTILEVEL_FROM:
                    current["stage"] = (0.0, 1.0, f"DrL on {size:,} agents")
                    report(state["done"] / total, current["stage"][2])     # said even if igraph reports nothing
                    local = _drl(ig, sub, size)
                else:
                    def stage(start: float, end: float, text: str, size=size) -> None:
                        current["stage"] = (start, end - start, f"{text}, {size:,} agents")
                        report((state["done"] + size * start) / total, current["stage"][2])
                    local = _multilevel(ig, sub, rng, stage)
                current.pop("stage", None)
            inner.append(_unit_box(local))
            state["done"] += size
            report(state["done"] / total, f"piece {i + 1} of {len(parts)} laid out")
    xy = _pack(parts, inner, isolated, n)
    report(1.0, "layout done")
    return xy


def network_key(graph_or_edges, ids: Sequence, seed: int) -> str:
    """A name for (the method, the ids in order, the undirected edges, the seed): a stored layout
    with the same key is the one :func:`layout` would compute. Hex SHA-256."""
    return indexed_key(index_edges(graph_or_edges, ids), ids, seed)


def indexed_key(edges: np.ndarray, ids: Sequence, seed: int) -> str:
    """:func:`network_key` of edges already given as :func:`index_edges` returns them (positions into
    ``ids``, each row u < v, sorted, unique): the same key, without matching ids again."""
    h = hashlib.sha256()
    h.update(f"{METHOD}\0{int(seed)}\0{len(ids)}\0".encode())
    h.update("\0".join(str(a) for a in ids).encode())
    h.update(b"\0")
    h.update(np.ascontiguousarray(edges, dtype="<i8").tobytes())
    return h.hexdigest()


