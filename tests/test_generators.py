"""A generated network drawn as arrays is networkx's graph: the same edges in the same order, so the
same neighbour order in ``ctx.graph``, in the feeds and in every panel that depends on them."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from desim import Persona
from desim.messaging.columnar import ColumnarFeed
from desim.study.files import Interaction
from desim.study.generators import barabasi_albert_edges, watts_strogatz_edges
from desim.study.network import Network, build_network


@pytest.mark.parametrize("n", [21, 40, 101, 1000])
@pytest.mark.parametrize("k", [2, 3, 4, 10])
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 1.0])
def test_watts_strogatz_edges_are_networkx_edges_in_order(n, k, p):
    for seed in (1, 2, 12345):
        got = watts_strogatz_edges(n, k, p, seed)
        want = list(nx.watts_strogatz_graph(n, k, p, seed=seed).edges())
        assert got is not None
        assert list(zip(got[0].tolist(), got[1].tolist())) == want


def test_small_rings_are_left_to_networkx():
    # a lattice that wraps onto itself (n <= 2k) has coinciding neighbours: networkx draws those
    assert watts_strogatz_edges(10, 6, 0.3, 1) is None
    people = [Persona(agent_id=f"a{i}") for i in range(10)]
    net = build_network(Interaction(kind="watts_strogatz", k=6, p=0.3), people, seed=1)
    relabel = {i: f"a{i}" for i in range(10)}
    assert list(net.graph.edges()) == [(relabel[u], relabel[v]) for u, v in
                                       nx.watts_strogatz_graph(10, 6, 0.3, seed=1).edges()]


def test_a_runs_watts_strogatz_graph_is_built_only_when_asked_and_matches_networkx():
    people = [Persona(agent_id=f"p{i:03d}") for i in range(300)]
    net = build_network(Interaction(kind="watts_strogatz", k=6, p=0.2), people, seed=9)
    assert net.built_graph is None                      # arrays only, until study code asks
    want = nx.relabel_nodes(nx.watts_strogatz_graph(300, 6, 0.2, seed=9), {i: f"p{i:03d}" for i in range(300)})
    g = net.graph
    assert list(g.nodes()) == list(want.nodes())
    for a in want:                                      # every node's neighbours, in networkx's order
        assert list(g.adj[a]) == list(want.adj[a])


@pytest.mark.parametrize("directed", [False, True])
def test_columnar_feed_from_the_edge_arrays_equals_the_one_from_the_graph(directed):
    g = nx.gnp_random_graph(200, 0.04, seed=4, directed=directed)
    rng = np.random.default_rng(0)
    edges = [tuple(e) for e in rng.permutation(np.array(list(g.edges())))] + [(7, 7)]   # any order, a self-loop
    ids = [f"a{i}" for i in range(200)]
    net = Network(ids, directed, np.array([u for u, _ in edges]), np.array([v for _, v in edges]), {})
    by_graph, by_arrays = ColumnarFeed.from_graph(net.graph, ids), ColumnarFeed.from_network(net)
    assert np.array_equal(by_graph.indptr, by_arrays.indptr)
    assert np.array_equal(by_graph.indices, by_arrays.indices)
    assert by_arrays.indices.size > 0 and 7 not in by_arrays.indices[by_arrays.indptr[7]:by_arrays.indptr[8]]


@pytest.mark.parametrize("n", [4, 30, 500, 3000])
@pytest.mark.parametrize("m", [1, 2, 3, 5])
def test_barabasi_albert_edges_are_networkx_edges_in_order(n, m):
    for seed in (1, 7, 2024):
        got = barabasi_albert_edges(n, m, seed)
        if m >= n:                       # networkx refuses these, and gives the error
            assert got is None
            continue
        want = list(nx.barabasi_albert_graph(n, m, seed=seed).edges())
        assert list(zip(got[0].tolist(), got[1].tolist())) == want


def test_a_runs_barabasi_albert_graph_matches_networkx_neighbour_for_neighbour():
    people = [Persona(agent_id=f"v{i}") for i in range(400)]
    net = build_network(Interaction(kind="barabasi_albert", m=2), people, seed=5)
    assert net.built_graph is None
    want = nx.relabel_nodes(nx.barabasi_albert_graph(400, 2, seed=5), {i: f"v{i}" for i in range(400)})
    g = net.graph
    assert list(g.nodes()) == list(want.nodes())
    for a in want:
        assert list(g.adj[a]) == list(want.adj[a])
