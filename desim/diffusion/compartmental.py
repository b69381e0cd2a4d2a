"""Discrete-time compartmental epidemics on a network: SI, SIR, SIS, SEIR, and the independent cascade.

All of them share one update, **synchronous**: every transition of a step is decided on the
states at the start of the step and applied together.

1. *Transmission, per edge.* Every node infectious at the start of the step tries once to
   infect each susceptible node it can reach (its neighbours; its successors on a directed
   graph), with probability ``beta`` per edge, independently. A susceptible node with ``k``
   infectious neighbours is therefore infected with probability ``1 - (1 - beta)^k``. When
   several tries succeed, the infector (``infected_by``) is one of them drawn uniformly.
2. *Spontaneous transitions, per node*, with a fixed probability per step: recovery
   ``I -> R`` (SIR, SEIR) or ``I -> S`` (SIS) with ``gamma``; the end of the latent period
   ``E -> I`` with ``alpha`` (SEIR). A node infectious at the start of the step transmits in
   that step even if it recovers in it.
3. *A new case becomes infectious the next step* (SEIR: exposed the next step, infectious at
   the earliest the step after). Durations are geometric: an SIR case is infectious for
   ``k >= 1`` steps with probability ``gamma (1 - gamma)^(k - 1)``, on average ``1 / gamma``.

With ``interaction_rounds: K`` a step makes ``K`` such updates (the panel keeps the state
after the last). ``beta`` may vary by edge (``{"edge": "p"}``: the edge attribute) or by
node (``{"attribute": "susceptibility"}``: read at the node at risk); ``gamma`` and ``alpha``
by node.

These are NDlib's ``SIModel``, ``SIRModel``, ``SISModel`` and ``SEIRModel`` (NDlib 6.0.1:
the same synchronous update, per-neighbour probability ``beta``, recovery with ``gamma``;
NDlib names SIS's recovery ``lambda``), and with ``gamma = 1`` EoN's ``basic_discrete_SIR``
(every case infectious for exactly one step). ``IndependentCascade`` is that last process
with its own names (Kempe, Kleinberg & Tardos 2003; NDlib's ``IndependentCascadesModel``).
"""
from __future__ import annotations

import numpy as np

from desim.diffusion.base import DiffusionModel
from desim.diffusion.network import edges_of
from desim.diffusion.params import Param, prob


class Compartmental(DiffusionModel):
    """The shared update; a subclass names its states, its infection and its spontaneous moves."""

    SUSCEPTIBLE = "S"
    INFECTIOUS = "I"
    INFECTED_TO = "I"                 # where a transmission leads (E in SEIR)
    SPONTANEOUS: tuple[tuple[str, str, str], ...] = ()   # (from, to, parameter)
    BETA = "beta"

    def prepare(self) -> None:
        code = self.code
        self._s, self._i, self._to = code[self.SUSCEPTIBLE], code[self.INFECTIOUS], code[self.INFECTED_TO]
        self.beta = self.value(self.BETA, "out")
        self.moves = [(code[a], code[b], self.value(p) if isinstance(p, str) else p)
                      for a, b, p in self.SPONTANEOUS]

    def update(self, state):
        net = self.network
        rng = self.ctx.rng("transmission")      # one stream for every epidemic model: SIS with gamma 0 is SI
        new = state.copy()
        infector = np.full(self.n, -1, np.int64)
        sources = np.flatnonzero(state == self._i)
        if len(sources):
            pos = edges_of(net.out_ptr, sources)
            targets = net.out_indices[pos]
            at_risk = state[targets] == self._s
            pos, targets = pos[at_risk], targets[at_risk]
            hit = rng.random(len(pos)) < self.beta.edges(pos, targets)
            if hit.any():
                hit_targets = targets[hit]
                hit_sources = net.rows("out")[pos[hit]]
                if self.record_infector:
                    order = rng.permutation(len(hit_targets))   # the infector: one success at random
                    chosen = order[np.unique(hit_targets[order], return_index=True)[1]]
                    infector[hit_targets[chosen]] = hit_sources[chosen]
                    new[hit_targets[chosen]] = self._to
                else:
                    new[hit_targets] = self._to
        moves_rng = self.ctx.rng("transitions")
        for frm, to, value in self.moves:
            nodes = np.flatnonzero(state == frm)
            if not len(nodes):
                continue
            p = value if isinstance(value, float) else value.nodes(nodes)
            if isinstance(p, float) and p >= 1.0:
                new[nodes] = to
            else:
                new[nodes[moves_rng.random(len(nodes)) < p]] = to
        return new, infector


BETA = prob("beta", per_node=True, per_edge=True,
            doc="per-step probability that an infectious node infects one susceptible neighbour")
GAMMA = prob("gamma", doc="per-step probability that an infectious node recovers")


