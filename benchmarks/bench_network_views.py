"""Network layouts, communities and view data at 1k to 100k agents: every candidate side by side.

    python benchmarks/bench_network_views.py                      # 1,000, 5,000, 20,000 and 100,000 agents
    python benchmarks/bench_network_views.py --sizes 5000         # one size
    python benchmarks/bench_network_views.py --smoke              # tiny sizes (a test runs it)
    python benchmarks/bench_network_views.py --json PATH          # and the figures as one JSON object
    python benchmarks/bench_network_views.py --pictures docs/images   # the layout PNGs of docs/images
    python benchmarks/bench_network_views.py --part views         # only desim's views end to end (below)

Graphs: Barabasi-Albert m = 3 and Watts-Strogatz k = 10, p = 0.1 (networkx generators, seed 1).

Layouts: ``desim.layout.layout`` (the one chosen: igraph's DrL on a shorter schedule, two levels
above 30,000 agents) against igraph's DrL on its own schedule, igraph's grid Fruchterman-Reingold,
igraph's UMAP, networkx's spring and ForceAtlas2 layouts, fa2_modified's Barnes-Hut ForceAtlas2,
networkit's PivotMDS, rustworkx's spring layout and Graphviz's sfdp (when installed), each where
its cost allows (a size above a candidate's cap is marked "not run" with the reason). CPU is the
process's CPU time (all threads; sfdp: its child's), wall the elapsed time. Readability, beside
looking at the pictures, in three numbers over the layout scaled into the unit square:

* edge ratio: mean edge length over the mean distance of random pairs (low: neighbours are drawn
  near each other; about 1 for random positions);
* hub spread: mean distance between the 20 agents of highest degree over that of random pairs
  (near 1: hubs apart, each with its own neighbourhood; low: piled in the middle);
* group purity: the share of agents in the majority Leiden community of their cell, on a grid of
  about 10 agents per cell (high: communities drawn as regions).

Communities: igraph's Leiden (modularity, 2 passes; the one chosen), igraph's Louvain (multilevel)
and networkx's louvain_communities: CPU, count and modularity. View data: the community view
(shares per community and step of a made-up 3-state infection, links between communities, their
layout), hop distances from the seeds with the ring placement, and the step each agent changed
state. Rendering: a PNG of every agent (matplotlib: edges, nodes sized by degree) and of the
community view.

Views end to end (``--part views``, and after the candidates in a full run): for each size and graph a
real desim run of an SIR (``desim.diffusion``, 30 days), then ``desim viz diffusion`` as a command, cold
(no stored layout: it is computed and stored) and warm (reused), its CPU (user + system, all threads);
the view data and each view's PNG in this process; and, when Chromium is installed, the dashboard's
first picture (Playwright: from the click on "Show network" to the canvas's ``data-drawn`` signal, a
fresh server each time, cold and warm) and the time to each other view. Last, the renderer race: a 2-D
canvas against sigma.js 3 (WebGL, read from git where it was vendored) drawing every node and link.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import jsonout

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SIZES = [1000, 5000, 20000, 100000]
SMOKE_SIZES = [200]       # one tiny size: the smoke test checks every part runs, not how they scale
COLORS = np.array(["#b8c0c8", "#d62728", "#1f77b4"])      # susceptible, infected, recovered
STATES = ["susceptible", "infected", "recovered"]


# ---------------------------------------------------------------- inputs

def make_graph(kind: str, n: int):
    import networkx as nx
    g = nx.barabasi_albert_graph(n, 3, seed=1) if kind == "ba" else nx.watts_strogatz_graph(n, 10, 0.1, seed=1)
    return np.asarray(list(g.edges()), dtype=np.int64).reshape(-1, 2)


def infection(n: int, edges: np.ndarray, steps: int = 30, seed: int = 3, beta: float = 0.06,
              gamma: float = 0.2, n_seeds: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """A made-up SIR run: codes (steps + 1, n), 0 susceptible, 1 infected, 2 recovered; and the seeds."""
    rng = np.random.default_rng(seed)
    state = np.zeros(n, np.int8)
    seeds = rng.choice(n, min(n_seeds, n), replace=False)
    state[seeds] = 1
    out = [state.copy()]
    a, b = edges[:, 0], edges[:, 1]
    for _ in range(steps):
        infected = state == 1
        hit = np.zeros(n, bool)
        for u, v in ((a, b), (b, a)):
            m = infected[u] & (state[v] == 0) & (rng.random(len(u)) < beta)
            hit[v[m]] = True
        recover = infected & (rng.random(n) < gamma)
        state = state.copy()
        state[hit] = 1
        state[recover] = 2
        out.append(state.copy())
    return np.array(out), np.sort(seeds)


# ---------------------------------------------------------------- candidates

def _seeded(ig, seed):
    import random
    ig.set_random_number_generator(random.Random(seed))


def cand_desim(n, edges, progress=None):
    from desim.layout import layout
    return layout(edges, np.arange(n), seed=1, progress=progress)


def cand_igraph_drl(n, edges, progress=None):
    import igraph as ig
    _seeded(ig, 1)
    return np.asarray(ig.Graph(n=n, edges=edges).layout_drl().coords)


def cand_igraph_fr(n, edges, progress=None):
    import igraph as ig
    _seeded(ig, 1)
    return np.asarray(ig.Graph(n=n, edges=edges).layout_fruchterman_reingold(grid=True).coords)


def cand_igraph_umap(n, edges, progress=None):
    import igraph as ig
    _seeded(ig, 1)
    return np.asarray(ig.Graph(n=n, edges=edges).layout_umap(epochs=200).coords)


def _nx(n, edges):
    import networkx as nx
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges.tolist())
    return g


def cand_nx_spring(n, edges, progress=None):
    import networkx as nx
    p = nx.spring_layout(_nx(n, edges), seed=1)
    return np.array([p[i] for i in range(n)])


def cand_nx_fa2(n, edges, progress=None):
    import networkx as nx
    p = nx.forceatlas2_layout(_nx(n, edges), seed=1, max_iter=100)
    return np.array([p[i] for i in range(n)])


def cand_fa2m(n, edges, progress=None):
    import scipy.sparse as sp
    from fa2_modified import ForceAtlas2
    a = sp.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    a = (a + a.T).tolil()
    start = np.random.default_rng(1).uniform(-1, 1, (n, 2))
    return np.asarray(ForceAtlas2(verbose=False).forceatlas2(a, pos=start, iterations=100))


def cand_networkit_pivotmds(n, edges, progress=None):
    import networkit as nk
    g = nk.Graph(n)
    for u, v in edges.tolist():
        g.addEdge(u, v)
    algo = nk.viz.PivotMDS(g, 2, 30)
    algo.run()
    return np.asarray(algo.getCoordinates())


def cand_rustworkx(n, edges, progress=None):
    import rustworkx as rx
    g = rx.PyGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from_no_data([(int(a), int(b)) for a, b in edges])
    p = rx.spring_layout(g, seed=1)
    return np.array([p[i] for i in range(n)])


def cand_sfdp(n, edges, progress=None):
    dot = "graph G {\n" + "".join(f"{i};\n" for i in range(n)) + "".join(f"{a}--{b};\n" for a, b in edges) + "}\n"
    out = subprocess.run(["sfdp", "-Tplain", "-Goverlap=true"], input=dot, capture_output=True, text=True,
                         check=True).stdout
    xy = np.zeros((n, 2))
    for line in out.splitlines():
        p = line.split()
        if p and p[0] == "node":
            xy[int(p[1])] = float(p[2]), float(p[3])
    return xy


def _has(module: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(module) is not None


# name, function, largest n it runs at (its cost above), why not above, available?
CANDIDATES = [
    ("desim.layout (igraph DrL, short schedule; two levels >= 30k)", cand_desim, 10**9, "", lambda: True),
    ("igraph DrL, igraph's schedule", cand_igraph_drl, 5000, "30-115 s at 20k", lambda: _has("igraph")),
    ("igraph Fruchterman-Reingold (grid)", cand_igraph_fr, 10**9, "", lambda: _has("igraph")),
    ("igraph UMAP (200 epochs)", cand_igraph_umap, 20000, "about 30 s at 20k", lambda: _has("igraph")),
    ("networkx spring_layout", cand_nx_spring, 1000, "O(n²) per iteration", lambda: True),
    ("networkx forceatlas2_layout", cand_nx_fa2, 1000, "O(n²) per iteration", lambda: True),
    ("fa2_modified ForceAtlas2 (Barnes-Hut)", cand_fa2m, 5000, "about 80 s at 20k",
     lambda: _has("fa2_modified") and _has("scipy")),
    ("networkit PivotMDS", cand_networkit_pivotmds, 10**9, "", lambda: _has("networkit")),
    ("rustworkx spring_layout", cand_rustworkx, 5000, "O(n²) per iteration", lambda: _has("rustworkx")),
    ("graphviz sfdp", cand_sfdp, 20000, "kept to 20k for the run's length", lambda: shutil.which("sfdp") is not None),
]


def timed(fn, *args, **kwargs):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn(*args, **kwargs)
    c1, w1 = time.process_time(), time.perf_counter()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    child = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    return out, c1 - c0 + child, w1 - w0


# ---------------------------------------------------------------- readability

def unit(xy: np.ndarray) -> np.ndarray:
    xy = np.asarray(xy, dtype=float)
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    span = float((hi - lo).max()) or 1.0
    return (xy - lo) / span


def _random_pairs(n: int, k: int = 20000) -> tuple[np.ndarray, np.ndarray]:
    return np.random.default_rng(0).integers(0, n, (2, k))


def edge_ratio(xy, edges) -> float:
    xy = unit(xy)
    a, b = _random_pairs(len(xy))
    lengths = np.linalg.norm(xy[edges[:, 0]] - xy[edges[:, 1]], axis=1).mean()
    return float(lengths / np.linalg.norm(xy[a] - xy[b], axis=1).mean())


def hub_spread(xy, degree, k: int = 20) -> float:
    xy = unit(xy)
    top = np.argsort(-degree, kind="stable")[:k]
    d = np.linalg.norm(xy[top][:, None] - xy[top][None], axis=2).sum() / (k * (k - 1))
    a, b = _random_pairs(len(xy))
    return float(d / np.linalg.norm(xy[a] - xy[b], axis=1).mean())


def group_purity(xy, labels) -> float:
    xy = unit(xy)
    bins = max(2, int(np.sqrt(len(xy) / 10)))
    col = np.minimum((xy * bins).astype(int), bins - 1)
    cell = col[:, 0] * bins + col[:, 1]
    k = int(labels.max()) + 1
    keys, counts = np.unique(cell.astype(np.int64) * k + labels, return_counts=True)
    best = np.zeros(bins * bins, dtype=np.int64)
    np.maximum.at(best, keys // k, counts)
    return float(best.sum() / len(xy))


def modularity(n, edges, labels) -> float:
    import igraph as ig
    return float(ig.Graph(n=n, edges=edges).modularity(labels.tolist()))


# ---------------------------------------------------------------- rendering

def render_nodes(xy, edges, codes, degree, title: str, px: int = 640, dpi: int = 100) -> bytes:
    """A PNG of every agent: edges faint (fainter the more there are), nodes of area ~ degree
    (desim.network_views.degree_radius), the susceptible under the others."""
    import io
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection
    from desim.network_views import degree_radius
    n = len(xy)
    spacing = px / np.sqrt(max(n, 1))
    r = degree_radius(degree, r_min=max(0.7, 0.17 * spacing), r_max=max(0.7, 0.17 * spacing) * 6)
    fig = plt.figure(figsize=(px / dpi, px / dpi + 0.6), dpi=dpi)
    ax = fig.add_axes([0.01, 0.01, 0.98, px / (px + 50) - 0.02])
    if len(edges):
        ax.add_collection(LineCollection(xy[edges], colors="#7d8a97", linewidths=0.3,
                                         alpha=min(0.3, 900 / len(edges)), zorder=1))
    order = np.lexsort((degree, codes != 0))
    ax.scatter(xy[order, 0], xy[order, 1], s=np.pi * (r[order] * 72 / dpi) ** 2, c=COLORS[codes[order]],
               linewidths=0, zorder=2)
    ax.set_xlim(-0.01, 1.01)
    ax.set_ylim(-0.01, 1.01)
    ax.set_aspect("equal")
    ax.set_axis_off()
    counts = np.bincount(codes, minlength=3)
    handles = [plt.Line2D([], [], marker="o", ls="", color=c, label=f"{s} {k:,}")
               for c, s, k in zip(COLORS, STATES, counts)]
    fig.legend(handles=handles, loc="upper center", ncol=3, fontsize=8, frameon=False, bbox_to_anchor=(0.5, 0.965))
    fig.suptitle(title, fontsize=8.5, y=0.998, va="top")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def render_communities(view: dict, step: int, title: str, px: int = 640, dpi: int = 100) -> bytes:
    """A PNG of the community view at one step: each community a disc of area ~ its agents, split
    into its state shares (a pie), links between communities with width ~ log(links)."""
    import io
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection, PatchCollection
    from matplotlib.patches import Wedge
    x, y, radius, shares = view["x"], view["y"], view["radius"], view["shares"][step]
    fig = plt.figure(figsize=(px / dpi, px / dpi), dpi=dpi)
    ax = fig.add_axes([0.01, 0.01, 0.98, 0.93])
    if len(view["source"]):
        s, t, w = view["source"], view["target"], view["weight"]
        seg = np.stack([np.column_stack([x[s], y[s]]), np.column_stack([x[t], y[t]])], axis=1)
        strength = w / w.max()
        rgba = np.zeros((len(w), 4))
        rgba[:, :3] = (0.54, 0.59, 0.64)
        rgba[:, 3] = 0.04 + 0.5 * strength                   # single links faint, strong ones drawn
        ax.add_collection(LineCollection(seg, colors=rgba, linewidths=0.3 + 2.5 * strength, zorder=1))
    wedges, colors = [], []
    for i in range(len(x)):
        start = 90.0
        for c, share in enumerate(shares[i]):
            if share > 0:
                wedges.append(Wedge((x[i], y[i]), radius[i], start, start + 360 * share))
                colors.append(COLORS[c])
                start += 360 * share
    ax.add_collection(PatchCollection(wedges, facecolors=colors, edgecolors="white", linewidths=0.3, zorder=2))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_axis_off()
    fig.suptitle(title, fontsize=9)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


# ---------------------------------------------------------------- the run

def progress_printer(label: str):
    state = {"last": -1.0, "message": ""}

    def show(fraction: float, message: str) -> None:
        if fraction - state["last"] >= 0.1 or (fraction >= 1.0 and message != state["message"]):
            state["last"], state["message"] = fraction, message
            print(f"    [{label}] {fraction:4.0%} {message}", file=sys.stderr, flush=True)
    return show


def one_graph(kind: str, n: int, candidates: list, community_methods: list) -> dict:
    import igraph as ig
    from desim import network_views as nv
    edges = make_graph(kind, n)
    degree = np.bincount(edges.ravel(), minlength=n)
    name = {"ba": "BA m=3", "ws": "WS k=10 p=0.1"}[kind]
    print(f"  {name}, {n:,} agents, {len(edges):,} edges", file=sys.stderr, flush=True)
    out = {"graph": name, "kind": kind, "n": n, "edges": int(len(edges)), "layouts": [], "communities": []}

    # communities first: Leiden labels score the layouts
    labels = None
    for cname, fn, cap, why in community_methods:
        if n > cap:
            out["communities"].append({"method": cname, "run": False, "why": why})
            continue
        raw, cpu, wall = timed(fn, n, edges)
        raw = np.asarray(raw)
        out["communities"].append({"method": cname, "run": True, "cpu_s": cpu, "wall_s": wall,
                                   "count": int(raw.max()) + 1, "modularity": modularity(n, edges, raw)})
        if labels is None:
            labels = raw
        print(f"    {cname}: {cpu:.2f} s CPU, {int(raw.max()) + 1} communities", file=sys.stderr, flush=True)

    chosen_xy = None
    for lname, fn, cap, why, _ in candidates:
        if n > cap:
            out["layouts"].append({"method": lname, "run": False, "why": why})
            continue
        kwargs = {"progress": progress_printer(f"{name} {n:,}")} if fn is cand_desim and n >= 20000 else {}
        try:
            xy, cpu, wall = timed(fn, n, edges, **kwargs)
        except Exception as exc:                       # a candidate that fails is reported, not fatal
            out["layouts"].append({"method": lname, "run": False, "why": f"failed: {type(exc).__name__}: {exc}"[:120]})
            continue
        xy = np.asarray(xy, dtype=float)
        row = {"method": lname, "run": True, "cpu_s": cpu, "wall_s": wall, "edge_ratio": edge_ratio(xy, edges),
               "hub_spread": hub_spread(xy, degree), "group_purity": group_purity(xy, labels),
               "in_unit_square": bool(xy.min() >= 0 and xy.max() <= 1) if fn is cand_desim else None}
        out["layouts"].append(row)
        print(f"    {lname}: {cpu:.2f} s CPU, {wall:.2f} s wall", file=sys.stderr, flush=True)
        if fn is cand_desim:
            chosen_xy = xy

    codes, seeds = infection(n, edges)
    step = int(np.argmin(np.abs((codes != 0).mean(axis=1) - 0.35)))
    view, cpu_view, _ = timed(nv.community_view, labels, edges, codes, 3, seed=1)
    (hops, rings), cpu_hops, _ = timed(lambda: (lambda h: (h, nv.adoption_positions(h, edges)))(
        nv.hop_distances(edges, np.arange(n), seeds)))
    changed, cpu_change, _ = timed(nv.change_steps, codes)
    sums = view["shares"].sum(axis=2)
    png_nodes, cpu_png_nodes, wall_png_nodes = timed(render_nodes, chosen_xy, edges, codes[step], degree, "")
    png_comm, cpu_png_comm, wall_png_comm = timed(render_communities, view, step, "")
    out["views"] = {
        "community_view_cpu_s": cpu_view, "hops_rings_cpu_s": cpu_hops, "change_steps_cpu_s": cpu_change,
        "communities": int(len(view["size"])), "community_links": int(len(view["source"])),
        "links_between": int(view["weight"].sum()), "links_inside": int(view["internal"].sum()),
        "shares_sum_to_one": bool(np.allclose(sums, 1.0)), "max_hops": int(hops.max()),
        "reached": int((hops >= 0).sum()), "changed": int((changed >= 0).sum()),
        "rings_in_unit_square": bool(rings.min() >= 0 and rings.max() <= 1),
        "png_nodes_cpu_s": cpu_png_nodes, "png_nodes_wall_s": wall_png_nodes, "png_nodes_kb": len(png_nodes) / 1024,
        "png_communities_cpu_s": cpu_png_comm, "png_communities_wall_s": wall_png_comm,
        "png_communities_kb": len(png_comm) / 1024}
    del ig
    return out


def community_candidates(smoke: bool) -> list:
    from desim.network_views import communities

    def leiden(n, edges):
        return communities(edges, np.arange(n), seed=1)

    def ig_louvain(n, edges):
        import random
        import igraph as ig
        ig.set_random_number_generator(random.Random(1))
        return ig.Graph(n=n, edges=edges).community_multilevel().membership

    def nx_louvain(n, edges):
        import networkx as nx
        labels = np.zeros(n, dtype=np.int64)
        for i, c in enumerate(nx.community.louvain_communities(_nx(n, edges), seed=1)):
            labels[list(c)] = i
        return labels
    return [("igraph Leiden (modularity; chosen)", leiden, 10**9, ""),
            ("igraph Louvain (multilevel)", ig_louvain, 10**9, ""),
            ("networkx louvain_communities", nx_louvain, 5000 if smoke else 20000,
             "35 s at 20k; over 5 min at 100k (BA)")]


def fmt(v, digits=2):
    return "-" if v is None else f"{v:,.{digits}f}"


def tables(results: list[dict]) -> str:
    lines = ["Layouts (CPU and wall in seconds; edge ratio low = neighbours near; hub spread near 1 = hubs apart; "
             "group purity high = communities as regions):", "",
             "| graph | agents | edges | layout | CPU s | wall s | edge ratio | hub spread | group purity |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in results:
        for lay in r["layouts"]:
            if lay["run"]:
                lines.append(f"| {r['graph']} | {r['n']:,} | {r['edges']:,} | {lay['method']} | {fmt(lay['cpu_s'])} | "
                             f"{fmt(lay['wall_s'])} | {fmt(lay['edge_ratio'], 3)} | {fmt(lay['hub_spread'])} | "
                             f"{fmt(lay['group_purity'])} |")
            else:
                lines.append(f"| {r['graph']} | {r['n']:,} | {r['edges']:,} | {lay['method']} | not run: {lay['why']} "
                             "| | | | |")
    lines += ["", "Communities:", "", "| graph | agents | method | CPU s | wall s | communities | modularity |",
              "|---|---:|---|---:|---:|---:|---:|"]
    for r in results:
        for c in r["communities"]:
            if c["run"]:
                lines.append(f"| {r['graph']} | {r['n']:,} | {c['method']} | {fmt(c['cpu_s'])} | {fmt(c['wall_s'])} | "
                             f"{c['count']:,} | {fmt(c['modularity'], 3)} |")
            else:
                lines.append(f"| {r['graph']} | {r['n']:,} | {c['method']} | not run: {c['why']} | | | |")
    lines += ["", "View data and rendering (CPU s; the PNGs by matplotlib, 640 px):", "",
              "| graph | agents | community view | hops + rings | change steps | PNG, every agent | PNG, communities |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        v = r["views"]
        lines.append(f"| {r['graph']} | {r['n']:,} | "
                     f"{fmt(v['community_view_cpu_s'], 3)} ({v['communities']:,} communities) | "
                     f"{fmt(v['hops_rings_cpu_s'], 3)} | {fmt(v['change_steps_cpu_s'], 3)} | "
                     f"{fmt(v['png_nodes_cpu_s'])} ({v['png_nodes_kb']:,.0f} kB) | "
                     f"{fmt(v['png_communities_cpu_s'])} ({v['png_communities_kb']:,.0f} kB) |")
    return "\n".join(lines)


def small_png(png: bytes, colors: int = 96) -> bytes:
    """The same picture with an adaptive palette (Pillow, which matplotlib depends on): a third of the size."""
    import io
    from PIL import Image
    buf = io.BytesIO()
    Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=colors).save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def pictures(folder: Path) -> list[Path]:
    """The two PNGs of docs/images: the chosen layout of BA 5,000 and WS 1,000, coloured by the
    made-up infection when about a third of the agents have been infected, nodes sized by degree."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for kind, n, name in (("ba", 5000, "layout_ba5000.png"), ("ws", 1000, "layout_ws1000.png")):
        edges = make_graph(kind, n)
        degree = np.bincount(edges.ravel(), minlength=n)
        xy, cpu, _ = timed(cand_desim, n, edges)
        codes, _ = infection(n, edges)
        step = int(np.argmin(np.abs((codes != 0).mean(axis=1) - 0.35)))
        graph = {"ba": "Barabási–Albert m=3", "ws": "Watts–Strogatz k=10 p=0.1"}[kind]
        title = (f"{graph}, {n:,} agents, desim.layout ({cpu:.1f} s CPU)\n"
                 f"step {step} of a made-up SIR; node area ~ degree")
        path = folder / name
        png = render_nodes(xy, edges, codes[step], degree, title, px=720 if n > 2000 else 640)
        path.write_bytes(small_png(png))
        written.append(path)
        print(f"wrote {path} ({path.stat().st_size / 1024:.0f} kB)")
    return written


