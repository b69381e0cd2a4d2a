"""desim.layout and desim.network_views: the layout is repeatable, bounded and packs pieces apart; the
view data agree with brute force and with networkx; the benchmark's smoke configuration means something."""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from desim import layout as lay
from desim import network_views as nv
from desim.report import network_picture
from waits import HANG_S

ROOT = Path(__file__).resolve().parent.parent


def ba_ids(n=300, m=3, seed=5):
    g = nx.barabasi_albert_graph(n, m, seed=seed)
    ids = [f"a{i:04d}" for i in range(n)]
    pairs = [(ids[u], ids[v]) for u, v in g.edges()]
    return g, ids, pairs


def pieces_graph():
    """A 200-agent scale-free piece, a 60-cycle, a 5-path, a K4, a pair and three isolated agents."""
    parts = [nx.barabasi_albert_graph(200, 2, seed=1), nx.cycle_graph(60), nx.path_graph(5), nx.complete_graph(4),
             nx.path_graph(2), nx.empty_graph(3)]
    g = nx.disjoint_union_all(parts)
    sizes = [p.number_of_nodes() for p in parts]
    return g, sizes


# ---------------------------------------------------------------- layout

def test_layout_is_repeatable_bit_for_bit_and_independent_of_global_random_state():
    _, ids, pairs = ba_ids()
    first = lay.layout(pairs, ids, seed=11)
    random.seed(123)
    np.random.seed(7)
    import igraph as ig
    ig.set_random_number_generator(random.Random(99))     # someone else's igraph state
    second = lay.layout(pairs, ids, seed=11)
    assert first.dtype == np.float64 and np.array_equal(first, second)
    assert not np.array_equal(first, lay.layout(pairs, ids, seed=12))


