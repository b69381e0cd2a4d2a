"""``NetworkState``: the environment of every diffusion model -- who is in which state, since when,
infected by whom -- as numpy arrays in population order.

Initial states (``environment.json`` provider args, at most one of the first four):

* ``seeds``: that many nodes drawn uniformly without replacement (from the run's ``seeds``
  stream: the same seed gives the same seeds) start in the model's seed state (``I`` for the
  epidemic models, ``active`` for cascades and thresholds, ``"1"`` for the opinion models);
* ``seed_fraction``: ``round(seed_fraction * n)`` such nodes;
* ``seed_nodes``: a list of agent ids;
* ``initial``: ``{"attribute": "status"}``, each node's initial state read from that persona
  attribute (a roster column): one of the model's states, by name;
* ``seed_state``: the state the seeds start in, instead of the model's default (``"E"``, say, for
  SEIR seeds that are exposed rather than infectious).

Every other node starts in the model's first state (``S``, ``inactive``, ``"0"``). A
continuous model (bounded confidence) starts from ``initial: {"attribute": "opinion"}`` or,
by default, opinions drawn uniformly from [0, 1] (the ``seeds`` stream).

Panel state fields: ``state`` (text: the state's name), ``since`` (the step the node entered
its current state; 0 for the initial state) and, for the models that transmit, ``infected_by``
(the agent id of the neighbour that transmitted the node's latest infection or activation;
null for seeds and for nodes never reached). ``record_infector: false`` leaves ``infected_by``
out (and the action payload's ``by``): a little faster for very large runs. A continuous model
stores ``opinion`` (float) instead.
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pyarrow as pa

from desim.diffusion import link
from desim.diffusion.params import Param, Problems, check_value
from desim.errors import StudyConfigError
from desim.study.contract import EnvironmentProvider
from desim.versions import ENVIRONMENT_FILE, POPULATION_FILE

PARAMS = {
    "seeds": Param("seeds", 0, 0, integer=True, doc="number of seed nodes"),
    "seed_fraction": Param("seed_fraction", 0.0, 0.0, 1.0, doc="share of seed nodes"),
    "seed_nodes": Param("seed_nodes", (), doc="agent ids of the seed nodes"),
    "initial": Param("initial", {}, doc='{"attribute": NAME}: each node\'s initial state'),
    "seed_state": Param("seed_state", "", doc="the state seeds start in"),
    "record_infector": Param("record_infector", True, doc="keep infected_by"),
}
WHERE = "provider.args"


class NetworkState(EnvironmentProvider):
    """The nodes' states for any ``desim.diffusion`` model, and where they start.

    Parameters (at most one of the first four; with none, every node starts in the model's first state):
    ``seeds``, an integer >= 0, that many nodes drawn at random start in the seed state; ``seed_fraction``
    in [0, 1], ``round(seed_fraction * n)`` of them; ``seed_nodes``, a list of agent ids; ``initial``,
    ``{"attribute": NAME}``, each node's initial state (or opinion) from that attribute; ``seed_state``, the
    state seeds start in instead of the model's; ``record_infector`` (default true), keep ``infected_by``.
    A run in which no node starts outside the model's first state (``seeds`` 0: a control run, or a slip)
    says so in its warnings. More in ``help(desim.diffusion.state)``."""

    def __init__(self, **args: Any):
        problems = Problems(ENVIRONMENT_FILE, WHERE)
        for name, v in args.items():
            if name not in PARAMS:
                problems.add(name, f"unknown parameter of desim.diffusion:NetworkState (it takes {', '.join(PARAMS)})")
            elif name in ("seeds", "seed_fraction"):
                message = check_value(PARAMS[name], v)
                if message:
                    problems.add(name, message)
            elif not {"seed_nodes": lambda: isinstance(v, list) and all(isinstance(a, str) for a in v),
                      "initial": lambda: isinstance(v, dict) and set(v) == {"attribute"}
                      and isinstance(v["attribute"], str) and bool(v["attribute"]),
                      "seed_state": lambda: isinstance(v, str) and bool(v),
                      "record_infector": lambda: isinstance(v, bool)}[name]():
                problems.add(name, {"seed_nodes": "must be a list of agent ids",
                                    "initial": 'must be {"attribute": NAME}',
                                    "seed_state": "must name one of the model's states",
                                    "record_infector": "must be true or false"}[name] + f" (got {v!r})")
        if isinstance(args.get("seed_nodes"), list):
            twice = sorted({a for a in args["seed_nodes"] if args["seed_nodes"].count(a) > 1}, key=str)
            if twice:
                problems.add("seed_nodes", f"lists {', '.join(map(repr, twice))} more than once (each seed once)")
        given = [k for k in ("seeds", "seed_fraction", "seed_nodes", "initial") if k in args]
        if len(given) > 1:
            problems.add(given[1], f"give one of seeds, seed_fraction, seed_nodes, initial (got {', '.join(given)})")
        problems.raise_any()
        self.given_args = copy.deepcopy(args)   # what recorded_args gives back (self.args has the defaults)
        self.args = {**{k: p.default for k, p in PARAMS.items()}, **args}
        self.record_infector = bool(self.args["record_infector"])
        self.model = None

    def recorded_args(self) -> dict[str, Any]:
        """The arguments given, for ``desim.Study`` to record: ``self.args`` has every default filled in,
        which the constructor refuses back (more than one of seeds, seed_fraction, seed_nodes, initial)."""
        return copy.deepcopy(self.given_args)

    # --- set-up -------------------------------------------------------------------
    def reset(self, seed: int) -> None:
        self.network = link.network(self.ctx)
        self.n = self.network.n
        self.model = None
        self._ready()

    def _ready(self):
        """Bind to the run's model and lay out the initial states (once the model has reset)."""
        if self.model is not None:
            return self.model
        model = link.model_of(self.ctx)
        if model is None:
            raise StudyConfigError(ENVIRONMENT_FILE, [("provider", "desim.diffusion:NetworkState needs a "
                                                  "desim.diffusion model as simulation.json's decision")])
        self.model = model
        model.record_infector = self.record_infector
        self.continuous = model.CONTINUOUS
        n = self.n
        self.since = np.zeros(n, np.int64)
        self.entered = np.zeros(max(1, len(model.STATES)), np.int64)   # per state, entries this step
        if self.continuous:
            self.opinion = self._initial_opinions()
            return model
        self.labels = model.labels
        self.state = self._initial_states(model)
        model.unseeded = self._unseeded(model)
        self.ever = self.state != 0
        self.infector = np.full(n, -1, np.int64) if (self.record_infector and model.TRANSMITTED) else None
        self._ids = np.array(list(self.ctx.agent_ids) + [None], dtype=object)
        self._id_array = pa.array(self.ctx.agent_ids, pa.string())
        self._label_array = pa.array([str(x) for x in self.labels], pa.string())
        self._transmitted = np.array([model.code[s] for s in model.TRANSMITTED], np.int8)
        return model

    def _seed_positions(self) -> np.ndarray | None:
        a, ctx = self.args, self.ctx
        rng = ctx.streams.numpy("seeds")
        if a["seed_nodes"]:
            unknown = [x for x in a["seed_nodes"] if x not in ctx.index]
            if unknown:
                raise StudyConfigError(ENVIRONMENT_FILE, [(f"{WHERE}.seed_nodes", f"unknown agent id '{unknown[0]}'")])
            return np.unique(np.array([ctx.index[x] for x in a["seed_nodes"]], np.int64))
        k = int(a["seeds"]) if a["seeds"] else int(round(float(a["seed_fraction"]) * self.n))
        if k > self.n:
            raise StudyConfigError(ENVIRONMENT_FILE, [(f"{WHERE}.seeds", f"{k} seeds for {self.n} nodes")])
        if k == 0:
            return None
        return np.sort(rng.choice(self.n, size=k, replace=False))

    def _initial_states(self, model) -> np.ndarray:
        state = np.zeros(self.n, np.int8)
        attr = self.args["initial"].get("attribute") if self.args["initial"] else None
        if attr:
            code = model.code
            for i, p in enumerate(self.ctx.personas):
                v = p.attributes.get(attr)
                if v is None or str(v) not in code:
                    raise StudyConfigError(POPULATION_FILE, [(f"agent '{p.agent_id}'", (
                        f"attribute '{attr}' (the initial state, environment.json {WHERE}.initial) is "
                        f"{v!r}; {type(model).__name__}'s states are {', '.join(model.STATES)}"))])
                state[i] = code[str(v)]
            return state
        seed_state = self.args["seed_state"] or model.SEED_STATE
        if seed_state not in model.code:
            raise StudyConfigError(ENVIRONMENT_FILE, [(f"{WHERE}.seed_state", f"'{seed_state}' is not a state of "
                                                  f"{type(model).__name__} ({', '.join(model.STATES)})")])
        seeds = self._seed_positions()
        if seeds is not None:
            state[seeds] = model.code[seed_state]
        return state

    def _unseeded(self, model) -> str | None:
        """When no node starts outside the model's first state: the setting that made it so and what it gave
        (the model warns after the run if nothing changed in it). Not refused: a run with no seed is a fair
        control (a sweep over seeds 0, 1, 5, ...), but a slip (a seed_fraction that rounds to no node) should
        not pass unsaid."""
        if self.state.any():
            return None
        a, given, first = self.args, self.given_args, model.STATES[0]
        if a["initial"]:
            why = f"{WHERE}.initial: attribute '{a['initial']['attribute']}'"
        elif "seed_nodes" in given:
            why = f"{WHERE}.seed_nodes: the list is empty"
        elif "seed_fraction" in given:
            why = f"{WHERE}.seed_fraction: round({a['seed_fraction']} * {self.n} nodes) is 0 seeds"
        elif "seeds" in given:
            why = f"{WHERE}.seeds: 0 seeds"
        else:
            why = f"{WHERE}: no seeds given (seeds, seed_fraction, seed_nodes or initial)"
        return f"{ENVIRONMENT_FILE}: {why}: every node started in '{first}'"

    def _initial_opinions(self) -> np.ndarray:
        attr = self.args["initial"].get("attribute") if self.args["initial"] else None
        if attr is None:
            return self.ctx.streams.numpy("seeds").random(self.n)
        out = np.empty(self.n, np.float64)
        for i, p in enumerate(self.ctx.personas):
            v = p.attributes.get(attr)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
                raise StudyConfigError(POPULATION_FILE, [(f"agent '{p.agent_id}'", (
                    f"attribute '{attr}' (the initial opinion, environment.json {WHERE}.initial) is {v!r}, "
                    "not a number in [0, 1]"))])
            out[i] = v
        return out

    # --- the step -------------------------------------------------------------------
    def advance_to(self, t: int):
        if self.model is not None:
            self.entered[:] = 0
        return super().advance_to(t)

    def observe_columns(self, idx, t, round_idx):
        self._ready()
        if self.continuous:
            return {"opinion": self.opinion}
        return {"state": self.state}

    def apply_columns(self, idx, actions):
        model = self._ready()
        acted = np.ones(len(idx), bool) if actions.acted is None else np.asarray(actions.acted, bool)
        who = np.asarray(idx)[acted]
        if not len(who):
            return
        t = self.ctx.step
        if self.continuous:
            self.opinion[who] = np.asarray(actions.payload["opinion"], np.float64)[acted]
            self.since[who] = t
            return
        kind = actions.kind
        kinds = [kind] * len(who) if isinstance(kind, str) else np.asarray(kind, dtype=object)[acted]
        try:
            codes = np.fromiter(map(model.kind_code.__getitem__, kinds), np.int8, len(who))
        except KeyError as e:
            raise ValueError(f"desim.diffusion: unknown transition {e.args[0]!r} for "
                             f"{type(model).__name__} (its kinds: {', '.join(model.kind_code)})") from None
        self.state[who] = codes
        self.since[who] = t
        self.ever[who] |= codes != 0
        self.entered += np.bincount(codes, minlength=len(self.entered))
        if self.infector is not None:
            # a transmission records its infector; other changes (a recovery) keep the last one
            hit = np.isin(codes, self._transmitted)
            by = actions.payload.get("by")
            by = np.full(len(who), -1, np.int64) if by is None else np.asarray(by)[acted].astype(np.int64)
            self.infector[who[hit]] = by[hit]

    def state_columns(self):
        self._ready()
        if self.continuous:
            return {"opinion": self.opinion, "since": self.since}
        # text built from codes in C: the labels as a dictionary over the codes, the infector's id taken
        # from the agents' ids (null for nobody), not a Python string per agent per step
        out = {"state": pa.DictionaryArray.from_arrays(pa.array(self.state), self._label_array), "since": self.since}
        if self.infector is not None:
            out["infected_by"] = self._id_array.take(pa.array(self.infector, mask=self.infector < 0))
        return out

    # --- read by the collector -------------------------------------------------------
    def counts(self) -> np.ndarray:
        return np.bincount(self.state, minlength=len(self.labels))