# ---------------------------------------------------------------- the views end to end (issue 29, items 1-4)

VIEW_STEPS = 30


def write_sir_study(root: Path, kind: str, n: int) -> Path:
    """A desim.diffusion SIR study (beta 0.05, gamma 0.2, 10 seeds, 30 steps) on the benchmark's graphs."""
    import json
    interaction = {"kind": "barabasi_albert", "m": 3} if kind == "ba" else {"kind": "watts_strogatz", "k": 10, "p": 0.1}
    files = {
        "study.json": {"id": root.name, "title": f"SIR on {'BA m=3' if kind == 'ba' else 'WS k=10 p=0.1'}, {n:,} agents",
                       "display_metrics": ["share_I", "cumulative_incidence"], "display_states": ["state"],
                       "state_colors": {"state": {"S": "#4c78a8", "I": "#d62728", "R": "#9e9e9e"}}},
        "simulation/simulation.json": {
            "n_steps": VIEW_STEPS, "time_unit": "day", "seed": 1, "memory_window": 0, "agent_processes": False,
            "decision": {"ref": "desim.diffusion:SIR", "args": {"beta": 0.05, "gamma": 0.2}},
            "collector": {"ref": "desim.diffusion:Prevalence"}},
        "population/population.json": {"provider": {"ref": "desim.diffusion:Nodes", "args": {"n": n}},
                                       "interaction": interaction},
        "environment/environment.json": {"provider": {"ref": "desim.diffusion:NetworkState", "args": {"seeds": 10}}},
    }
    for rel, body in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(json.dumps(body), encoding="utf-8")
    return root


