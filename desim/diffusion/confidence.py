"""Bounded-confidence opinion dynamics on the network, opinions in [0, 1] (panel field ``opinion``).

``HegselmannKrause`` (Hegselmann & Krause 2002), **synchronous, per node**: every node
moves by ``mu`` towards the mean opinion of the neighbours (and, with ``include_self``, itself)
whose opinions are within ``epsilon`` of its own (``|x_j - x_i| < epsilon``), all computed from
the opinions at the start of the step. ``mu = 1`` and ``include_self = true`` (the defaults)
are the original model. Differences: NDlib's ``HKModel`` updates random nodes one after another
on opinions in [-1, 1]; ``studies/opinion_diffusion`` (a per-agent study) leaves the node
itself out, uses ``mu = 0.5`` and reads the neighbours' opinions of the previous step through
its message feed.

``Deffuant`` (Deffuant, Neau, Amblard & Weisbuch 2000), **asynchronous, per edge**: a step is
``round(encounters * n / 2)`` encounters one after another; each picks a node uniformly and one
of its neighbours uniformly; when their opinions differ by less than ``epsilon`` both move by
``mu`` towards each other (``x += mu (y - x)``, ``y += mu (x - y)``), and later encounters of
the step see the moved opinions. As ``studies/opinion_diffusion``'s ``rule=deffuant``.

Parameters: ``epsilon`` in [0, 1] (default 0.3), ``mu`` in [0, 1] (HK, default 1) or [0, 0.5]
(Deffuant, default 0.5); ``include_self`` (HK, default true); ``encounters`` > 0 (Deffuant,
default 1). Initial opinions: ``NetworkState``'s ``initial: {"attribute": ...}`` or uniform.
"""
from __future__ import annotations

import numpy as np

from desim.diffusion.base import DiffusionModel
from desim.diffusion.params import Param
from desim.records import ActionColumns


class BoundedConfidence(DiffusionModel):
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
    NAME = "HK"
    PARAMS = {
        "epsilon": Param("epsilon", 0.3, 0.0, 1.0, doc="confidence bound"),
        "mu": Param("mu", 1.0, 0.0, 1.0, doc="step towards the mean"),
        "include_self": Param("include_self", True, choices=(False, True)),
    }

    def prepare(self) -> None:
        self._rows = self.network.rows("in")

    def update_opinions(self, x):
        net = self.network
        eps, mu = float(self.args["epsilon"]), float(self.args["mu"])
        other = x[net.in_indices]
        close = np.abs(other - x[self._rows]) < eps
        total = np.bincount(self._rows[close], weights=other[close], minlength=self.n)
        count = np.bincount(self._rows[close], minlength=self.n).astype(np.float64)
        if self.args["include_self"]:
            total, count = total + x, count + 1.0
        new = x.copy()
        has = count > 0
        new[has] = x[has] + mu * (total[has] / count[has] - x[has])
        return np.clip(new, 0.0, 1.0)


class Deffuant(BoundedConfidence):
    NAME = "deffuant"
    PARAMS = {
        "epsilon": Param("epsilon", 0.3, 0.0, 1.0, doc="confidence bound"),
        "mu": Param("mu", 0.5, 0.0, 0.5, doc="convergence parameter"),
        "encounters": Param("encounters", 1.0, 0.0, lo_open=True, doc="encounters per node per step"),
    }

    def prepare(self) -> None:
        net = self.network
        self._ptr, self._ind = net.in_ptr.tolist(), net.in_indices.tolist()
        self._deg = net.in_degree.tolist()

    def update_opinions(self, x):
        rng = self.rng("encounters")
        m = int(round(float(self.args["encounters"]) * self.n / 2))
        picks, partners = rng.integers(0, self.n, m).tolist(), rng.random(m).tolist()
        eps, mu = float(self.args["epsilon"]), float(self.args["mu"])
        s = x.tolist()
        ptr, ind, deg = self._ptr, self._ind, self._deg
        for a, u in zip(picks, partners):
            d = deg[a]
            if not d:
                continue
            b = ind[ptr[a] + int(u * d)]
            xa, xb = s[a], s[b]
            if abs(xa - xb) < eps:
                s[a], s[b] = xa + mu * (xb - xa), xb + mu * (xa - xb)
        return np.asarray(s, dtype=np.float64)