def test_layout_is_the_same_in_a_fresh_process():
    _, ids, pairs = ba_ids(n=200)
    here = lay.layout(pairs, ids, seed=3)
    code = ("import json, sys, networkx as nx; from desim.layout import layout; "
            "g = nx.barabasi_albert_graph(200, 3, seed=5); ids = [f'a{i:04d}' for i in range(200)]; "
            "xy = layout([(ids[u], ids[v]) for u, v in g.edges()], ids, seed=3); "
            "print(json.dumps(xy.tolist()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=HANG_S)
    assert np.array_equal(np.array(json.loads(out.stdout)), here)


def test_layout_accepts_a_networkx_graph_or_pairs_alike():
    g, ids, pairs = ba_ids(n=150)
    named = nx.relabel_nodes(g, dict(enumerate(ids)))
    named.add_edge(ids[0], ids[0])                     # a self-loop: left out
    assert np.array_equal(lay.layout(named, ids, seed=2), lay.layout(pairs, ids, seed=2))
    # pairs naming an agent outside ids (a sample's edges) are left out, duplicates and reversed pairs merge
    extra = pairs + [(ids[1], "outsider"), pairs[1][::-1], pairs[0]]
    assert np.array_equal(lay.layout(extra, ids, seed=2), lay.layout(pairs, ids, seed=2))


def test_layout_bounds_shape_and_aspect():
    _, ids, pairs = ba_ids()
    xy = lay.layout(pairs, ids, seed=1)
    assert xy.shape == (len(ids), 2)
    assert xy.min() >= 0 and xy.max() <= 1
    span = xy.max(axis=0) - xy.min(axis=0)
    assert span.max() == pytest.approx(1.0)          # the longer side spans [0, 1], the other is not stretched
    assert lay.layout([], [], seed=1).shape == (0, 2)
    one = lay.layout([], ["only"], seed=1)
    assert one.shape == (1, 2) and 0 <= one.min() <= one.max() <= 1
    with pytest.raises(ValueError):
        lay.layout([], ["a", "a"], seed=1)


def test_components_are_packed_apart_and_isolated_agents_below():
    g, sizes = pieces_graph()
    ids = list(g.nodes())
    xy = lay.layout(g, ids, seed=4)
    bounds = np.cumsum([0] + sizes)
    boxes = [(xy[a:b].min(axis=0), xy[a:b].max(axis=0)) for a, b in zip(bounds[:-1], bounds[1:])]
    connected = boxes[:-1]
    for i in range(len(connected)):
        for j in range(i + 1, len(connected)):
            (lo1, hi1), (lo2, hi2) = connected[i], connected[j]
            apart = (hi1 < lo2).any() or (hi2 < lo1).any()
            assert apart, f"pieces {i} and {j} overlap: {connected[i]} {connected[j]}"
    isolated = xy[bounds[-2]:]
    assert len({tuple(p) for p in isolated}) == 3            # on a grid, one place each
    assert isolated[:, 1].max() < min(lo[1] for lo, _ in connected)   # below every piece
    big = boxes[0]
    assert (big[1] - big[0]).max() > 3 * (boxes[2][1] - boxes[2][0]).max()   # area ~ size: the big piece is big


def test_two_level_layout_is_repeatable_and_bounded(monkeypatch):
    monkeypatch.setattr(lay, "MULTILEVEL_FROM", 300)       # the path used from 30,000 agents, on a small graph
    monkeypatch.setattr(lay, "COARSE_MAX", 40)
    g = nx.watts_strogatz_graph(800, 6, 0.05, seed=2)
    ids = list(range(800))
    seen = []
    xy = lay.layout(g, ids, seed=5, progress=lambda f, m: seen.append((f, m)))
    assert np.array_equal(xy, lay.layout(g, ids, seed=5))
    assert xy.min() >= 0 and xy.max() <= 1 and np.isfinite(xy).all()
    assert any("Leiden" in m for _, m in seen) and any("polishing" in m for _, m in seen)
    assert len(np.unique(xy.round(6), axis=0)) > 0.95 * len(ids)     # not piled onto the group centres


def test_progress_runs_from_zero_to_one():
    g, _ = pieces_graph()
    seen = []
    lay.layout(g, list(g.nodes()), seed=1, progress=lambda f, m: seen.append(f))
    assert seen[0] == 0.0 and seen[-1] == 1.0
    assert all(0 <= f <= 1 for f in seen) and seen == sorted(seen)


def test_network_key_names_the_network_and_seed():
    _, ids, pairs = ba_ids(n=100)
    key = lay.network_key(pairs, ids, 1)
    assert key == lay.network_key(list(reversed([(b, a) for a, b in pairs])), ids, 1)   # undirected, any order
    assert key != lay.network_key(pairs[1:], ids, 1) and key != lay.network_key(pairs, ids, 2)


# ---------------------------------------------------------------- communities

def test_communities_are_repeatable_and_numbered_by_size():
    g, ids, pairs = ba_ids(n=400)
    g.add_node(400)
    ids = ids + ["lonely"]
    labels = nv.communities(pairs, ids, seed=3)
    assert np.array_equal(labels, nv.communities(pairs, ids, seed=3))
    sizes = np.bincount(labels)
    assert labels.min() == 0 and (sizes > 0).all() and list(sizes) == sorted(sizes, reverse=True)
    assert sizes[labels[-1]] == 1                               # the isolated agent is a community of its own
    assert 3 <= len(sizes) <= 60


def test_community_view_shares_counts_and_links_against_brute_force():
    g, ids, pairs = ba_ids(n=500)
    edges = lay.index_edges(pairs, ids)
    labels = nv.communities(pairs, ids, seed=1)
    rng = np.random.default_rng(4)
    codes = rng.integers(0, 3, (6, len(ids)))
    view = nv.community_view(labels, edges, codes, 3, seed=1)
    k = labels.max() + 1
    assert np.allclose(view["shares"].sum(axis=2), 1.0)          # per community per step
    assert (view["counts"].sum(axis=2) == view["size"][None, :]).all()
    for t in (0, 5):
        for c in range(k):
            brute = Counter(codes[t][labels == c].tolist())
            assert [brute.get(s, 0) for s in range(3)] == view["counts"][t, c].tolist()
    between = Counter()
    inside = Counter()
    for u, v in edges.tolist():
        a, b = labels[u], labels[v]
        if a == b:
            inside[a] += 1
        else:
            between[(min(a, b), max(a, b))] += 1
    got = {(s, t): w for s, t, w in zip(view["source"].tolist(), view["target"].tolist(), view["weight"].tolist())}
    assert got == dict(between)
    assert view["internal"].tolist() == [inside.get(c, 0) for c in range(k)]
    assert view["weight"].sum() + view["internal"].sum() == len(edges)
    x, y, r = view["x"], view["y"], view["radius"]
    assert (x - r >= -1e-9).all() and (x + r <= 1 + 1e-9).all() and (y - r >= -1e-9).all() and (y + r <= 1 + 1e-9).all()
    d = np.hypot(x[:, None] - x[None], y[:, None] - y[None]) - r[:, None] - r[None]
    np.fill_diagonal(d, 1)
    assert d.min() > -0.01 * r.max()                              # discs pushed apart
    assert np.allclose(r ** 2 / view["size"], (r ** 2 / view["size"])[0])   # area ~ size


def test_community_view_missing_values():
    labels = np.array([0, 0, 1, 1])
    codes = np.array([[0, -1, -1, -1], [1, 2, 0, 0]])
    view = nv.community_view(labels, np.array([[0, 1], [1, 2], [2, 3]]), codes, 3)
    assert view["shares"][0].tolist() == [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]   # no value: all 0
    assert view["shares"][1].tolist() == [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]]
    assert view["source"].tolist() == [0] and view["weight"].tolist() == [1]


