"""What every diffusion model shares: declared states and parameters, and one update as actions.

A model is a ``DecisionModel`` on desim's columnar path. Each round it reads the state of
every node (``obs["state"]``, an int8 code per node, from ``NetworkState``), computes the
next state of every node at once (``update``), and returns one action per node that changed:

* ``kind`` -- the transition's name (``infect``, ``recover``, ``activate``, ``adopt_1``, ...):
  each state is entered by one kind only (``KINDS``), so the kind says the new state;
* ``payload.by`` -- for the models that transmit, the *position* (in population order) of
  the neighbour that transmitted, ``-1`` for any other change. An integer rather than the
  agent id because it is written for every node every step and text costs several times
  more to store; the panel's state field ``infected_by`` holds the id.

Nodes that did not change take no action (``action_kind`` is NULL in the panel), so a
quiet step costs little to store. The environment commits the changes in ``apply_columns``
from the payload alone, which is what makes a branch or a resumed run replay a stored
step exactly.

A model with a continuous state (the bounded-confidence rules) sets ``CONTINUOUS`` and
works on ``obs["opinion"]`` instead.
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np

from desim.diffusion import link
from desim.diffusion.params import Param, Value, check_args, resolve
from desim.errors import StudyConfigError
from desim.records import ActionColumns
from desim.study.contract import DecisionModel
from desim.versions import ENVIRONMENT_FILE


class DiffusionModel(DecisionModel):
    """Base class: subclasses declare ``NAME``, ``STATES``, ``SEED_STATE``, ``KINDS``, ``PARAMS``
    and implement ``update(state) -> (new_state, infector)``."""

    DIFFUSION_MODEL = True      # what ``NetworkState`` looks for in ``ctx.decision``

    NAME = "diffusion"
    STATES: tuple[str, ...] = ()
    SEED_STATE: str = ""              # the state ``seeds`` put nodes in
    KINDS: dict[str, str] = {}        # state entered -> action kind
    TRANSMITTED: tuple[str, ...] = ()  # states entered through a neighbour (they get ``infected_by``)
    PARAMS: dict[str, Param] = {}
    CONTINUOUS = False
    record_infector = True            # NetworkState's record_infector: false turns it off
    unseeded: str | None = None       # NetworkState: which setting started every node in the first state

    def __init__(self, **args: Any):
        self.given_args = copy.deepcopy(args)       # as given: ``self.args`` has the defaults filled in
        self.args = check_args(f"desim.diffusion:{type(self).__name__}", self.PARAMS, args)
        self.code = {s: i for i, s in enumerate(self.STATES)}
        self.labels = np.array(list(self.STATES), dtype=object)
        self.kind_labels = np.array([self.KINDS.get(s, f"to_{s}") for s in self.STATES], dtype=object)
        self.kind_code = {k: i for i, k in enumerate(self.kind_labels.tolist())}

    def recorded_args(self) -> dict[str, Any]:
        """The arguments this model was built with, for ``desim.Study`` to record (``**args`` cannot be read
        back from a signature): the ones given, not ``self.args``, which a subclass may transform
        (``LinearThreshold``'s ``"uniform"``) and whose filled-in defaults are not all JSON."""
        return copy.deepcopy(self.given_args)

    # --- set-up ------------------------------------------------------------------
    def reset(self, seed: int) -> None:
        self.network = link.network(self.ctx)
        self.n = self.network.n
        self._from_attributes: list[tuple[str, str, Value]] = []
        self._attribute_changes = self.ctx.interventions.attribute_changes
        self._moved = False
        self.prepare()

    def prepare(self) -> None:
        """Resolve per-node and per-edge parameters (subclasses); runs in ``reset``."""

    def value(self, name: str, direction: str = "out") -> Value:
        """The parameter ``name`` for this run: a scalar, per node or per CSR entry of ``direction``.
        A per-node value read from the agents' attributes follows the events that change them
        (:meth:`_follow_attributes`)."""
        owner = f"desim.diffusion:{type(self).__name__}"
        value = resolve(owner, self.PARAMS[name], self.args[name], self.ctx, self.network, direction)
        if isinstance(self.args[name], dict) and "attribute" in self.args[name]:
            self._from_attributes.append((name, direction, value))
        return value

    def _follow_attributes(self) -> None:
        """Read the per-node parameters taken from attributes again after an event changed any agent's
        attributes (a scheduled event with a selector: a treatment that sets every treated agent's
        recovery rate, say), into the same arrays, so whatever a model derived from them sees the
        change. Checked once a round; nothing is read while no event changes an attribute."""
        changes = self.ctx.interventions.attribute_changes
        if changes == self._attribute_changes:
            return
        self._attribute_changes = changes
        owner = f"desim.diffusion:{type(self).__name__}"
        for name, direction, value in self._from_attributes:
            try:
                value.value[:] = resolve(owner, self.PARAMS[name], self.args[name], self.ctx, self.network,
                                         direction).value
            except StudyConfigError as e:        # the files were right; an event made the value wrong
                raise StudyConfigError(ENVIRONMENT_FILE, [(f"scheduled_events (step {self.ctx.step})",
                                                      f"after this step's events, {field}: {message}")
                                                     for field, message in e.problems]) from None

    # --- one round ----------------------------------------------------------------
    def update(self, state: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The next state of every node, and for each node that entered a ``TRANSMITTED``
        state the position of its infector (-1 elsewhere; None when the model has none)."""
        raise NotImplementedError

    def rng(self, name: str) -> np.random.Generator:
        return self.ctx.rng(f"{self.NAME}/{name}")

    def decide_columns(self, obs, idx, t, round_idx):
        if "state" not in obs:
            raise TypeError(f"desim.diffusion:{type(self).__name__} needs the environment "
                            "desim.diffusion:NetworkState (environment.json provider)")
        state = obs["state"]
        self._follow_attributes()
        new, infector = self.update(state)
        if len(idx) != self.n:                  # agents away on an errand keep their state
            new_idx, changed = new[idx], new[idx] != state[idx]
        else:
            new_idx, changed = new, new != state
        self._moved = self._moved or bool(changed.any())
        payload = {}
        if infector is not None and self.record_infector:
            by = infector[idx] if len(idx) != self.n else infector
            payload["by"] = np.where(changed, by, -1)
        return ActionColumns(kind=self.kind_labels[new_idx], payload=payload, acted=changed)

    def warnings(self) -> list[str]:
        """Said after the run (``desim run`` prints it): a run that started with every node in the first state
        (no seed) and in which no node changed. Such a run is allowed, as a control; given by mistake (a
        ``seed_fraction`` that rounds to no node, a ``seeds`` left at 0), it would otherwise end silently."""
        if self.unseeded is None or getattr(self, "_moved", False):
            return []
        return [f"{self.unseeded} and no node changed state in this run (nothing spreads without a seed); "
                "fine for a control run, else give seeds, seed_fraction or seed_nodes"]

    # --- what the documentation tables print ---------------------------------------
    @classmethod
    def describe(cls) -> dict[str, Any]:
        return {"states": cls.STATES, "seed_state": cls.SEED_STATE,
                "params": {n: (p.default, p.range_text(), p.doc) for n, p in cls.PARAMS.items()}}
