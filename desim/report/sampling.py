"""Neighbourhood samples of a network, for drawing graphs too large to show whole.

A uniform sample of nodes shows a scatter of isolated dots; a breadth-first
neighbourhood around a few seed agents keeps local structure (who talks to
whom), which is what a diffusion picture is about. Used by the dashboard's
network view and the report's diffusion player.
"""
from __future__ import annotations

from collections import deque
from typing import Iterable

import networkx as nx
import numpy as np


def sample_nodes(graph: nx.Graph, ids: list[str], limit: int, seed: int,
                 start: Iterable[str] = ()) -> list[str]:
    """Up to ``limit`` agents reached breadth-first from ``start`` (chosen agents), then from
    seeded random starts, restarting in unvisited parts of the graph until the limit is reached."""
    rng = np.random.default_rng(seed)
    starts = [a for a in start if a in graph] + [ids[i] for i in rng.permutation(len(ids))]
    seen: set[str] = set()
    picked: list[str] = []
    for root in starts:
        if len(picked) >= limit:
            break
        if root in seen:
            continue
        queue = deque([root])
        seen.add(root)
        while queue and len(picked) < limit:
            node = queue.popleft()
            picked.append(node)
            for nb in graph.neighbors(node):
                if nb not in seen:
                    seen.add(nb)
                    queue.append(nb)
    return picked
