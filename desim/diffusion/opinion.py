"""Discrete opinion dynamics: the voter model and majority rule. Opinions are ``"0"`` and ``"1"``
(NDlib's convention: ``seeds`` and ``seed_fraction`` place opinion ``"1"``); a node that
changes opinion takes an action ``adopt_0`` or ``adopt_1``.

``Voter`` -- the voter model (Clifford & Sudbury 1973; Holley & Liggett 1975).
``update: "asynchronous"`` (default, NDlib's ``VoterModel``): a step is ``round(updates * n)``
elementary updates, one after another (``updates = 1``: one Monte Carlo sweep); each picks a
node uniformly at random (the listener) and one of its neighbours (predecessors, on a directed
graph) uniformly at random (the speaker); the listener takes the speaker's *current* opinion, so
a change is visible to the updates after it. A node with no neighbour is picked and keeps its
opinion (NDlib would fail on it). NDlib's iteration is one elementary update; a desim step is
``n`` of them. ``update: "synchronous"``: every node with a neighbour copies a random
neighbour's opinion of the start of the step, all at once. Either way the panel records each
node's opinion after the step; a node that flipped and flipped back in one step shows no action.
Invariant used in the tests: the degree-weighted share of ``"1"`` is a martingale (the
probability of consensus on ``"1"`` equals it at the start; on a regular graph, the share).

``MajorityRule``:
``rule: "neighbours"`` (default): synchronous, per node: every node with a neighbour takes the
opinion held by more than half of its neighbours at the start of the step (``include_self``
counts its own too); on a tie it keeps its own. Deterministic.
``rule: "groups"``: Galam's (2002) majority rule as in Krapivsky & Redner (2003) and NDlib's
``MajorityRuleModel``: a step is ``groups`` discussions one after another (default
``round(n / q)``, about one per node per step); each draws ``q`` nodes uniformly *with
replacement* from the whole population (the network is not used: mean field, as NDlib), and all
of them take the group's majority opinion; a tie (even ``q``) goes to ``"1"``, as in NDlib.
"""
from __future__ import annotations

import numpy as np

from desim.diffusion.base import DiffusionModel
from desim.diffusion.params import Param


class Voter(DiffusionModel):
    """The voter model (Clifford & Sudbury 1973; Holley & Liggett 1975): opinions ``"0"`` and ``"1"``.

    ``update: "asynchronous"`` (default): a step is ``round(updates * n)`` elementary updates one after
    another; each picks a node uniformly and one of its neighbours (predecessors, on a directed graph)
    uniformly, and the node takes that neighbour's current opinion. ``update: "synchronous"``: every node
    with a neighbour copies a random neighbour's opinion of the start of the step, all at once. A node with
    no neighbour keeps its opinion. A node whose opinion differs after the step takes ``adopt_0`` or
    ``adopt_1``.

    Parameters: ``update``, ``"asynchronous"`` or ``"synchronous"``; ``updates`` > 0 (default 1: one Monte
    Carlo sweep a step). Counterpart: NDlib ``VoterModel`` (one elementary update an iteration; it fails on
    a node without neighbours); EoN has none. More in ``help(desim.diffusion.opinion)``."""

    NAME = "voter"
    STATES = ("0", "1")
    SEED_STATE = "1"
    KINDS = {"0": "adopt_0", "1": "adopt_1"}
    PARAMS = {
        "update": Param("update", "asynchronous", choices=("asynchronous", "synchronous")),
        "updates": Param("updates", 1.0, 0.0, lo_open=True, doc="elementary updates per node per step"),
    }

    def prepare(self) -> None:
        net = self.network
        self.degree = net.in_degree
        self._ptr, self._ind = net.in_ptr.tolist(), net.in_indices.tolist()
        self._deg = self.degree.tolist()

    def update(self, state):
        rng = self.rng("voter")
        n = self.n
        if self.args["update"] == "synchronous":
            has = np.flatnonzero(self.degree > 0)
            pick = (rng.random(len(has)) * self.degree[has]).astype(np.int64)
            new = state.copy()
            new[has] = state[self.network.in_indices[self.network.in_ptr[has] + pick]]
            return new, None
        m = int(round(self.args["updates"] * n))
        listeners = rng.integers(0, n, m).tolist()
        draws = rng.random(m).tolist()
        s = state.tolist()
        ptr, ind, deg = self._ptr, self._ind, self._deg
        for a, u in zip(listeners, draws):
            d = deg[a]
            if d:
                s[a] = s[ind[ptr[a] + int(u * d)]]
        return np.asarray(s, dtype=np.int8), None


class MajorityRule(DiffusionModel):
    """Majority rule: opinions ``"0"`` and ``"1"``.

    ``rule: "neighbours"`` (default): synchronous, per node, deterministic: every node with a neighbour
    takes the opinion held by more than half of its neighbours (with ``include_self``, of them and itself)
    at the start of the step; a tie keeps its opinion. ``rule: "groups"`` (Galam 2002; Krapivsky & Redner
    2003): a step is ``groups`` discussions one after another, each among ``q`` nodes drawn uniformly with
    replacement from the whole population (the network is not used), who all take the group's majority; a
    tie (even ``q``) goes to ``"1"``.

    Parameters: ``rule``, ``"neighbours"`` or ``"groups"``; ``include_self`` (default false; rule
    neighbours); ``q``, an integer >= 1 (default 3; rule groups); ``groups``, an integer >= -1 (default -1:
    ``round(n / q)``; rule groups). Counterpart: NDlib ``MajorityRuleModel`` for rule groups (one discussion
    an iteration); rule neighbours has none in NDlib or EoN. More in ``help(desim.diffusion.opinion)``.

    Synchronous majority on an undirected graph ends in a fixed point or a cycle of two steps (Goles &
    Olivos 1980), where some nodes flip every step for ever: ``changed`` never reaches 0 on such a cycle,
    so ``Prevalence`` also reports ``unsettled`` (nodes unlike two steps before), which does."""

    NAME = "majority"
    STATES = ("0", "1")
    SEED_STATE = "1"
    KINDS = {"0": "adopt_0", "1": "adopt_1"}
    CYCLES = True
    PARAMS = {
        "rule": Param("rule", "neighbours", choices=("neighbours", "groups")),
        "include_self": Param("include_self", False, choices=(False, True)),
        "q": Param("q", 3, 1, integer=True, doc="group size (rule groups)"),
        "groups": Param("groups", -1, -1, integer=True, doc="discussions per step (rule groups; -1: round(n / q))"),
    }

    def prepare(self) -> None:
        self._rows = self.network.rows("in")
        self.degree = self.network.in_degree

    def update(self, state):
        if self.args["rule"] == "groups":
            return self._groups(state), None
        ones = np.bincount(self._rows[state[self.network.in_indices] == 1], minlength=self.n)
        total = self.degree.copy()
        if self.args["include_self"]:
            ones = ones + (state == 1)
            total = total + 1
        new = state.copy()
        has = total > 0
        new[has & (2 * ones > total)] = 1
        new[has & (2 * ones < total)] = 0
        return new, None

    def _groups(self, state):
        q = int(self.args["q"])
        g = int(self.args["groups"])
        if g < 0:
            g = max(1, int(round(self.n / q)))
        rng = self.rng("groups")
        members = rng.integers(0, self.n, (g, q)).tolist()
        s = state.tolist()
        half = q / 2.0
        for group in members:
            votes = 0
            for a in group:
                votes += s[a]
            major = 0 if votes < half else 1          # a tie (votes == q / 2) goes to "1", as NDlib
            for a in group:
                s[a] = major
        return np.asarray(s, dtype=np.int8)