# ---------------------------------------------------------------- adoption

def test_hop_distances_equal_networkx():
    g = nx.disjoint_union(nx.barabasi_albert_graph(300, 2, seed=3), nx.cycle_graph(7))
    ids = [f"n{i}" for i in g.nodes()]
    pairs = [(f"n{u}", f"n{v}") for u, v in g.edges()]
    seeds = ["n0", "n17", "n250"]
    hops = nv.hop_distances(pairs, ids, seeds)
    ref = nx.multi_source_dijkstra_path_length(g, [0, 17, 250])
    for i in g.nodes():
        single = min((nx.shortest_path_length(g, s, i) for s in (0, 17, 250) if nx.has_path(g, s, i)), default=-1)
        assert hops[i] == ref.get(i, -1) == single
    assert (hops[300:] == -1).all() and hops[0] == 0
    assert (nv.hop_distances(pairs, ids, []) == -1).all()


def test_change_steps():
    codes = np.array([[0, 0, 1, 2],
                      [0, 1, 1, 2],
                      [1, 2, 1, 0]])
    assert nv.change_steps(codes).tolist() == [2, 1, -1, 2]
    assert nv.change_steps(codes, target=1).tolist() == [2, 1, 0, -1]


@pytest.mark.parametrize("shape", ["rings", "columns"])
def test_adoption_positions_follow_the_levels(shape):
    g = nx.barabasi_albert_graph(400, 2, seed=1)
    edges = lay.index_edges(g, list(g.nodes()))
    levels = nv.hop_distances(g, list(g.nodes()), [0])
    levels[-5:] = -1                                           # as if never reached
    xy = nv.adoption_positions(levels, edges, shape=shape)
    assert xy.shape == (400, 2) and xy.min() >= 0 and xy.max() <= 1
    order = sorted(set(levels[levels >= 0].tolist())) + [-1]
    where = np.hypot(xy[:, 0] - 0.5, xy[:, 1] - 0.5) if shape == "rings" else xy[:, 0]
    means = [where[levels == lv].mean() for lv in order]
    assert means == sorted(means)                              # outward / rightward with the level, never last
    for a, b in zip(order[:-1], order[1:]):
        assert where[levels == a].max() < where[levels == b].min() + 1e-9 or shape == "rings"


def test_degree_radius_is_monotone_and_bounded():
    degrees = np.array([0, 1, 2, 3, 3, 5, 8, 20, 80, 400, 5000])
    r = nv.degree_radius(degrees, r_min=1.5, r_max=9.0)
    assert (np.diff(r) >= 0).all() and r.min() == 1.5 and r.max() == 9.0
    assert r[3] == r[4]                                       # the same degree, the same size
    shuffled = np.random.default_rng(0).permutation(len(degrees))
    assert np.array_equal(nv.degree_radius(degrees[shuffled], r_min=1.5, r_max=9.0), r[shuffled])
    med = nv.degree_radius(np.array([4, 4, 4, 100]))
    assert med[0] == 1.0 and med[3] == pytest.approx(5.0)     # area ~ degree: 25x the median -> 5x the radius


def test_suggested_view():
    assert nv.suggested_view(5000) == "network" and nv.suggested_view(100_000) == "communities"


# ---------------------------------------------------------------- stored layouts, sizes, the tree

def test_stored_layouts_round_trip_and_bad_files_read_as_missing(tmp_path):
    from desim.store import layouts
    _, ids, pairs = ba_ids(n=120)
    xy = lay.layout(pairs, ids, seed=1)
    key = lay.network_key(pairs, ids, 1)
    assert layouts.read_positions(tmp_path, key, ids) is None
    path = layouts.write_positions(tmp_path, key, ids, xy, {"method": lay.METHOD, "seconds": 0.1})
    assert path == tmp_path / "runs" / "layouts" / f"{key}.parquet"
    back, meta = layouts.read_positions(tmp_path, key, ids)
    assert np.array_equal(back, xy) and meta["method"] == lay.METHOD
    assert layouts.read_positions(tmp_path, key, ids[::-1]) is None          # rows of other agents: not this layout
    labels = nv.communities(pairs, ids, seed=1)
    layouts.write_communities(tmp_path, key, ids, labels, {"method": "leiden"})
    assert np.array_equal(layouts.read_communities(tmp_path, key, ids)[0], labels)
    path.write_bytes(b"not parquet")
    assert layouts.read_positions(tmp_path, key, ids) is None                 # damaged: computed again
    assert not list(path.parent.glob("*.tmp"))
    assert lay.indexed_key(lay.index_edges(pairs, ids), ids, 1) == key