def child_cpu(cmd: list[str], cwd: Path) -> tuple[float, float, str, str]:
    """CPU (user + system, all threads) and wall seconds of a command, its stdout and stderr."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=True,
                          env={**os.environ, "DESIM_PROGRESS": "lines"})    # its progress lines are counted
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime), time.perf_counter() - w0,
            proc.stdout, proc.stderr)


def chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Dashboard:
    """``desim dashboard`` over a folder, in its own process (a fresh one: nothing cached in memory)."""

    def __init__(self, folder: Path):
        self.proc = subprocess.Popen([sys.executable, "-m", "desim.cli", "dashboard", str(folder), "--port", "0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.url = self.proc.stdout.readline().split()[3].rstrip("/")

    def close(self):
        self.proc.terminate()
        self.proc.wait()


def first_picture(browser, url: str, sid: str, views: list[str]) -> dict:
    """Seconds from the "Show network" click to the first view drawn (``data-drawn`` set), then to each
    other view after its button; the bytes of each answer."""
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.set_default_timeout(900_000)
    sizes: dict[str, int] = {}
    page.on("response", lambda r: sizes.__setitem__(r.url, len(r.body())) if "/network?" in r.url else None)
    page.goto(f"{url}/#/study/{sid}")
    page.wait_for_selector("#study-title[data-ready]")
    page.select_option("#net-state", "state")
    t0 = time.perf_counter()
    page.click("text=Show network")
    page.wait_for_selector("#net-view[data-drawn]")
    out = {"first_view": page.get_attribute("#net-view", "data-view"), "first_s": time.perf_counter() - t0}
    for view in views:
        if view == out["first_view"]:
            continue
        t0 = time.perf_counter()
        page.click(f'#net-view .dn-views button[data-view="{view}"]')
        page.wait_for_selector(f'#net-view[data-drawn^="{view}:"]')
        out[f"{view}_s"] = time.perf_counter() - t0
    out["payload_kb"] = {u.split("view=")[-1] if "view=" in u else "first": b / 1024 for u, b in sizes.items()}
    page.close()
    return out


def one_study(folder: Path, kind: str, n: int, browser) -> dict:
    """A real run of the SIR study, then: ``desim viz diffusion`` cold (no stored layout) and warm, the view
    data and each view's PNG in this process, and the dashboard's first picture cold and warm."""
    from desim.report import network_picture as pictures
    from desim.report import diffusion as drawing
    from desim.report.figures import png as to_png
    name = {"ba": "BA m=3", "ws": "WS k=10 p=0.1"}[kind]
    root = write_sir_study(folder / f"sir_{kind}_{n}", kind, n)
    cpu, wall, _, _ = child_cpu([sys.executable, "-m", "desim.cli", "run", str(root)], folder)
    out = {"graph": name, "kind": kind, "n": n, "run_cpu_s": cpu, "run_wall_s": wall}
    print(f"  {name}, {n:,} agents: run {wall:.1f} s", file=sys.stderr, flush=True)
    layouts = root / "runs" / "layouts"
    cli = [sys.executable, "-m", "desim.cli", "viz", "diffusion", str(root), "--state", "state"]
    shutil.rmtree(layouts, ignore_errors=True)
    cpu, wall, stdout, stderr = child_cpu(cli, folder)
    out.update(cli_cold_cpu_s=cpu, cli_cold_wall_s=wall, cli_progress_lines=stderr.count("\n"),
               cli_stored=("computed and stored" in stdout) or n > pictures.MAX_NODES)
    cpu, wall, stdout, _ = child_cpu(cli, folder)
    out.update(cli_warm_cpu_s=cpu, cli_warm_wall_s=wall, cli_reused=("(reused)" in stdout) or n > pictures.MAX_NODES)
    print(f"    desim viz diffusion: {out['cli_cold_cpu_s']:.1f} s CPU cold, {cpu:.1f} s warm", file=sys.stderr,
          flush=True)
    (pic, c, w) = timed(pictures.picture, root, "state", max_nodes=10**9)
    out.update(picture_warm_cpu_s=c, picture_warm_wall_s=w, views=list(pic["meta"]["views"]),
               suggested=pic["meta"]["suggested"], size_by=pic["meta"]["size_by"],
               communities=len(pic["communities"]["size"]),
               reused=bool(pic["network"]["layout"]["reused"]), layout_s=pic["network"]["layout"]["seconds"])
    out["png"] = {}
    for view in pic["meta"]["views"]:
        fig, c1, _ = timed(drawing.view_figure, pic, view)
        data, c2, _ = timed(to_png, fig)
        out["png"][view] = {"cpu_s": c1 + c2, "kb": len(data) / 1024}
    html, c, _ = timed(drawing.player_html, pic)
    out.update(html_cpu_s=c, html_kb=len(html.encode()) / 1024)
    print(f"    PNGs: " + ", ".join(f"{v} {r['cpu_s']:.1f} s" for v, r in out["png"].items()), file=sys.stderr, flush=True)
    if browser is not None:
        views = list(pic["meta"]["views"])
        del pic
        shutil.rmtree(layouts, ignore_errors=True)
        server = Dashboard(folder)
        try:
            out["dashboard_cold"] = first_picture(browser, server.url, root.name, views)
        finally:
            server.close()
        server = Dashboard(folder)
        try:
            out["dashboard_warm"] = first_picture(browser, server.url, root.name, views)
        finally:
            server.close()
        print(f"    dashboard first picture ({out['dashboard_cold']['first_view']}): "
              f"{out['dashboard_cold']['first_s']:.1f} s cold, {out['dashboard_warm']['first_s']:.1f} s warm",
              file=sys.stderr, flush=True)
    return out


def renderer_race(browser, folder: Path, sizes: list[int]) -> list[dict]:
    """What draws a network fastest in this Chromium: the 2-D canvas of ``desim.report.netview``'s method
    against sigma.js 3 (WebGL, as vendored before; read from git), every node and every link."""
    import http.server
    import json
    import threading
    from functools import partial
    try:
        sigma = subprocess.run(["git", "show", "8c69b76:desim/dashboard/static/vendor/sigma.min.js"], cwd=ROOT,
                               capture_output=True, check=True).stdout
        graphology = subprocess.run(["git", "show", "8c69b76:desim/dashboard/static/vendor/graphology.umd.min.js"],
                                    cwd=ROOT, capture_output=True, check=True).stdout
    except (subprocess.CalledProcessError, FileNotFoundError):
        return []
    site = folder / "race"
    site.mkdir(exist_ok=True)
    (site / "sigma.min.js").write_bytes(sigma)
    (site / "graphology.umd.min.js").write_bytes(graphology)
    for n in sizes:
        edges = make_graph("ba", n)
        xy = np.random.default_rng(0).random((n, 2)).round(4)
        (site / f"g{n}.json").write_text(json.dumps({"n": n, "edges": edges.ravel().tolist(), "x": xy[:, 0].tolist(),
                                                     "y": xy[:, 1].tolist()}))
    (site / "canvas.html").write_text(RACE_CANVAS)
    (site / "sigma.html").write_text(RACE_SIGMA)
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out = []
    try:
        for n in sizes:
            for who in ("canvas", "sigma"):
                page = browser.new_page()
                page.goto(f"http://127.0.0.1:{server.server_address[1]}/{who}.html")
                got = page.evaluate(f"go({n})")
                page.close()
                out.append({"renderer": who, "n": n, "edges": int(len(make_graph("ba", n))), **got})
                print(f"    {who} {n:,}: {got['total'] / 1000:.1f} s to the first picture", file=sys.stderr, flush=True)
    finally:
        server.shutdown()
    return out


RACE_CANVAS = """<html><body><canvas id="c" width="760" height="760"></canvas><script>
async function go(n) {
  const t0 = performance.now(), D = await (await fetch(`g${n}.json`)).json(), t1 = performance.now();
  const ctx = document.getElementById("c").getContext("2d"), X = new Float32Array(n), Y = new Float32Array(n);
  for (let i = 0; i < n; i++) { X[i] = 10 + D.x[i] * 740; Y[i] = 10 + D.y[i] * 740; }
  ctx.strokeStyle = "rgba(125,138,151,0.1)"; ctx.lineWidth = 0.5; ctx.beginPath();
  for (let e = 0; e < D.edges.length; e += 2) { ctx.moveTo(X[D.edges[e]], Y[D.edges[e]]); ctx.lineTo(X[D.edges[e + 1]], Y[D.edges[e + 1]]); }
  ctx.stroke();
  const cols = ["#4c78a8", "#d62728", "#9e9e9e"];
  for (let i = 0; i < n; i++) { ctx.fillStyle = cols[i % 3]; ctx.beginPath(); ctx.arc(X[i], Y[i], 1.5, 0, 6.2832); ctx.fill(); }
  ctx.getImageData(0, 0, 1, 1);                       // wait until the pixels are there
  return {fetch: t1 - t0, total: performance.now() - t0};
}</script></body></html>"""

RACE_SIGMA = """<html><body><div id="c" style="width:760px;height:760px"></div>
<script src="graphology.umd.min.js"></script><script src="sigma.min.js"></script><script>
async function go(n) {
  const t0 = performance.now(), D = await (await fetch(`g${n}.json`)).json(), t1 = performance.now();
  const g = new graphology.Graph({type: "undirected"});
  for (let i = 0; i < n; i++) g.addNode(i, {x: D.x[i], y: D.y[i], size: 1.5, color: "#4c78a8"});
  for (let e = 0; e < D.edges.length; e += 2) g.mergeEdge(D.edges[e], D.edges[e + 1]);
  new Sigma(g, document.getElementById("c"));
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return {fetch: t1 - t0, total: performance.now() - t0};
}</script></body></html>"""


def views_table(rows: list[dict], race: list[dict]) -> str:
    lines = ["End to end on real desim runs (an SIR of desim.diffusion, 30 days; CPU = user + system of all threads):",
             "", "| graph | agents | `desim viz diffusion` CPU s, cold / warm | wall s, cold / warm | view data (warm) CPU s |"
             " PNG CPU s (kB): network · communities · adoption · tree | player HTML kB |",
             "|---|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        pngs = " · ".join(f"{r['png'][v]['cpu_s']:.2f} ({r['png'][v]['kb']:,.0f})" if v in r["png"] else "-"
                          for v in ("network", "communities", "adoption", "tree"))
        lines.append(f"| {r['graph']} | {r['n']:,} | {r['cli_cold_cpu_s']:.2f} / {r['cli_warm_cpu_s']:.2f} | "
                     f"{r['cli_cold_wall_s']:.1f} / {r['cli_warm_wall_s']:.1f} | {r['picture_warm_cpu_s']:.2f} | {pngs} | "
                     f"{r['html_kb']:,.0f} |")
    if any("dashboard_cold" in r for r in rows):
        lines += ["", "Dashboard (headless Chromium, no GPU; seconds from the click to the picture on screen; cold: "
                      "no stored layout, fresh server):", "",
                  "| graph | agents | first view | first picture, cold | warm | network | communities | adoption | tree |"
                  " first answer kB |", "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            c, w = r.get("dashboard_cold"), r.get("dashboard_warm")
            if not c:
                continue
            cells = " | ".join("-" if v == c["first_view"] else f"{c.get(v + '_s', float('nan')):.1f}"
                               for v in ("network", "communities", "adoption", "tree"))
            lines.append(f"| {r['graph']} | {r['n']:,} | {c['first_view']} | {c['first_s']:.1f} | {w['first_s']:.1f} | "
                         f"{cells} | {c['payload_kb'].get('first', 0):,.0f} |")
    if race:
        lines += ["", "Renderers, every node and link of a BA m=3 graph (seconds to the first picture):", "",
                  "| agents | links | 2-D canvas | sigma.js 3 (WebGL, software) |", "|---:|---:|---:|---:|"]
        for n in sorted({r["n"] for r in race}):
            got = {r["renderer"]: r for r in race if r["n"] == n}
            lines.append(f"| {n:,} | {got['canvas']['edges']:,} | {got['canvas']['total'] / 1000:.2f} | "
                         f"{got['sigma']['total'] / 1000:.2f} |")
    return "\n".join(lines)


def run_views(sizes: list[int], browser_ok: bool, race_sizes: list[int],
              kinds: tuple[str, ...] = ("ba", "ws")) -> tuple[list[dict], list[dict]]:
    """desim's views end to end, and the dashboard timed in Chromium, for each size and graph ``kinds`` (the
    smoke run: one kind, every part still exercised; a small world's constant node size is checked in
    tests/test_diffusion.py)."""
    import tempfile
    rows, race = [], []
    with tempfile.TemporaryDirectory(prefix="bench_views_") as tmp:
        folder = Path(tmp)
        browser = pw = None
        if browser_ok and chromium():
            from playwright.sync_api import sync_playwright
            pw = sync_playwright().start()
            # the profile under the system's temporary folder: Chromium refuses a socket path past 107
            # bytes, which a deep TMPDIR (a test's) gives it
            browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"],
                                         env={**os.environ, "TMPDIR": "/tmp"})
        try:
            for n in sizes:
                for kind in kinds:
                    rows.append(one_study(folder, kind, n, browser))
            if browser is not None and race_sizes:
                race = renderer_race(browser, folder, race_sizes)
        finally:
            if browser is not None:
                browser.close()
                pw.stop()
    return rows, race


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=lambda s: [int(v) for v in s.split(",")], default=None)
    p.add_argument("--smoke", action="store_true", help=f"tiny sizes ({SMOKE_SIZES})")
    p.add_argument("--pictures", type=Path, metavar="DIR", help="write layout_ba5000.png and layout_ws1000.png there")
    p.add_argument("--part", choices=["all", "layouts", "views"], default="all",
                   help="layouts: the candidates side by side; views: desim's views end to end on real runs "
                        "(desim viz diffusion, the PNGs, the dashboard's first picture); all: both")
    p.add_argument("--no-browser", action="store_true", help="leave out the dashboard's timings in Chromium")
    jsonout.add_option(p)
    args = p.parse_args()
    if args.pictures:
        pictures(args.pictures)
        return
    sizes = args.sizes or (SMOKE_SIZES if args.smoke else SIZES)
    if args.part == "views":
        t0 = time.perf_counter()
        rows, race = run_views(sizes, not args.no_browser, [] if args.smoke else [5000, 20000, 100000],
                               ("ba",) if args.smoke else ("ba", "ws"))
        print(f"bench_network_views --part views: sizes {sizes}, {time.perf_counter() - t0:.0f} s in all")
        print()
        print(views_table(rows, race))
        jsonout.write(args.json, {"sizes": sizes, "views": rows, "renderers": race})
        return
    candidates = [c for c in CANDIDATES if c[4]()]
    missing = [c[0] for c in CANDIDATES if not c[4]()]
    communities = community_candidates(args.smoke)
    cand_desim(50, make_graph("ba", 50))             # load the libraries: their import is not the layout's cost
    t0 = time.perf_counter()
    results = []
    for n in sizes:
        for kind in ("ba", "ws"):
            results.append(one_graph(kind, n, candidates, communities))
    print(f"bench_network_views: sizes {sizes}, {time.perf_counter() - t0:.0f} s in all"
          + (f"; not installed: {', '.join(missing)}" if missing else ""))
    print()
    print(tables(results))
    rows, race = ([], [])
    if args.part == "all":
        rows, race = run_views(sizes, not args.no_browser, [] if args.smoke else [5000, 20000, 100000],
                               ("ba",) if args.smoke else ("ba", "ws"))
        print()
        print(views_table(rows, race))
    jsonout.write(args.json, {"sizes": sizes, "results": results, "not_installed": missing, "views": rows,
                              "renderers": race})


if __name__ == "__main__":
    main()
