"""The grid view of a positioned run, one step at a time, for the study page.

A study is *positioned* when its agents' state has numeric ``x`` and ``y`` fields (0-based cells, one agent
per cell; the README, ``desim viz grid``): Schelling, Sugarscape. Their agents are drawn where they are, not
as a network laid out by id. Each request reads one step (``desim.store.states.grid_cells``, a step is a few
row groups of the run's files), so a run of any length draws at once; the colour scale is the whole run's
(numbers compare across steps) and the categories the run's, in the study's colours and order, the same as
the study page's state charts. Dead agents (``alive: false``) are not drawn, by the store's one rule, and the
answer says how many were left out.

The grid's size and its layer follow the report's rules, written once in ``desim.report.grid``:
``grid_size`` (the layer's shape when the study draws one, else the run's parameters ``width`` and
``height``, else the largest coordinate plus one), and ``study_layer`` with ``layer_reader`` (a study's
environment may define ``grid_layer(read, parameters)``, README: Sugarscape's sugar left per cell, replayed
from the panel). What is the dashboard's own: the layer is computed once per finished run and kept for the
next steps, and only when the run is at most ``LAYER_MAX_VALUES`` agent-steps; a longer one is left out with
a note (``desim viz grid`` draws it), since a page waits for its answer.

The layer is study code, so each run's is drawn with the code and data its own version ran with, never with
the study's files as they are now nor with a ``model.py`` this process imported earlier (a study edited while
the dashboard is up, or a run of an older version): the run's ``code`` (``{path: hash}``, as
``desim.versions.code_files`` hashed the folder when it started) is written out of the store's ``code_texts``
into a private folder per version (``desim.store.version_files.version_folder``), and the hook is imported from
there (``desim.report.grid.layer_hook``, through ``study_layer``, as ``desim viz grid`` and reports do). A file
whose text the store did not keep (binary, over ``TEXT_LIMIT``) is taken from the study folder only while it
still has its hash; when the ref's own module cannot be had so, the layer is left out with a note.
"""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

from desim.jsontext import parsed
from desim.dashboard.safety import NotFound
from desim.report.figures import ordered_categories, ramp_colors
from desim.report.grid import NUMERIC_BINS, Layer, grid_size, layer_reader, study_layer
from desim.report.palette import category_colors, declared_colors
from desim.store import Catalogue, StudyLayout, queries, states
from desim.store.health import last_step
from desim.study.files import StudyFile

LAYER_MAX_VALUES = 3_000_000     # agent-steps read to replay a layer (Sugarscape, 500 steps: 200,000)
MANY_CATEGORIES = 12             # past this many, a field's colours repeat: the page says so

_layers: "OrderedDict[tuple, tuple]" = OrderedDict()     # a finished run's layer, every step
_layers_lock = threading.Lock()
LAYERS_KEPT = 4
_facts: "OrderedDict[tuple, tuple]" = OrderedDict()      # a finished run's colouring, extent and size, per state
_facts_lock = threading.Lock()
FACTS_KEPT = 64


def _json(value: Any) -> Any:
    return parsed(value, {})


positioned = states.positioned