class SI(Compartmental):
    """SI: susceptible ``S`` -> infectious ``I`` for good (NDlib ``SIModel``).

    Synchronous; per edge, probability ``beta`` per step from each infectious neighbour;
    a new case is infectious from the next step. Parameters: ``beta`` in [0, 1] (required;
    per node or per edge)."""

    NAME = "SI"
    STATES = ("S", "I")
    SEED_STATE = "I"
    KINDS = {"I": "infect"}
    TRANSMITTED = ("I",)
    PARAMS = {"beta": BETA}


class SIR(Compartmental):
    """SIR: ``S -> I -> R`` (NDlib ``SIRModel``; with ``gamma = 1`` EoN ``basic_discrete_SIR``).

    Synchronous; infection per edge with probability ``beta`` per step from each infectious
    neighbour; recovery per node with probability ``gamma`` per step (an infectious period of
    ``1 / gamma`` steps on average, at least one); a new case is infectious from the next step,
    and transmits in the step it recovers in. Parameters: ``beta`` in [0, 1] (required; per
    node or per edge), ``gamma`` in [0, 1] (required; per node)."""

    NAME = "SIR"
    STATES = ("S", "I", "R")
    SEED_STATE = "I"
    KINDS = {"I": "infect", "R": "recover"}
    TRANSMITTED = ("I",)
    SPONTANEOUS = (("I", "R", "gamma"),)
    PARAMS = {"beta": BETA, "gamma": GAMMA}


class SIS(Compartmental):
    """SIS: ``S -> I -> S`` (NDlib ``SISModel``, whose ``lambda`` is ``gamma`` here).

    Synchronous; infection per edge with probability ``beta`` per step from each infectious
    neighbour; recovery to ``S`` per node with probability ``gamma`` per step; a recovered
    node can be infected again from the next step. Parameters: ``beta``, ``gamma`` in [0, 1]
    (required)."""

    NAME = "SIS"
    STATES = ("S", "I")
    SEED_STATE = "I"
    KINDS = {"I": "infect", "S": "recover"}
    TRANSMITTED = ("I",)
    SPONTANEOUS = (("I", "S", "gamma"),)
    PARAMS = {"beta": BETA, "gamma": GAMMA}


class SEIR(Compartmental):
    """SEIR: ``S -> E -> I -> R`` (NDlib ``SEIRModel``).

    Synchronous; an infectious neighbour exposes a susceptible node with probability ``beta``
    per step (per edge); an exposed node becomes infectious with probability ``alpha`` per
    step (a latent period of ``1 / alpha`` steps on average), an infectious one recovers with
    ``gamma``. Exposed at step t, infectious at step t + 1 at the earliest, transmitting from
    the step after. Parameters: ``beta``, ``alpha``, ``gamma`` in [0, 1] (required)."""

    NAME = "SEIR"
    STATES = ("S", "E", "I", "R")
    SEED_STATE = "I"
    INFECTED_TO = "E"
    KINDS = {"E": "expose", "I": "infectious", "R": "recover"}
    TRANSMITTED = ("E",)
    SPONTANEOUS = (("E", "I", "alpha"), ("I", "R", "gamma"))
    PARAMS = {"beta": BETA, "alpha": prob("alpha", doc="per-step probability that an exposed node becomes "
                                                       "infectious"), "gamma": GAMMA}


class IndependentCascade(Compartmental):
    """Independent cascade (Kempe, Kleinberg & Tardos 2003; NDlib ``IndependentCascadesModel``).

    States ``inactive``, ``active`` (activated at the previous step: it tries its neighbours
    this step), ``spent`` (active, its one chance used). Synchronous; each node activated at
    step t tries once, at step t + 1, to activate each inactive neighbour (successor), with
    probability ``p`` per edge, then is spent. Parameters: ``p`` in [0, 1] (default 0.1, as
    NDlib's edge threshold; per edge ``{"edge": "p"}`` or per node at risk). The same process
    as EoN's ``basic_discrete_SIR`` and as ``SIR`` with ``gamma = 1``. NDlib compares its
    draw with ``<=`` and this model with ``<``: the same probability for continuous draws."""

    NAME = "IC"
    STATES = ("inactive", "active", "spent")
    SEED_STATE = "active"
    SUSCEPTIBLE, INFECTIOUS, INFECTED_TO = "inactive", "active", "active"
    KINDS = {"active": "activate", "spent": "spend"}
    TRANSMITTED = ("active",)
    SPONTANEOUS = (("active", "spent", 1.0),)
    BETA = "p"
    PARAMS = {"p": prob("p", 0.1, per_node=True, per_edge=True,
                        doc="probability that an active node activates one inactive neighbour")}


__all__ = ["SI", "SIR", "SIS", "SEIR", "IndependentCascade", "Param"]
