"""The linear threshold model (Granovetter 1978; Kempe, Kleinberg & Tardos 2003).

States ``inactive`` and ``active``; an active node stays active. **Synchronous, per node**:
at each step every inactive node ``v`` with at least one neighbour (predecessor, on a
directed graph) looks at its neighbours' states at the start of the step and activates when

    sum over active neighbours u of w(u, v)  >=  threshold(v)

It is active from the next step on (and counts for its neighbours then). Without
``weight`` the influence of each neighbour is ``1 / in-degree(v)``: the node activates when the
*share* of its active neighbours reaches its threshold, computed as ``active / degree`` exactly
as NDlib's ``ThresholdModel`` does (so the two agree node for node). With
``weight: {"edge": "w"}`` the edge attribute is the influence (Kempe et al. require the
weights into a node to sum to at most 1; this model does not, and says so here).

Parameters:

* ``threshold`` in [0, 1] (default 0.1, NDlib's default): a number, per node
  ``{"attribute": "threshold"}``, or ``"uniform"``: each node's threshold drawn once per run,
  uniformly on [0, 1] (Kempe et al.'s model), from the run's ``thresholds`` stream;
* ``weight`` (optional): ``{"edge": NAME, "default": x}``, each edge's influence, >= 0.

Deterministic once thresholds and seeds are fixed: no random draw is made after the set-up.
"""
from __future__ import annotations

import copy

import numpy as np

from desim.diffusion.base import DiffusionModel
from desim.diffusion.params import Param


class LinearThreshold(DiffusionModel):
    """The linear threshold model (Granovetter 1978; Kempe, Kleinberg & Tardos 2003): states ``inactive``
    and ``active`` (for good).

    Synchronous, per node, deterministic: an inactive node ``v`` with at least one neighbour (predecessor)
    activates (``activate``) when ``sum over its neighbours u active at the start of the step of w(u, v) >=
    threshold(v)``, with ``w = 1 / in-degree(v)`` when no ``weight`` is given (computed as ``active /
    degree``).

    Parameters: ``threshold`` in [0, 1] (default 0.1): a number, per node ``{"attribute": NAME}``, or
    ``"uniform"`` (each node's drawn once per run on [0, 1]); ``weight`` (optional): ``{"edge": NAME,
    "default": x}``, each edge's influence, >= 0. Counterpart: NDlib ``ThresholdModel`` (node for node, without
    ``weight``); EoN has none. More in ``help(desim.diffusion.threshold)``."""

    NAME = "LT"
    STATES = ("inactive", "active")
    SEED_STATE = "active"
    KINDS = {"active": "activate"}
    PARAMS = {
        "threshold": Param("threshold", 0.1, 0.0, 1.0, per_node=True, choices=(),
                           doc='a number in [0, 1], {"attribute": NAME} or "uniform"'),
        "weight": Param("weight", {}, 0.0, per_edge=True, doc='{"edge": NAME}: the influence of each edge'),
    }

    def __init__(self, **args):
        given = copy.deepcopy(args)
        uniform = args.get("threshold") == "uniform"
        if uniform:
            args = {**args, "threshold": 0.1}
        weight = args.get("weight")
        if weight == {}:
            args = {k: v for k, v in args.items() if k != "weight"}
        super().__init__(**args)
        self.given_args = given         # what recorded_args gives back: "uniform", not the 0.1 passed on
        self.uniform = uniform
        if uniform:
            self.args["threshold"] = "uniform"

    def prepare(self) -> None:
        net = self.network
        if self.uniform:
            self.theta = self.ctx.streams.numpy("thresholds").random(self.n)
        else:
            self.theta = self.value("threshold").everywhere(self.n)
        self.weight = self.value("weight", "in") if self.args["weight"] else None
        self.degree = net.in_degree
        self._rows = net.rows("in")

    def update(self, state):
        net = self.network
        active = state == 1
        from_active = active[net.in_indices]
        if self.weight is None or self.weight.scalar:
            count = np.bincount(self._rows[from_active], minlength=self.n).astype(np.float64)
            if self.weight is not None:
                pressure = count * self.weight.value
            else:
                with np.errstate(divide="ignore", invalid="ignore"):
                    pressure = count / self.degree
        else:
            pressure = np.bincount(self._rows[from_active], weights=self.weight.value[from_active],
                                   minlength=self.n)
        new = state.copy()
        new[~active & (self.degree > 0) & (pressure >= self.theta)] = 1
        return new, None
