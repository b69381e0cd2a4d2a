"""Networks built from ``population.json`` ``interaction``: every generator's
shape, seeded reproducibility, and the ``edges`` table a run stores."""
from __future__ import annotations

import json
from collections import Counter

import duckdb
import networkx as nx
import pydantic
import pytest

from desim import Persona, load_study, neighbors_fn
from desim.experiments.recording import record, sink_for
from desim.run.assemble import assemble
from desim.study.network import build_graph
from desim.study.files import Interaction


def people(n: int, **attrs) -> list[Persona]:
    return [Persona(agent_id=f"p{i:03d}", attributes={k: v(i) for k, v in attrs.items()}) for i in range(n)]


def degrees(g) -> Counter:
    return Counter(d for _, d in g.degree())


def test_nodes_are_agent_ids_in_population_order():
    g = build_graph(Interaction(kind="ring", k=2), people(6), seed=1)
    assert list(g.nodes) == [f"p{i:03d}" for i in range(6)]
    assert set(g.edges) == {(f"p{i:03d}", f"p{(i + 1) % 6:03d}") for i in range(5)} | {("p000", "p005")}


@pytest.mark.parametrize("k", [2, 4, 6])
def test_ring_has_degree_k(k):
    g = build_graph(Interaction(kind="ring", k=k), people(20), seed=1)
    assert degrees(g) == Counter({k: 20})
    assert g.has_edge("p000", f"p{k // 2:03d}") and not g.has_edge("p000", f"p{k // 2 + 1:03d}")


