"""Bounded-confidence opinion dynamics on the network, opinions in [0, 1] (panel field ``opinion``).

``HegselmannKrause`` (Hegselmann & Krause 2002), **synchronous, per node**: every node
moves by ``mu`` towards the mean opinion of the neighbours (and, with ``include_self``, itself)
whose opinions are within ``epsilon`` of its own (``|x_j - x_i| <= epsilon``: the paper's confidence
set I(i, x), bound included), all computed from the opinions at the start of the step. With
``mu = 1`` and ``include_self = true`` (the defaults) this is the paper's update on the network (the
paper's agents all see each other: the ``complete`` network). Differences: NDlib's ``HKModel``
updates one random node an iteration (6.0.1 draws n nodes but assigns only the last one's new
opinion), leaves the node itself out and uses ``<``, on opinions in [-1, 1];
``studies/opinion_diffusion`` (a per-agent study) leaves the node itself out, uses ``mu = 0.5`` and
reads the neighbours' opinions of the previous step through its message feed.

``Deffuant`` (Deffuant, Neau, Amblard & Weisbuch 2000), **asynchronous, per edge**: a step is
``round(encounters * n / 2)`` encounters one after another; each picks a node uniformly and one
of its neighbours uniformly; when their opinions differ by less than ``epsilon`` (``|x - y| <
epsilon``, the paper's strict bound) both move by ``mu`` towards each other (``x += mu (y - x)``,
``y += mu (x - y)``), and later encounters of the step see the moved opinions. As
``studies/opinion_diffusion``'s ``rule=deffuant``.

``tolerance`` (both; default 1e-9, in [0, 1)): a move of at most ``tolerance`` is not made. HK: a
node whose new opinion is within ``tolerance`` of its old one keeps the old one; Deffuant: an
encounter that would move the pair by at most ``tolerance`` (``mu |x - y| <= tolerance``) moves
neither. Without it, converged opinions go on changing in their last digits for ever (an HK mean
recomputed each step differs from the last by round-off, about 1e-13), so ``changed`` (the nodes
whose opinion changed), the ``update`` actions and a ``stop_when`` on them never settle. The
panel stores the opinions the run went on with, not the exact values computed: a move not made is not
stored (a node takes an ``update`` action exactly when its stored opinion changed, which is what lets a
branch replay a run bit for bit: its replay applies the stored actions only). A node stops once its
moves would be at most ``tolerance``, so converged opinions may differ from the exact limit by a small
multiple of ``tolerance`` (the more, the slower the convergence). ``tolerance = 0`` makes every move,
round-off included.

When it ends: HK is deterministic, so a step in which no node moved (``changed`` = 0) leaves the
opinions as they were and every later step repeats it: ``stop_when`` ``changed <= 0`` is the end.
Deffuant draws its encounters, so a quiet step may be followed by moves (the pairs still apart were
not drawn); ``Prevalence`` also reports ``unsettled`` for it, the nodes that some encounter could still
move (a neighbour within ``epsilon`` and more than ``tolerance / mu`` away), which is 0 only once no
encounter can move anyone again.

Parameters: ``epsilon`` in [0, 1] (default 0.3), ``mu`` in [0, 1] (HK, default 1) or [0, 0.5]
(Deffuant, default 0.5); ``include_self`` (HK, default true); ``encounters`` > 0 (Deffuant,
default 1); ``tolerance`` in [0, 1) (default 1e-9). Initial opinions: ``NetworkState``'s
``initial: {"attribute": ...}`` or uniform.
"""
from __future__ import annotations

import numpy as np

from desim.diffusion.base import DiffusionModel
from desim.diffusion.params import Param
from desim.records import ActionColumns


TOLERANCE = Param("tolerance", 1e-9, 0.0, 1.0, hi_open=True,
                  doc="a move of at most this much is not made (round-off is not a change)")


class BoundedConfidence(DiffusionModel):
    """The shared step of the bounded-confidence models: ``update_opinions`` gives every node's opinion after
    the step, moves of at most ``tolerance`` already left out; a node whose opinion changed takes an
    ``update`` action carrying it."""

    CONTINUOUS = True
    STATES = ()

    def decide_columns(self, obs, idx, t, round_idx):
        if "opinion" not in obs:
            raise TypeError(f"desim.diffusion:{type(self).__name__} needs the environment "
                            "desim.diffusion:NetworkState (environment.json provider)")
        x = obs["opinion"]
        new = self.update_opinions(x)
        changed = new[idx] != x[idx]
        return ActionColumns(kind="update", payload={"opinion": new[idx]}, acted=changed)


