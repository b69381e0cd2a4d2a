"""The study's network, built with networkx from ``population.json``.

``interaction.kind`` names explicit ``edges`` or a seeded generator; nodes
are agent ids in population order. The graph's neighbours are the default
``neighbors_fn`` of a ``NeighborFeed``; the graph is also saved with every
run (the ``edges`` table) so reports and the dashboard can draw it.
"""
from __future__ import annotations

import networkx as nx

from desim.records import Persona
from desim.study.files import Interaction


def build_graph(interaction: Interaction, personas: list[Persona], seed: int) -> nx.Graph:
    """A graph over the agent ids; generators draw from ``seed`` only."""
    ids = [p.agent_id for p in personas]
    n = len(ids)
    kind = interaction.kind
    if kind == "edges":
        g = nx.DiGraph() if interaction.directed else nx.Graph()
        g.add_nodes_from(ids)
        known = set(ids)
        for i, (a, b) in enumerate(interaction.edges or []):
            for end in (a, b):
                if end not in known:
                    raise ValueError(f"interaction.edges[{i}]: unknown agent_id '{end}'")
            g.add_edge(a, b)
        return g
    if kind == "groups":
        return _groups(personas, interaction.attribute or "")
    if kind == "ring" and n > 2:
        return _ring(ids, interaction.k or 2)
    return _labelled(_generated(interaction, n, seed), ids)


def _labelled(g: nx.Graph, ids: list[str]) -> nx.Graph:
    """``g`` (nodes ``0..n-1``) over the agent ids, with every node's neighbours in the same order
    (what ``nx.relabel_nodes(g, ..., copy=True)`` gives, built directly: generators carry no data)."""
    h = g.__class__()
    h.add_nodes_from(ids)
    h.add_edges_from((ids[u], ids[v]) for u, v in g.edges())
    return h


def _ring(ids: list[str], k: int) -> nx.Graph:
    """``_labelled(nx.circulant_graph(n, range(1, k // 2 + 1)), ids)``, every node's neighbours in the
    same order, without building the numbered graph first (half the set-up of a large ring): the
    circulant's edges are laid out in plain dicts in the order networkx adds them, then read back
    in the order its edge view gives them."""
    n = len(ids)
    offsets = range(1, k // 2 + 1)
    adj: list[dict[int, None]] = [{} for _ in range(n)]
    for sign in (-1, 1):                        # circulant_graph: every i - j, then every i + j
        for i in range(n):
            for j in offsets:
                v = (i + sign * j) % n
                adj[i][v] = adj[v][i] = None
    done = [False] * n
    edges = []
    for u in range(n):                          # Graph.edges(): each edge once, from its first end
        edges += [(ids[u], ids[v]) for v in adj[u] if not done[v]]
        done[u] = True
    g = nx.Graph()
    g.add_nodes_from(ids)
    g.add_edges_from(edges)
    return g


def _generated(it: Interaction, n: int, seed: int) -> nx.Graph:
    kind = it.kind
    if kind == "none":
        g = nx.empty_graph(n)
    elif kind == "complete":
        g = nx.complete_graph(n)
    elif kind == "ring":
        k = it.k or 2
        g = nx.circulant_graph(n, range(1, k // 2 + 1)) if n > 2 else nx.path_graph(n)
    elif kind == "watts_strogatz":
        g = nx.watts_strogatz_graph(n, it.k, it.p, seed=seed)
    elif kind == "barabasi_albert":
        g = nx.barabasi_albert_graph(n, it.m, seed=seed)
    elif kind == "erdos_renyi":
        g = nx.fast_gnp_random_graph(n, it.p, seed=seed) if it.p < 0.2 else nx.gnp_random_graph(n, it.p, seed=seed)
    elif kind == "lattice":
        g = lattice(it.width, it.height, it.neighborhood, it.torus)
        if g.number_of_nodes() != n:
            raise ValueError(f"interaction lattice {it.width}x{it.height} has {g.number_of_nodes()} cells "
                             f"but the population has {n} agents")
    else:  # pragma: no cover - the config model rejects other kinds
        raise ValueError(f"unknown interaction kind '{kind}'")
    return g


def lattice(width: int, height: int, neighborhood: str = "moore", torus: bool = True) -> nx.Graph:
    """A 2-D grid with nodes ``0..width*height-1`` (row-major), Moore or von Neumann."""
    g = nx.Graph()
    g.add_nodes_from(range(width * height))
    offsets = [(0, 1), (1, 0)] + ([(1, 1), (1, -1)] if neighborhood == "moore" else [])
    for y in range(height):
        for x in range(width):
            for dx, dy in offsets:
                nx_, ny_ = x + dx, y + dy
                if torus:
                    nx_, ny_ = nx_ % width, ny_ % height
                elif not (0 <= nx_ < width and 0 <= ny_ < height):
                    continue
                a, b = y * width + x, ny_ * width + nx_
                if a != b:
                    g.add_edge(a, b)
    return g


def _groups(personas: list[Persona], attribute: str) -> nx.Graph:
    """Cliques of agents sharing ``attribute`` (a dorm, a household, a committee)."""
    g = nx.Graph()
    g.add_nodes_from(p.agent_id for p in personas)
    members: dict[object, list[str]] = {}
    for p in personas:
        if attribute not in p.attributes:
            raise ValueError(f"interaction groups: persona '{p.agent_id}' has no attribute '{attribute}'")
        members.setdefault(p.attributes[attribute], []).append(p.agent_id)
    for group in members.values():
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                g.add_edge(a, b)
    return g


def neighbors_fn(graph: nx.Graph):
    """A plain function ``agent_id -> list of neighbour ids`` over ``graph``.

    Adjacency is copied into lists once, so each call is a dict lookup.
    """
    if graph.is_directed():
        adj = {n: list(graph.predecessors(n)) for n in graph.nodes}
    else:
        adj = {n: list(nbrs) for n, nbrs in graph.adjacency()}
    empty: list[str] = []
    return lambda agent_id: adj.get(agent_id, empty)


def mean_degree(graph: nx.Graph) -> float:
    n = graph.number_of_nodes()
    return 0.0 if n == 0 else 2 * graph.number_of_edges() / n if not graph.is_directed() else graph.number_of_edges() / n