def test_size_rule_by_degree_only_when_degrees_vary():
    rule, r = network_picture.size_rule(np.array([4, 4, 5, 6, 4, 3]))
    assert rule == "constant" and set(r.tolist()) == {1.0}
    degrees = np.array([3, 3, 4, 3, 60, 3, 5])
    rule, r = network_picture.size_rule(degrees)
    assert rule == "degree" and r.argmax() == 4 and r[0] == r[1] == r[3] == r[5]


def test_tree_data_lays_chains_out_in_time():
    #  0 -> 1 -> 3, 0 -> 2; 5 a second seed with 6; 4 never infected
    parent = np.array([-1, 0, 0, 1, -1, -1, 5])
    when = np.array([0, 1, 2, 3, -1, 0, 4])
    t = network_picture.tree_data(parent, when, np.array([0, 5]))
    assert t["nodes"].tolist() == [0, 1, 2, 3, 5, 6]
    assert t["x"].tolist() == [0, 1, 2, 3, 0, 4]
    assert t["offspring"].tolist() == [2, 1, 0, 0, 1, 0]
    y = dict(zip(t["nodes"].tolist(), t["y"].tolist()))
    assert y[0] > y[5]                                         # the larger chain first (on top)
    assert min(y[1], y[2], y[3]) > max(y[5], y[6]) and 0 <= min(y.values()) and max(y.values()) <= 1
    assert min(y[1], y[2]) <= y[0] <= max(y[1], y[2])          # a parent between its children


# ---------------------------------------------------------------- the benchmark

@pytest.mark.slow
def test_bench_network_views_smoke(tmp_path):
    figures = tmp_path / "figures.json"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_network_views.py"), "--smoke",
                           "--json", str(figures)], capture_output=True, text=True, timeout=HANG_S, cwd=tmp_path,
                          env={**os.environ, "TMPDIR": str(tmp)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| graph |" in proc.stdout and not list(tmp.iterdir())
    data = json.loads(figures.read_text())
    assert len(data["results"]) == 2 * len(data["sizes"])
    for r in data["results"]:
        n, m = r["n"], r["edges"]
        assert n in data["sizes"] and m > n
        ran = [row for row in r["layouts"] if row["run"]]
        chosen = ran[0]
        assert chosen["method"].startswith("desim.layout") and chosen["in_unit_square"]
        for row in ran:
            assert row["cpu_s"] > 0 and row["wall_s"] > 0
            assert 0 < row["edge_ratio"] < 1.2 and 0 < row["hub_spread"] < 2 and 0 < row["group_purity"] <= 1
        assert chosen["edge_ratio"] < 0.9                     # neighbours drawn nearer than random pairs
        for c in r["communities"]:
            assert c["run"] and c["cpu_s"] >= 0 and 1 <= c["count"] <= n and 0 < c["modularity"] < 1
        assert r["communities"][0]["modularity"] >= r["communities"][1]["modularity"] - 0.05   # Leiden ~ Louvain
        v = r["views"]
        assert v["communities"] == r["communities"][0]["count"]          # the view is built on Leiden's labels
        assert v["links_between"] + v["links_inside"] == m
        assert v["shares_sum_to_one"] and v["rings_in_unit_square"]
        assert v["reached"] == n and v["max_hops"] >= 1 and 0 < v["changed"] <= n
        for key in ("community_view_cpu_s", "hops_rings_cpu_s", "change_steps_cpu_s", "png_nodes_cpu_s",
                    "png_communities_cpu_s"):
            assert v[key] >= 0
        assert v["png_nodes_kb"] > 1 and v["png_communities_kb"] > 1
    # desim's views end to end on real runs: the command computes the layout, then reuses it
    assert [r["kind"] for r in data["views"]] == ["ba"] * len(data["sizes"]) and data["renderers"] == []
    if shutil.which("chromium") or shutil.which("chromium-browser"):     # the smoke times one kind in Chromium
        assert all("dashboard_cold" in r for r in data["views"])
    for r in data["views"]:
        assert r["cli_cold_cpu_s"] > 0 and r["cli_warm_cpu_s"] > 0 and r["cli_progress_lines"] >= 3
        assert r["cli_stored"] and r["cli_reused"] and r["reused"]
        assert set(r["views"]) == {"network", "communities", "adoption", "tree"} and r["suggested"] == "network"
        assert r["size_by"] == ("degree" if r["kind"] == "ba" else "constant")
        assert all(p["cpu_s"] > 0 and p["kb"] > 1 for p in r["png"].values()) and r["html_kb"] > 1
        if "dashboard_cold" in r:
            for run in (r["dashboard_cold"], r["dashboard_warm"]):
                assert run["first_view"] == "network" and run["first_s"] > 0
                assert all(run[f"{v}_s"] > 0 for v in ("communities", "adoption", "tree"))
