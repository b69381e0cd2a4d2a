"""Network layouts, communities and view data at 1k to 100k agents: every candidate side by side.

    python benchmarks/bench_network_views.py                      # 1,000, 5,000, 20,000 and 100,000 agents
    python benchmarks/bench_network_views.py --sizes 5000         # one size
    python benchmarks/bench_network_views.py --smoke              # tiny sizes (a test runs it)
    python benchmarks/bench_network_views.py --json PATH          # and the figures as one JSON object
    python benchmarks/bench_network_views.py --pictures docs/images   # the layout PNGs of docs/images

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
"""
from __future__ import annotations

import argparse
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
SMOKE_SIZES = [150, 400]
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=lambda s: [int(v) for v in s.split(",")], default=None)
    p.add_argument("--smoke", action="store_true", help=f"tiny sizes ({SMOKE_SIZES})")
    p.add_argument("--pictures", type=Path, metavar="DIR", help="write layout_ba5000.png and layout_ws1000.png there")
    jsonout.add_option(p)
    args = p.parse_args()
    if args.pictures:
        pictures(args.pictures)
        return
    sizes = args.sizes or (SMOKE_SIZES if args.smoke else SIZES)
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
    jsonout.write(args.json, {"sizes": sizes, "results": results, "not_installed": missing})


if __name__ == "__main__":
    main()
