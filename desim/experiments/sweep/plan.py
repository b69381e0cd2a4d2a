"""A sweep's plan: every combination of the grid times every replicate, each
with its own run id and derived seed.

A run's seed depends only on the study seed, the run's full parameter values
(the study's defaults with the combination applied) and the replicate index,
never on the sweep id or the order of the grid. So the same sweep run twice
(or a sweep whose grid overlaps an earlier one) gives the same seeds, hence the
same panels, and ``--set density=0.8`` gives the same seed as leaving the
default 0.8 alone.
"""
from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from desim.errors import StudyError
from desim.experiments.sweep.checks import refuse_unrunnable
from desim.study.files import load_study
from desim.study.params import typed_value
from desim.study.rng import derive_seed
from desim.versions import SIMULATION_FILE


class SweepError(StudyError, ValueError):
    """A sweep cannot be planned or resumed; the message says which argument or file is wrong."""


@dataclass(frozen=True)
class PlannedRun:
    """One combination x replicate: what a worker needs to run it, and where it belongs."""

    run_id: str
    combo_idx: int
    replicate: int
    combo: dict[str, Any]
    parameters: dict[str, Any]
    seed: int


@dataclass
class SweepPlan:
    sweep_id: str
    study_id: str
    base_seed: int
    grid: dict[str, list[Any]]
    replicates: int
    n_steps: int | None
    runs: list[PlannedRun] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "SweepPlan":
        data = json.loads(text)
        runs = [PlannedRun(**r) for r in data.pop("runs")]
        return cls(runs=runs, **data)

    def combos(self) -> list[dict[str, Any]]:
        """The grid's combinations in plan order (index = ``combo_idx``)."""
        seen: dict[int, dict[str, Any]] = {}
        for r in self.runs:
            seen.setdefault(r.combo_idx, r.combo)
        return [seen[i] for i in sorted(seen)]


def new_sweep_id() -> str:
    return f"sw{uuid.uuid4().hex[:8]}"


def parse_grid(sets: dict[str, str]) -> dict[str, list[str]]:
    """``{"homophily": "0.3,0.4"}`` (from ``--set``) into ``{"homophily": ["0.3", "0.4"]}``."""
    grid = {}
    for name, text in sets.items():
        values = [v.strip() for v in text.split(",")]
        if not values or any(v == "" for v in values):
            raise SweepError(f"--set {name}={text}: expected comma-separated values, e.g. {name}=0.3,0.4")
        grid[name] = values
    return grid


def plain(value: Any) -> Any:
    """A numpy scalar (or 0-d array) as the Python value of the same kind (``np.int64(3)`` is 3,
    ``np.float64`` a float, ``np.bool_`` a bool, ``np.str_`` a str); any other value as it is. JSON, which
    records a run's parameters and derives its seed, knows only the Python ones."""
    if getattr(value, "shape", None) == () and callable(getattr(value, "item", None)):
        return value.item()
    return value


def param_value(name: str, value: Any, declared: Any) -> Any:
    """``value`` as parameter ``name`` takes it (:func:`desim.study.params.typed_value`, the one rule for a
    parameter's type); a ``ValueError`` names the parameter."""
    try:
        return typed_value(plain(value), declared)
    except ValueError as e:
        raise ValueError(f"--set {name}: {e}") from None


