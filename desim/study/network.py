"""The study's network, from ``population.json``: explicit edges, a file, or a seeded generator.

``interaction.kind`` names explicit ``edges``, a network ``file`` (``desim.study.edges``) or a
generator (``complete``, ``ring``, ``lattice``, ``watts_strogatz``, ``barabasi_albert``,
``erdos_renyi``, ``groups``); nodes are agent ids in population order. A run sees it as a
:class:`Network`: ``ctx.graph`` is the networkx graph (the default ``neighbors_fn`` of a
``NeighborFeed``), ``ctx.network`` the same edges as arrays of positions with their attributes. The
edges are saved with every run (the ``edges`` table) so reports and the dashboard can draw them.

A network from a file is read once per process: its parsed edges are kept, keyed by the file's path and
the hash of its content (``desim.versions.hash_file``, the hash its run's version records), so a file
rewritten with its size and modification time kept, as ``cp -p``, ``rsync -t`` or ``tar`` leave it, is read
anew. Hashing reads the file once more per run: 0.03 to 0.09 s for the 48 MB edge list of the
1,000,000-node benchmark (SHA-256, file in the page cache), against about 2 s to parse it. Its networkx
graph is built only when study code asks for ``ctx.graph``: a model working on the arrays
(``desim.diffusion``) never pays for it. It also keeps the line each edge came from
(:meth:`Network.origin`), so a value found wrong later, when a model reads an edge attribute, is reported
at its line of the file rather than at ``population.json``.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from desim.records import Persona
from desim.study.edges import format_of, place, read_edges
from desim.study.files import Interaction
from desim.study.generators import barabasi_albert_edges, watts_strogatz_edges
from desim.versions import POPULATION_DIR, hash_file

if TYPE_CHECKING:
    import networkx as nx     # imported where a graph is built: a run without one never loads networkx


class Network:
    """The run's network over the agents ``ids``: edges as positions (``source[i] -> target[i]``, one
    entry per edge, in the order the graph lists them), their attributes as arrays, and the networkx
    graph, built on first use when the network came from a file.

    A network read from a file also knows the file (``file``, its format ``format``) and each edge's line
    in it (``lines``, int32 aligned with the edges: 4 bytes an edge; for GraphML the edge's place among
    the file's edges); other networks have None there."""

    def __init__(self, ids: list[str], directed: bool, source: np.ndarray | None = None,
                 target: np.ndarray | None = None, attributes: dict[str, np.ndarray] | None = None,
                 graph: nx.Graph | None = None, *, file: Path | None = None, format: str | None = None,
                 lines: np.ndarray | None = None):
        self.ids, self.directed = ids, directed
        self._source, self._target, self._attributes, self._graph = source, target, attributes, graph
        self.file, self.format, self.lines = file, format, lines
        self.read = False       # study code asked for the network (desim validate tells graph-driven studies)

    @classmethod
    def of_graph(cls, graph: nx.Graph, ids: list[str]) -> "Network":
        return cls(ids, graph.is_directed(), graph=graph)

    @property
    def graph(self) -> nx.Graph:
        self.read = True
        if self._graph is None:
            import networkx as nx
            g = nx.DiGraph() if self.directed else nx.Graph()
            g.add_nodes_from(self.ids)
            ids, names = self.ids, list(self._attributes or {})
            if names:
                values = [self._attributes[k] for k in names]
                g.add_edges_from((ids[u], ids[v], {k: float(col[i]) for k, col in zip(names, values)
                                                   if col[i] == col[i]})
                                 for i, (u, v) in enumerate(zip(self._source.tolist(), self._target.tolist())))
            else:
                g.add_edges_from((ids[u], ids[v]) for u, v in zip(self._source.tolist(), self._target.tolist()))
            self._graph = g
        return self._graph

    @property
    def built_graph(self) -> nx.Graph | None:
        """The networkx graph if it exists already (generated, or asked for), else None."""
        return self._graph

    def _arrays(self) -> None:
        if self._source is None:
            index = {a: i for i, a in enumerate(self.ids)}
            edges = list(self._graph.edges(data=True))
            self._source = np.fromiter((index[a] for a, _, _ in edges), np.int64, len(edges))
            self._target = np.fromiter((index[b] for _, b, _ in edges), np.int64, len(edges))
            names = sorted({k for _, _, d in edges for k, v in d.items() if _numeric(v)})
            self._attributes = {k: np.array([float(d[k]) if _numeric(d.get(k)) else np.nan for _, _, d in edges])
                                for k in names}

    @property
    def source(self) -> np.ndarray:
        self.read = True
        return self.edges()[0]

    @property
    def target(self) -> np.ndarray:
        self.read = True
        return self.edges()[1]

    @property
    def attributes(self) -> dict[str, np.ndarray]:
        """Numeric edge attributes, one array per name aligned with the edges (NaN where an edge has none)."""
        self.read = True
        return self.edges()[2]

    def edges(self) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """``(source, target, attributes)`` (what the store saves; reading them this way is not study code
        reading the network)."""
        self._arrays()
        return self._source, self._target, self._attributes

    def rows(self, incoming: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each agent's neighbours as sparse rows in population order, ``(ptr, neighbour, edge)``: agent
        ``i``'s are ``neighbour[ptr[i]:ptr[i + 1]]``, and ``edge`` says which edge each entry is. An
        undirected edge is an entry at both ends, a directed one at its source (``incoming``: at its
        target). A node's entries come in the order of its edges, which is the order networkx keeps the
        neighbours of a graph built from these edges in: arrays and graph agree."""
        src, dst = np.asarray(self.source, np.int64), np.asarray(self.target, np.int64)
        edge = np.arange(len(src), dtype=np.int64)
        if self.directed:
            rows, cols, entry_edge = (dst, src, edge) if incoming else (src, dst, edge)
        else:                               # each edge from both ends, interleaved: the edges' own order
            rows, cols = np.column_stack([src, dst]).ravel(), np.column_stack([dst, src]).ravel()
            entry_edge = np.repeat(edge, 2)
        order = np.argsort(rows, kind="stable")
        ptr = np.zeros(len(self.ids) + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=len(self.ids)), out=ptr[1:])
        return ptr, cols[order], entry_edge[order]

    def origin(self, u: int, v: int, attribute: str | None = None) -> tuple[Path, str] | None:
        """Where the edge from position ``u`` to ``v`` (either way round when undirected) was read:
        ``(file, "line 7")``, or for GraphML ``(file, "edge 7 (a0 -> a1)")``, with ``attribute`` its field
        too (``line 7, column p``); None when the network did not come from a file or has no such edge.
        A search of the arrays, made only to report a problem."""
        if self.lines is None:
            return None
        src, dst = self._source, self._target
        hit = (src == u) & (dst == v)
        if not self.directed:
            hit |= (src == v) & (dst == u)
        found = np.flatnonzero(hit)
        if not len(found):
            return None
        i = int(found[0])
        return self.file, place(self.format, int(self.lines[i]), self.ids[src[i]], self.ids[dst[i]], attribute)

    def number_of_edges(self) -> int:
        return self._graph.number_of_edges() if self._source is None else len(self._source)


def _numeric(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


_FILES: dict[tuple, tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], np.ndarray]] = {}


def build_network(interaction: Interaction, personas: list[Persona], seed: int, root: Path | None = None) -> Network:
    """The run's :class:`Network`; generators draw from ``seed`` only, a file is read from beside
    ``population.json`` (``root / "population" / interaction.path``)."""
    ids = [p.agent_id for p in personas]
    if interaction.kind == "none":       # no edges: no graph built unless study code asks for ctx.graph
        empty = np.empty(0, np.int64)
        return Network(ids, False, empty, empty, {})
    if interaction.kind in ("watts_strogatz", "barabasi_albert"):     # networkx's graph, drawn as arrays
        edges = (watts_strogatz_edges(len(ids), interaction.k, interaction.p, seed)
                 if interaction.kind == "watts_strogatz" else barabasi_albert_edges(len(ids), interaction.m, seed))
        if edges is not None:
            return Network(ids, False, *edges, {})
    if interaction.kind != "file":
        return Network.of_graph(build_graph(interaction, personas, seed), ids)
    path = Path(root or ".") / POPULATION_DIR / str(interaction.path)
    fmt = format_of(path, interaction.format)
    content = _content(path)
    columns = (interaction.source_column or "source", interaction.target_column or "target")
    key = (str(path.resolve()), content, fmt, interaction.directed, columns, hash(tuple(ids)))
    if key not in _FILES:
        if len(_FILES) > 8:
            _FILES.clear()
        _FILES[key] = read_edges(path, fmt, ids, {a: i for i, a in enumerate(ids)}, directed=interaction.directed,
                                 source_column=columns[0], target_column=columns[1])
        src, dst, attrs, lines = _FILES[key]
        for array in (src, dst, *attrs.values(), lines):
            array.flags.writeable = False       # shared by the runs of this process: nobody changes it
    src, dst, attrs, lines = _FILES[key]
    # the arrays are shared read-only; the dict of them is each run's own (a study may add an attribute)
    return Network(ids, interaction.directed, src, dst, dict(attrs), file=path, format=fmt, lines=lines)


def _content(path: Path) -> str:
    """The network file's hash (its content, not size and mtime: those survive a rewrite by ``cp -p``); a path
    that names no readable file (missing, a folder, unreadable) is the study's mistake, said naming it."""
    from desim.errors import StudyConfigError
    setting = "(interaction.path in population.json)"
    try:
        return hash_file(path)
    except FileNotFoundError:
        raise StudyConfigError(path, [("", f"network file not found {setting}")]) from None
    except IsADirectoryError:
        raise StudyConfigError(path, [("", f"is a directory, not a network file {setting}")]) from None
    except OSError as e:
        raise StudyConfigError(path, [("", f"network file cannot be read: {e.strerror or e} {setting}")]) from None


def build_graph(interaction: Interaction, personas: list[Persona], seed: int) -> nx.Graph:
    """A graph over the agent ids; generators draw from ``seed`` only."""
    import networkx as nx
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
    import networkx as nx
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
    import networkx as nx
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
    import networkx as nx
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
    import networkx as nx
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

    def neighbours(agent_id: str) -> list[str]:
        return adj.get(agent_id, empty)
    neighbours.fixed_network = True         # a snapshot: a NeighborFeed may keep what it answers
    return neighbours