@pytest.mark.parametrize("n", [3, 4, 5, 7, 10, 33])
@pytest.mark.parametrize("k", [2, 4, 6, 10])     # an odd k is refused (below)
def test_ring_is_networkx_circulant_with_the_same_neighbour_order(n, k):
    # the feed reads neighbours in this order and a mean is a float sum: the order is part of the result
    ring = build_graph(Interaction(kind="ring", k=k), people(n), seed=1)
    ids = [f"p{i:03d}" for i in range(n)]
    ref = nx.relabel_nodes(nx.circulant_graph(n, range(1, k // 2 + 1)), dict(enumerate(ids)), copy=True)
    assert [(u, list(nbrs)) for u, nbrs in ring.adjacency()] == [(u, list(nbrs)) for u, nbrs in ref.adjacency()]
    assert list(ring.edges()) == list(ref.edges())


@pytest.mark.parametrize("neighborhood,torus,expected", [
    ("moore", True, {8: 20}),
    ("von_neumann", True, {4: 20}),
    # 5 x 4 without wrapping: 4 corners, 10 border cells, 6 inside
    ("moore", False, {3: 4, 5: 10, 8: 6}),
    ("von_neumann", False, {2: 4, 3: 10, 4: 6}),
])
def test_lattice_degrees(neighborhood, torus, expected):
    g = build_graph(Interaction(kind="lattice", width=5, height=4, neighborhood=neighborhood, torus=torus),
                    people(20), seed=1)
    assert degrees(g) == Counter(expected)
    # cell (x=1, y=1) is p006: its east neighbour is p007, south p011, south-east p012 (Moore only)
    assert g.has_edge("p006", "p007") and g.has_edge("p006", "p011")
    assert g.has_edge("p006", "p012") == (neighborhood == "moore")
    # wrapping joins the left and right columns
    assert g.has_edge("p000", "p004") == torus


def test_lattice_size_must_match_population():
    with pytest.raises(ValueError, match="5x4 has 20 cells but the population has 21"):
        build_graph(Interaction(kind="lattice", width=5, height=4), people(21), seed=1)


def test_watts_strogatz_keeps_its_edges_and_rewires_with_p():
    ring = build_graph(Interaction(kind="watts_strogatz", k=4, p=0.0), people(40), seed=3)
    assert degrees(ring) == Counter({4: 40})
    g = build_graph(Interaction(kind="watts_strogatz", k=4, p=0.3), people(40), seed=3)
    assert g.number_of_edges() == 80
    assert set(g.edges) != set(ring.edges)
    assert min(d for _, d in g.degree()) >= 2     # rewiring moves one end of an edge only


def test_barabasi_albert():
    g = build_graph(Interaction(kind="barabasi_albert", m=2), people(60), seed=4)
    assert g.number_of_edges() == (60 - 2) * 2
    # every node after the seed star (the first m + 1) arrived with m edges
    assert min(d for a, d in g.degree() if a >= "p003") >= 2
    assert max(d for _, d in g.degree()) >= 8     # preferential attachment grows hubs


def test_erdos_renyi_extremes_and_density():
    assert build_graph(Interaction(kind="erdos_renyi", p=0.0), people(30), seed=1).number_of_edges() == 0
    assert build_graph(Interaction(kind="erdos_renyi", p=1.0), people(30), seed=1).number_of_edges() == 435
    g = build_graph(Interaction(kind="erdos_renyi", p=0.1), people(200), seed=1)
    assert 0.07 * 19900 < g.number_of_edges() < 0.13 * 19900


def test_groups_are_cliques_by_attribute():
    pop = people(20, dorm=lambda i: f"D{i % 3}")
    g = build_graph(Interaction(kind="groups", attribute="dorm"), pop, seed=1)
    dorm = {p.agent_id: p.attributes["dorm"] for p in pop}
    assert all(dorm[a] == dorm[b] for a, b in g.edges)
    sizes = Counter(dorm.values())
    for a in g.nodes:
        assert g.degree(a) == sizes[dorm[a]] - 1
    with pytest.raises(ValueError, match="persona 'p000' has no attribute 'floor'"):
        build_graph(Interaction(kind="groups", attribute="floor"), pop, seed=1)


def test_explicit_edges_and_unknown_ids():
    pop = people(4)
    g = build_graph(Interaction(kind="edges", edges=[("p000", "p001"), ("p002", "p001")]), pop, seed=1)
    assert set(map(frozenset, g.edges)) == {frozenset({"p000", "p001"}), frozenset({"p001", "p002"})}
    assert "p003" in g and g.degree("p003") == 0
    with pytest.raises(ValueError, match=r"interaction.edges\[1\]: unknown agent_id 'ghost'"):
        build_graph(Interaction(kind="edges", edges=[("p000", "p001"), ("ghost", "p001")]), pop, seed=1)
    directed = build_graph(Interaction(kind="edges", directed=True, edges=[("p000", "p001")]), pop, seed=1)
    hears = neighbors_fn(directed)
    assert hears("p001") == ["p000"] and hears("p000") == []   # p001 hears p000, not the reverse


def test_complete_and_none():
    assert build_graph(Interaction(kind="complete"), people(6), seed=1).number_of_edges() == 15
    assert build_graph(Interaction(kind="none"), people(6), seed=1).number_of_edges() == 0


def test_generators_need_their_parameters():
    with pytest.raises(pydantic.ValidationError, match="needs k, p"):
        Interaction(kind="watts_strogatz")
    with pytest.raises(pydantic.ValidationError, match="needs attribute"):
        Interaction(kind="groups")


@pytest.mark.parametrize("kind, extra", [("ring", {}), ("watts_strogatz", {"p": 0.1})])
def test_an_odd_k_is_refused_not_rounded_down(kind, extra):
    """k/2 neighbours on each side: k = 5 would build the k = 4 network without a word."""
    with pytest.raises(pydantic.ValidationError, match=f"'{kind}' needs an even k .* got 5"):
        Interaction(kind=kind, k=5, **extra)
    assert build_graph(Interaction(kind=kind, k=6, **extra), people(40), seed=1).number_of_edges() == 40 * 3


@pytest.mark.parametrize("it", [
    Interaction(kind="watts_strogatz", k=4, p=0.2),
    Interaction(kind="barabasi_albert", m=2),
    Interaction(kind="erdos_renyi", p=0.1),
])
def test_seeded_reproducibility(it):
    pop = people(80)
    a, b = build_graph(it, pop, seed=9), build_graph(it, pop, seed=9)
    assert list(a.edges) == list(b.edges)
    assert set(build_graph(it, pop, seed=10).edges) != set(a.edges)


def test_edges_table_equals_the_runs_graph(tmp_path):
    root = tmp_path / "net"
    for sub in ("environment", "population", "simulation"):
        (root / sub).mkdir(parents=True)
    (root / "model.py").write_text(
        "from desim import Action, DecisionModel, EnvironmentProvider, Observation\n"
        "class Env(EnvironmentProvider):\n"
        "    def observe_batch(self, ids, t, r):\n"
        "        return [Observation(agent_id=a, step=t, round_idx=r) for a in ids]\n"
        "    def apply(self, actions):\n"
        "        pass\n"
        "    def agent_state(self, agent_id):\n"
        "        return {}\n"
        "class Idle(DecisionModel):\n"
        "    def decide_batch(self, observations, memories):\n"
        "        return []\n")
    (root / "study.json").write_text(json.dumps({"id": "net"}))
    (root / "environment" / "environment.json").write_text(json.dumps({"provider": {"ref": "model:Env"}}))
    (root / "population" / "population.json").write_text(json.dumps({
        "personas": [{"agent_id": f"n{i}"} for i in range(30)],
        "interaction": {"kind": "watts_strogatz", "k": 4, "p": 0.25}}))
    (root / "simulation" / "simulation.json").write_text(json.dumps({
        "n_steps": 1, "seed": 5, "decision": {"ref": "model:Idle"}}))
    db = tmp_path / "net.duckdb"
    runs = []
    for _ in range(2):
        spec = load_study(root)
        run = assemble(spec)
        runs.append((record(run, sink_for(spec, db)).run_id, {frozenset(e) for e in run.graph.edges}))
    con = duckdb.connect(str(db), read_only=True)
    try:
        for run_id, graph_edges in runs:
            stored = con.execute("SELECT source, target FROM edges WHERE run_id = ?", [run_id]).fetchall()
            assert len(stored) == 60
            assert {frozenset(e) for e in stored} == graph_edges
    finally:
        con.close()
    assert runs[0][1] == runs[1][1]            # same seed, same network
