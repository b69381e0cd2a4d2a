"""``Prevalence``: the per-step figures of a diffusion run, for ``simulation.json``'s collector.

For a model with named states, per step and for every state ``X``:

* ``share_X`` -- the share of nodes in ``X`` after the step (prevalence for ``I``);
* ``count_X`` -- how many nodes that is;
* ``new_X`` -- how many nodes entered ``X`` during the step (incidence for ``I``; for SEIR
  ``new_E`` is the step's infections);

``cumulative_incidence``: the share of nodes that have ever been in a state other than the
first (``S``, ``inactive``, ``"0"``), seeds included: the attack rate so far, ``1 - share_S``
in SIR; and ``changed``: how many nodes changed state during the step (the sum of the ``new_X``),
0 once a rule-driven process (majority, threshold) has settled. Step 0 gives the initial figures
(``new_X`` and ``changed`` count nothing).

For majority rule also ``unsettled``: how many nodes are in another state than two steps before
(synchronous majority on an undirected graph ends in a fixed point or in a cycle of two steps, where
``changed`` stays above 0 for ever; ``unsettled`` is 0 in either).

For a continuous model (bounded confidence): ``mean_opinion``, ``opinion_sd`` and
``changed`` (how many nodes' opinions changed in the step: a move of at most the model's
``tolerance`` is not made, so round-off is not counted and ``changed`` reaches 0 once the opinions
have converged); for ``Deffuant`` also ``unsettled``: how many nodes some encounter could still move
(0 once none can, for ever: its end; a step of ``Deffuant`` may move nobody by chance).
"""
from __future__ import annotations

import numpy as np

from desim.diffusion.params import Problems
from desim.study.contract import MetricCollector
from desim.versions import SIMULATION_FILE


class Prevalence(MetricCollector):
    """The per-step figures of any ``desim.diffusion`` model (the module docstring lists them): shares,
    counts, ``new_X``, ``cumulative_incidence`` and ``changed`` for the models with states; ``mean_opinion``,
    ``opinion_sd`` and ``changed`` for the bounded-confidence models; ``unsettled`` for majority rule and
    Deffuant. Parameters: none (``"collector": {"ref": "desim.diffusion:Prevalence"}``)."""

    def __init__(self, **args):
        problems = Problems(SIMULATION_FILE, "collector.args")
        for name in args:
            problems.add(name, "unknown parameter of desim.diffusion:Prevalence (it takes none)")
        problems.raise_any()

    def recorded_args(self) -> dict:
        """No arguments (it takes none), for ``desim.Study`` to record."""
        return {}

    def collect(self, t, environment, actions):
        if not hasattr(environment, "_ready"):
            raise TypeError("desim.diffusion:Prevalence reads desim.diffusion:NetworkState "
                            "(environment.json provider)")
        model = environment._ready()
        n = max(1, environment.n)
        if environment.continuous:
            x = environment.opinion
            moved = int(np.count_nonzero(environment.since == t)) if t > 0 else 0
            out = {"mean_opinion": float(x.mean()), "opinion_sd": float(x.std()), "changed": moved}
            if hasattr(model, "unsettled"):
                out["unsettled"] = model.unsettled(x)
            return out
        counts = environment.counts()
        out = {}
        for label, c, e in zip(model.STATES, counts.tolist(), environment.entered.tolist()):
            out[f"share_{label}"] = c / n
            out[f"count_{label}"] = c
            out[f"new_{label}"] = e if t > 0 else 0
        out["cumulative_incidence"] = float(np.count_nonzero(environment.ever)) / n
        out["changed"] = int(environment.entered.sum()) if t > 0 else 0
        if getattr(model, "CYCLES", False):
            out["unsettled"] = self._unsettled(t, environment.state)
        return out

    def _unsettled(self, t: int, state: np.ndarray) -> int:
        """How many nodes are in another state than two steps before (than at step 0, at step 1): 0 once the
        run has reached a fixed point or a cycle of two steps."""
        if t == 0:
            self._past = [state.copy()]
            return 0
        moved = int(np.count_nonzero(state != self._past[0]))
        self._past = (self._past + [state.copy()])[-2:]
        return moved