def grid_values(name: str, values: Any) -> list[Any]:
    """The values a grid gives parameter ``name``: a list, a tuple, a 1-D numpy array (``np.linspace``) or
    any other ordered collection of values. A single value is refused, as scikit-learn's grids refuse it: a
    grid lists the values to run, and one value would be a grid of one only by a guess (``"0.2,0.3"``, the
    command line's text, would be another); so are a 2-D array, nested lists, a set (it has no order, and
    the plan's order is the runs' ids) and a dict."""
    ndim = getattr(values, "ndim", None)
    if isinstance(values, (str, bytes, Mapping)) or ndim == 0 or not isinstance(values, Iterable):
        shown = repr(plain(values))
        raise SweepError(f"grid[{name!r}]: {shown} is one value, not a list of values: give a list, "
                         f"e.g. [{shown}] for a grid of one value")
    if isinstance(values, (set, frozenset)):
        raise SweepError(f"grid[{name!r}]: a set has no order, and the plan's order names the runs: give a "
                         "list, e.g. sorted(values)")
    if ndim is not None and ndim > 1:
        raise SweepError(f"grid[{name!r}]: a {ndim}-D array of shape {tuple(values.shape)}: give a 1-D list "
                         "of values")
    out = list(values.tolist() if callable(getattr(values, "tolist", None)) else values)
    for v in out:
        if isinstance(v, (list, tuple, set, Mapping)) or getattr(v, "ndim", 0):
            raise SweepError(f"grid[{name!r}]: the value {v!r} is itself a list: give a 1-D list of values")
    return out


def seed_for(base_seed: int, parameters: dict[str, Any], replicate: int) -> int:
    """The seed of one replicate of one parameter setting (see the module docstring)."""
    return derive_seed(base_seed, json.dumps(parameters, sort_keys=True), replicate)


def make_plan(study_root: str | Path, grid: dict[str, list[Any]], replicates: int, *,
              seed: int | None = None, steps: int | None = None, sweep_id: str | None = None) -> SweepPlan:
    """Validate the grid against the study's declared parameters, check that ``desim run`` would take every
    combination (a value only the study's code refuses fails here, not as a run), and lay out every run."""
    if replicates < 1:
        raise SweepError(f"replicates must be at least 1, got {replicates}")
    if not isinstance(grid, Mapping):
        raise SweepError(f"the grid is a {type(grid).__name__}: give a dict of parameter name to a list of values, "
                         "e.g. {'epsilon': [0.2, 0.3]}")
    if not grid and replicates < 2:     # no grid: replicates of the study's own values
        raise SweepError("the grid is empty and there is one replicate: give --set name=v1,v2,... or "
                         "--replicates N (N >= 2) for replicates of the study's values (one run is desim run)")
    spec = load_study(study_root, steps=steps, seed=seed)
    declared = spec.simulation.parameters
    sim_file = Path(study_root) / SIMULATION_FILE
    typed: dict[str, list[Any]] = {}
    for name, values in grid.items():
        if name not in declared:
            raise SweepError(f"--set {name}: {sim_file} declares no parameter '{name}' "
                             f"(declared: {', '.join(sorted(declared)) or 'none'})")
        values = grid_values(name, values)
        if not values:
            raise SweepError(f"--set {name}: no values")
        try:
            typed[name] = [param_value(name, v, declared[name]) for v in values]
        except ValueError as e:
            raise SweepError(str(e)) from None
        if len(set(map(repr, typed[name]))) != len(typed[name]):
            raise SweepError(f"--set {name}: a value is repeated in {values}")
    names = list(typed)
    base_seed = spec.simulation.seed
    for values in itertools.product(*(typed[n] for n in names)):
        combo = dict(zip(names, values))
        # set up as its first replicate will be, with that replicate's seed
        first = seed_for(base_seed, {**declared, **combo}, 0)
        refuse_unrunnable(load_study(study_root, steps=steps, seed=first, params=combo), SweepError,
                          "--set " + ", ".join(f"{k}={v}" for k, v in combo.items()))
    sweep_id = sweep_id or new_sweep_id()
    runs = []
    for combo_idx, values in enumerate(itertools.product(*(typed[n] for n in names))):
        combo = dict(zip(names, values))
        parameters = {**declared, **combo}
        for rep in range(replicates):
            runs.append(PlannedRun(run_id=f"{sweep_id}-{combo_idx}-{rep}", combo_idx=combo_idx, replicate=rep,
                                   combo=combo, parameters=parameters,
                                   seed=seed_for(base_seed, parameters, rep)))
    return SweepPlan(sweep_id=sweep_id, study_id=spec.id, base_seed=base_seed, grid=typed,
                     replicates=replicates, n_steps=steps, runs=runs)