def grid_step(root: Path, study: StudyFile | None, run_id: str, state: str, step: int,
              reading: Callable) -> dict[str, Any]:
    """Step ``step`` of a positioned run coloured by ``state``: every living agent's cell and value, the
    colouring (categories in the study's order and colours, or the whole run's numeric range), the counts or
    mean at this step, how many agents were left out as dead, and the layer at this step when there is one."""
    layout = StudyLayout(root)
    with reading(root) as con:
        run = Catalogue(con).run(run_id)
        if run is None:
            raise NotFound(f"no run '{run_id}' in this study")
        last = last_step(layout, run_id, run["last_step"], run["status"])
        finished = run["status"] != "running"
        # a resumed run has more steps: a new key (its range and categories may have grown)
        key = (str(layout.db), run_id, last, state, json.dumps(declared_colors(study, state), sort_keys=True))
        with _facts_lock:
            facts = _facts.get(key) if finished else None
        if facts is None:
            facts = _facts_of(con, run_id, state, study)
            if finished:
                with _facts_lock:
                    _facts[key] = facts
                    while len(_facts) > FACTS_KEPT:
                        _facts.popitem(last=False)
        kind, colouring, extent, n_agents = facts
        step = max(0, min(step, last))
        cells, dead = states.grid_cells(con, run_id, state, step, text=kind != "numeric")
        layer, layer_note = _layer(root, con, run, last, n_agents) if finished else (None, "")
    width, height = grid_size(layer, _json(run.get("parameters")), extent)
    ids = [c[0] for c in cells]
    xs = [int(c[1]) for c in cells]
    ys = [int(c[2]) for c in cells]
    out: dict[str, Any] = {
        "run": {k: run.get(k) for k in ("run_id", "status", "n_steps", "time_unit")}, "state": state,
        "kind": kind, "step": step, "last_step": last, "width": width, "height": height,
        "shown": len(cells), "dead": dead, **colouring, "layer": None, "layer_note": layer_note,
        "agents": {"id": ids, "x": xs, "y": ys}}
    if kind == "numeric":
        values = [c[3] for c in cells]
        out["agents"]["v"] = values
        finite = [v for v in values if v is not None]
        out["mean"] = sum(finite) / len(finite) if finite else None
        out["step_range"] = [min(finite), max(finite)] if finite else None
    else:
        index = {c: i for i, c in enumerate(out["categories"])}
        out["agents"]["v"] = [index.get(c[3], -1) for c in cells]
        counts = {c: 0 for c in out["categories"]}
        for c in cells:
            counts[c[3]] = counts.get(c[3], 0) + 1
        out["counts"] = counts
    if layer is not None:
        k = layer.steps.index(step) if step in layer.steps else None
        values = layer.values
        out["layer"] = {"name": layer.name, "range": [float(values.min()), float(values.max())],
                        "values": None if k is None else values[k].ravel().tolist(),
                        "total": None if k is None else float(values[k].sum()),
                        "version": layer.version}   # whose code drew it: the run's version (None: the study's as it is)
    return out


def _facts_of(con, run_id: str, state: str, study: StudyFile | None) -> tuple[str, dict[str, Any], tuple, int]:
    """What every step of a run's grid shares: how ``state`` is coloured (its kind, and its categories in the
    study's order and colours or the whole run's range), the largest coordinates and the number of agents.
    Each is a scan of the whole run, so a finished run's are kept (``_facts``)."""
    if not positioned(con, run_id):
        raise NotFound(f"run '{run_id}' is not positioned: its agents' state has no numeric 'x' and 'y' "
                       "fields, so there is no grid to draw")
    kind = states.display_kind(con, run_id, state)
    if kind is None:
        raise NotFound(f"run '{run_id}' has no state field '{state}'")
    if kind == "numeric":
        lo, hi = states.value_range(con, run_id, state)
        # the report's grid's ramp, in as many colours as it has bins: a value has one colour in both
        colouring: dict[str, Any] = {"range": [lo, hi], "palette": ramp_colors(NUMERIC_BINS)}
    else:
        declared = declared_colors(study, state)
        cats = ordered_categories(states.categories(con, run_id, state), declared)
        colouring = {"categories": cats, "colors": category_colors(cats, declared), "many": len(cats) > MANY_CATEGORIES}
    return kind, colouring, states.grid_extent(con, run_id), queries.population_size(con, run_id)


def _layer(root: Path, con, run: dict[str, Any], last: int, n_agents: int) -> tuple[Layer | None, str]:
    """The layer of a finished run (``desim.report.grid.study_layer``), computed once and kept, with its note;
    ``(None, note)`` when the study draws none, its code cannot be had, the hook fails, or the run is too long
    to replay here (over ``LAYER_MAX_VALUES`` agent-steps: the dashboard's own cap)."""
    key = (str(StudyLayout(root).db), run["run_id"], last)
    with _layers_lock:
        if key in _layers:
            _layers.move_to_end(key)
            return _layers[key]

    def too_long(ref: str) -> str:
        if n_agents * (last + 1) <= LAYER_MAX_VALUES:
            return ""
        return (f"{ref.split(':')[-1]}'s layer is not drawn here for a run of {n_agents:,} agents x "
                f"{last + 1:,} steps (over {LAYER_MAX_VALUES:,} agent-steps to replay); `desim viz grid` draws it")

    layer, note = study_layer(root, con, run, layer_reader(con, run["run_id"]), declined=too_long)
    if layer is not None:
        with _layers_lock:
            _layers[key] = (layer, note)
            while len(_layers) > LAYERS_KEPT:
                _layers.popitem(last=False)
    return layer, note