class HegselmannKrause(BoundedConfidence):
    """Hegselmann-Krause bounded confidence (Hegselmann & Krause 2002), synchronous, per node.

    Each step, from the opinions ``x`` at its start, every node ``i`` with at least one node in its
    confidence set ``I(i) = {j neighbour of i (and i itself, include_self): |x_j - x_i| <= epsilon}``
    moves to ``x_i + mu (mean of x_j over I(i) - x_i)``; a move of at most ``tolerance`` is not made.

    Parameters: ``epsilon`` in [0, 1] (default 0.3), the confidence bound; ``mu`` in [0, 1] (default 1,
    the paper's update), the share of the way to the mean; ``include_self`` (default true, as the paper);
    ``tolerance`` in [0, 1) (default 1e-9). Counterpart: NDlib ``HKModel``, which updates one random node
    an iteration, leaves the node itself out and uses ``<``, on [-1, 1]; EoN has none. Deterministic:
    ``changed`` = 0 means no later step changes anything. More in ``help(desim.diffusion.confidence)``."""

    NAME = "HK"
    PARAMS = {
        "epsilon": Param("epsilon", 0.3, 0.0, 1.0, doc="confidence bound"),
        "mu": Param("mu", 1.0, 0.0, 1.0, doc="step towards the mean"),
        "include_self": Param("include_self", True, choices=(False, True)),
        "tolerance": TOLERANCE,
    }

    def prepare(self) -> None:
        self._rows = self.network.rows("in")

    def update_opinions(self, x):
        net = self.network
        eps, mu, tol = float(self.args["epsilon"]), float(self.args["mu"]), float(self.args["tolerance"])
        other = x[net.in_indices]
        close = np.abs(other - x[self._rows]) <= eps        # the paper's I(i, x): the bound is included
        total = np.bincount(self._rows[close], weights=other[close], minlength=self.n)
        count = np.bincount(self._rows[close], minlength=self.n).astype(np.float64)
        if self.args["include_self"]:
            total, count = total + x, count + 1.0
        new = x.copy()
        has = count > 0
        new[has] = x[has] + mu * (total[has] / count[has] - x[has])
        new = np.clip(new, 0.0, 1.0)
        return np.where(np.abs(new - x) > tol, new, x)      # round-off is not a move


class Deffuant(BoundedConfidence):
    """Deffuant's pairwise bounded confidence (Deffuant, Neau, Amblard & Weisbuch 2000), asynchronous.

    A step is ``round(encounters * n / 2)`` encounters, one after another: a node ``a`` drawn uniformly
    meets a neighbour ``b`` (a predecessor, on a directed graph) drawn uniformly; when ``|x_a - x_b| <
    epsilon`` and ``mu |x_a - x_b| > tolerance``, ``x_a += mu (x_b - x_a)`` and ``x_b += mu (x_a - x_b)``
    (both from the opinions before the encounter); later encounters see the moved opinions.

    Parameters: ``epsilon`` in [0, 1] (default 0.3), the confidence bound; ``mu`` in [0, 0.5] (default
    0.5), the convergence parameter; ``encounters`` > 0 (default 1), encounters per node per step (a
    step is ``n / 2`` encounters: each node in one on average); ``tolerance`` in [0, 1) (default 1e-9).
    Counterpart: NDlib ``AlgorithmicBiasModel`` with ``gamma = 0`` is this model with ``mu = 0.5`` and
    ``encounters = 2`` (n encounters an iteration); EoN has none. Random: ``Prevalence``'s ``unsettled``
    (0 once no encounter can move anyone) says when it has ended. More in
    ``help(desim.diffusion.confidence)``."""

    NAME = "deffuant"
    PARAMS = {
        "epsilon": Param("epsilon", 0.3, 0.0, 1.0, doc="confidence bound"),
        "mu": Param("mu", 0.5, 0.0, 0.5, doc="convergence parameter"),
        "encounters": Param("encounters", 1.0, 0.0, lo_open=True, doc="encounters per node per step"),
        "tolerance": TOLERANCE,
    }

    def prepare(self) -> None:
        net = self.network
        self._ptr, self._ind = net.in_ptr.tolist(), net.in_indices.tolist()
        self._deg = net.in_degree.tolist()
        self._rows = net.rows("in")

    def update_opinions(self, x):
        rng = self.rng("encounters")
        m = int(round(float(self.args["encounters"]) * self.n / 2))
        picks, partners = rng.integers(0, self.n, m).tolist(), rng.random(m).tolist()
        eps, mu, tol = float(self.args["epsilon"]), float(self.args["mu"]), float(self.args["tolerance"])
        s = x.tolist()
        ptr, ind, deg = self._ptr, self._ind, self._deg
        for a, u in zip(picks, partners):
            d = deg[a]
            if not d:
                continue
            b = ind[ptr[a] + int(u * d)]
            xa, xb = s[a], s[b]
            gap = abs(xa - xb)
            if gap < eps and mu * gap > tol:
                s[a], s[b] = xa + mu * (xb - xa), xb + mu * (xa - xb)
        return np.asarray(s, dtype=np.float64)

    def unsettled(self, x) -> int:
        """How many nodes some encounter could still move: an end of an edge whose opinions differ by less
        than ``epsilon`` and by more than ``tolerance / mu``. 0: no encounter moves anyone again."""
        eps, mu, tol = float(self.args["epsilon"]), float(self.args["mu"]), float(self.args["tolerance"])
        gap = np.abs(x[self.network.in_indices] - x[self._rows])
        live = (gap < eps) & (mu * gap > tol)
        ends = np.zeros(self.n, bool)
        ends[self._rows[live]] = True
        ends[self.network.in_indices[live]] = True
        return int(np.count_nonzero(ends))
