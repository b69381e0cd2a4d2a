"""The grid player: where a positioned study's agents are, coloured by a state field, one frame per step.

The convention (documented in the README): a study is *positioned* when its
agents' state has integer cell fields ``x`` and ``y`` (0-based, one agent per
cell). The grid is ``width`` x ``height`` cells (:func:`grid_size`): the layer's
shape when the study draws one, else the run's parameters of those names, else
the largest coordinate seen plus one. Agents whose state says ``alive: false`` are not drawn (their
rows stay in the panel). A field with at most ``MAX_CATEGORIES`` distinct
values (strings, booleans, small integers such as Schelling's ``type``) is
drawn by category, any other number on a ramp.

A study can add a *layer* under the agents, such as Sugarscape's sugar left:
its environment class defines ``grid_layer(read, parameters)``, where
``read(field)`` returns ``(steps, values[step, agent])`` from the panel (agents in
id order; booleans as ``bool``, numbers as ``float``, else text) and the
result is ``(name, steps, values[step, y, x])``. The layer is derived from the
stored panel, so it needs nothing the store does not hold. It is drawn with the
code and data files the run's own version ran with (:func:`layer_hook`, from
``desim.store.version_files``), not the study's as they are now: an older
version's run, or a run before ``model.py`` or a data file was edited, is drawn
as it ran. The dashboard's grid draws its layer with the same functions
(:func:`layer_reader`, :func:`study_layer`) and sizes its grid with :func:`grid_size`:
the rules are written here once, the dashboard keeps only its cache and its size cap.

Three plain functions: :func:`grid_payload` (the frames as plain data, for a
notebook or the dashboard), :func:`grid_player` (``grid_<state>.html``, an
offline canvas player with the frames embedded as JSON in
``<script type="application/json" id="desim-grid-data">``, and
``grid_<state>.png``, small multiples) and :func:`frames_figure` (chosen
frames as one PNG, for reports). Each frame is one string per grid, one
character per cell (``.`` empty, else the colour code in ``CODES``), row by row.
"""
from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import BoundaryNorm, ListedColormap, Normalize
from matplotlib.lines import Line2D

from desim.jsontext import parsed
from desim.report import data
from desim.report.data import ReportError
from desim.report.figures import PALETTE, file_stem, new_figure, png, ramp_colors, state_key
from desim.report.player import page, panel_steps, static_text
from desim.store import StudyLayout, states
from desim.store.version_files import code_of, version_folder
from desim.records import is_number

MAX_CATEGORIES = 12
NUMERIC_BINS = 32
CODES = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
EMPTY_CELL = "#f2f2f2"
LAYER_LOW, LAYER_HIGH = (1.0, 1.0, 1.0), (0.93, 0.62, 0.05)   # white to sugar orange
ON_LAYER = [c for c in PALETTE if c not in ("#f58518", "#eeca3b", "#ff9da6")]  # agent colours that stand out on it


def read_states(con, run_id: str, field: str) -> tuple[list[int], list[str], list[list[Any]]]:
    """``field`` of every agent at every step (initial states as step 0): steps, agent ids, values[step][agent].

    A field the run does not have reads as null, like a dead agent's."""
    rows = states.frames(con, run_id, field)
    if not rows:
        raise ReportError(f"run {run_id}: no panel rows")
    return [r[0] for r in rows], rows[0][2], [r[1] for r in rows]


def typed_values(rows: list[list[Any]]) -> np.ndarray:
    """Values per step and agent (as DuckDB types them) as the ``grid_layer`` contract gives them: booleans as
    ``bool`` (none: ``False``), numbers as ``float`` (none: NaN), anything else as text (none: ``"null"``)."""
    flat = [v for row in rows for v in row if v is not None]
    if flat and all(isinstance(v, bool) for v in flat):
        return np.array([[bool(v) for v in row] for row in rows], dtype=bool)
    if all(is_number(v) for v in flat):
        return np.array([[np.nan if v is None else float(v) for v in row] for row in rows], dtype=float)
    return np.array([["null" if v is None else str(v) for v in row] for row in rows], dtype=object)


def layer_reader(con, run_id: str) -> Callable[[str], tuple[list[int], np.ndarray]]:
    """The ``read(field)`` a study's ``grid_layer`` is handed: ``(steps, values[step, agent])`` of every agent
    (dead ones too: a layer replays what every agent did), agents in id order, typed by :func:`typed_values`.
    Each field is read once and kept, since the grid reads ``x`` and ``y`` too. A field the run does not have
    is a DuckDB error, which costs the layer with a note (:func:`study_layer`), not the grid."""
    cache: dict[str, tuple[list[int], np.ndarray]] = {}

    def read(field: str) -> tuple[list[int], np.ndarray]:
        if field not in cache:
            steps, rows = states.typed_frames(con, run_id, field)
            cache[field] = (steps, typed_values(rows))
        return cache[field]
    return read


def is_positioned(con, run_id: str) -> bool:
    """The run's agents have numeric ``x`` and ``y`` state fields (``desim.store.states.positioned``)."""
    return states.positioned(con, run_id)


def layer_hook(root: Path, con, run: dict[str, Any], ref: str) -> tuple[Callable | None, str | None, Callable, str]:
    """``(grid_layer, version, shown_as, note)`` for ``ref`` as the run's version had it. A ref into the
    study's own files (``model:Landscape``) is imported from ``desim.store.version_files.version_folder``, so a
    study edited since, or a run of an older version, is drawn with the run's own code and data (``version`` is
    then the run's version id); a ref into an installed package (no study file of that name in the run's code)
    is imported as installed. ``shown_as`` writes the private folder in a message as the study's name.
    ``grid_layer`` is None when the class draws no layer, or (with a note) when its code cannot be had or
    imported. The report's grid and the dashboard's both draw their layer with it."""
    from desim.study.refs import resolve
    module = ref.partition(":")[0]
    code = code_of(con, run)
    version = run.get("version_id")
    if not code:        # a run recorded before desim kept its code: the study's files as they are now
        where, version, note = Path(root), None, "layer drawn with the study's code as it is now: the run recorded none"
    elif "." in module or f"{module}.py" not in code:
        where, version, note = Path(root), None, ""
    else:
        where, missing = version_folder(con, Path(root), code)
        if f"{module}.py" in missing:
            return None, version, str, (
                f"the layer of {ref} is not drawn: {module}.py as this run's version ({version}) had it was not "
                f"kept in the store, and the study's {module}.py has changed since (other code would draw "
                f"another layer)")
        note = (f"drawn without {', '.join(missing)}: this run's version of {'them' if len(missing) > 1 else 'it'} "
                f"was not kept in the store, and the study's copy has changed since" if missing else "")
    label = f"{Path(root).name} (version {version})" if version else Path(root).name

    def shown_as(text: str) -> str:
        return text.replace(str(where), label) if where != Path(root) else text
    try:
        hook = getattr(resolve(ref, where), "grid_layer", None)
    except Exception as e:  # noqa: BLE001 - a study that cannot be imported costs the layer, not the grid
        return None, version, shown_as, shown_as(f"the layer of {ref} could not be drawn: {type(e).__name__}: {e}")
    return hook, version, shown_as, (note if hook is not None else "")


class Layer(NamedTuple):
    """What a study's ``grid_layer`` drew: its name, the steps it covers, ``values[step, y, x]``, and whose code
    drew it (the run's version id; None: the study's code as it is now)."""
    name: str
    steps: list[int]
    values: np.ndarray
    version: str | None


def study_layer(root: Path, con, run: dict[str, Any], read: Callable,
                declined: Callable[[str], str] | None = None) -> tuple[Layer | None, str]:
    """The run's layer drawn by its environment's ``grid_layer`` with the run's own version's code
    (:func:`layer_hook`), and a note when it could not be drawn or was drawn without a file; ``(None, "")``
    when the environment draws none. The report's grid and the dashboard's both draw their layer here.

    ``declined(ref)`` is a caller's reason not to replay the layer (the dashboard's cap on a long run), asked
    only once the study is known to draw one: a note to give instead, or ``""`` to draw it. A run whose
    recorded configuration has no environment ref (``null`` anywhere on the way) has no layer."""
    config = parsed(run.get("config"), {})
    ref = ((config.get("environment") or {}).get("provider") or {}).get("ref")
    if not ref:
        return None, ""
    hook, version, shown_as, note = layer_hook(Path(root), con, run, ref)
    if hook is None:
        return None, note
    refused = declined(ref) if declined else ""
    if refused:
        return None, refused
    try:
        name, steps, values = hook(read, parsed(run.get("parameters"), {}))
        return Layer(str(name), [int(s) for s in steps], np.asarray(values, dtype=float), version), note
    except Exception as e:  # noqa: BLE001 - a study's hook failing costs the layer, not the grid
        failed = shown_as(f"the layer of {ref} could not be drawn: {type(e).__name__}: {e}")
        return None, f"{failed}; {note}" if note else failed


def grid_size(layer: Layer | None, parameters: dict[str, Any],
              largest: tuple[int | None, int | None]) -> tuple[int, int]:
    """``(width, height)`` of a positioned run's grid: the layer's shape when the study draws one (its cells are
    the grid), else the run's integer parameters ``width`` and ``height``, else the ``largest`` ``x`` and
    ``y`` any agent has, plus one (None: no position, one cell)."""
    if layer is not None:
        height, width = layer.values.shape[1:]
        return int(width), int(height)
    if isinstance(parameters.get("width"), int) and isinstance(parameters.get("height"), int):
        return parameters["width"], parameters["height"]
    return (largest[0] or 0) + 1, (largest[1] or 0) + 1


def grid_payload(study_root: str | Path, state: str, run_id: str | None = None) -> dict[str, Any]:
    """The frames of a positioned run as plain data (see the module docstring for the encoding)."""
    with data.connect(study_root) as con:
        run = data.recorded_run(con, run_id, study_root)
        rid = run["run_id"]
        if not is_positioned(con, rid):
            raise ReportError(f"run {rid}: the agents' state has no numeric 'x' and 'y' fields, "
                              "so there is no grid to draw")
        kind = data.field_kind(con, rid, state)      # refuses a field the panel does not have
        steps, ids, alive = read_states(con, rid, states.ALIVE)
        read = layer_reader(con, rid)
        xs, ys = read(states.X)[1], read(states.Y)[1]
        if kind == "numeric":
            colour = read(state)[1]
        else:       # text and booleans as the panel's text, as the dashboard's grid names them (none: "null")
            colour = np.array([["null" if v is None else v for v in row] for row in read_states(con, rid, state)[2]],
                              dtype=object)
        # the store's rule (desim.store.states): an agent is dead where its alive is false; null is not dead
        hidden = np.array([[v == "false" for v in row] for row in alive], bool)
        layer, note = study_layer(Path(study_root), con, run, read)
    width, height = grid_size(layer, parsed(run.get("parameters"), {}), (int(np.nanmax(xs)), int(np.nanmax(ys))))
    # categories and ranges of the agents drawn, not of the dead
    colour = np.where(hidden, None, colour) if colour.dtype == object else np.where(hidden, np.nan, colour)
    colouring, codes = _encode(colour, ON_LAYER if layer is not None else PALETTE)
    scales = numeric_scales(colour) if colouring["kind"] == "numeric" else {}

    def cells_of(k: int, shown: np.ndarray, codes: list[list[int]]) -> str:
        cells = ["."] * (width * height)
        for i in np.flatnonzero(shown):
            x, y = int(xs[k, i]), int(ys[k, i])
            if 0 <= x < width and 0 <= y < height:
                cells[y * width + x] = CODES[codes[k][i]]
        return "".join(cells)

    frames = []
    for k, step in enumerate(steps):
        counts: dict[str, int] = {}
        shown = ~hidden[k] & ~np.isnan(xs[k]) & ~np.isnan(ys[k])
        cells = cells_of(k, shown, codes)
        if colouring["kind"] == "categorical":
            for c in np.asarray(colour[k])[shown]:
                counts[_label(c)] = counts.get(_label(c), 0) + 1
        frame = {"step": int(step), "cells": cells, "agents": int(shown.sum())}
        if colouring["kind"] == "categorical":
            frame["counts"] = {c: counts.get(c, 0) for c in colouring["categories"]}
        else:
            vals = np.asarray(colour[k], float)[shown]
            frame["mean"] = float(np.nanmean(vals)) if len(vals) else None
            frame["scaled"] = {name: cells_of(k, shown, sc["codes"]) for name, sc in scales.items()}
        frames.append(frame)
    if scales:      # the frames carry the cells; the page needs each scale's name and ranges
        colouring["scales"] = {"run": {"label": "whole run", "ranges": [colouring["range"]]},
                               **{n: {"label": sc["label"], "ranges": sc["ranges"]} for n, sc in scales.items()}}
    payload = {"study": run["study_id"], "run_id": rid, "field": state, "time_unit": run["time_unit"],
               "width": width, "height": height, "n_agents": len(ids), "note": note, **colouring,
               "frames": frames, "layer": None}
    if layer is not None:       # with whose code drew it: the run's version (None: the study's as it is)
        payload["layer"] = {**_encode_layer(layer.name, layer.steps, layer.values, steps), "version": layer.version}
    return payload


def _label(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _encode(values: np.ndarray, palette: list[str]) -> tuple[dict[str, Any], list[list[int]]]:
    """Colour codes per step per agent, and how to read them (categories or a numeric range)."""
    if values.dtype == object:
        distinct = sorted({_label(v) for v in values.ravel() if v is not None})
    else:
        finite = values[~np.isnan(values)]
        whole = bool(np.all(finite == np.round(finite)))
        distinct = sorted({_label(float(v)) for v in np.unique(finite)}, key=float) if whole else []
    if values.dtype == object or 0 < len(distinct) <= MAX_CATEGORIES:
        code = {c: i for i, c in enumerate(distinct)}
        codes = [[0 if v is None or (isinstance(v, float) and np.isnan(v)) else code[_label(v)] for v in row]
                 for row in values]
        colours = [palette[i % len(palette)] for i in range(len(distinct))]
        return {"kind": "categorical", "categories": distinct, "palette": colours}, codes
    lo, hi = float(np.nanmin(values)), float(np.nanmax(values))
    return ({"kind": "numeric", "range": [lo, hi], "palette": ramp_colors(NUMERIC_BINS)},
            _bins(values, lo, hi).tolist())


def _bins(values: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Each value's bin of ``NUMERIC_BINS`` equal bins from ``lo`` to ``hi`` (a missing value: bin 0)."""
    span = (hi - lo) or 1.0
    return np.clip(((np.nan_to_num(values, nan=lo) - lo) / span * NUMERIC_BINS).astype(int), 0, NUMERIC_BINS - 1)


def numeric_scales(values: np.ndarray) -> dict[str, Any]:
    """The other colour scales of a numeric field, beside the whole run's linear one: ``frame`` (each
    frame's own minimum to maximum, so a quantity that grows tenfold still shows its spread in the first
    frames) and, for a field that is never negative, ``log`` (the whole run's range on log(1 + value)).

    ``{name: {"label", "codes": values[step][agent] bins, "ranges": [[lo, hi]] per step or one}}``."""
    out: dict[str, Any] = {}
    per_step = [(float(np.nanmin(row)), float(np.nanmax(row))) if np.isfinite(row).any() else (0.0, 0.0)
                for row in values]
    out["frame"] = {"label": "this frame's range", "ranges": [list(r) for r in per_step],
                    "codes": [_bins(row, lo, hi).tolist() for row, (lo, hi) in zip(values, per_step)]}
    lo, hi = float(np.nanmin(values)), float(np.nanmax(values))
    if lo >= 0:
        logged = np.log1p(values)
        out["log"] = {"label": "whole run, log scale", "ranges": [[lo, hi]],
                      "codes": _bins(logged, float(np.log1p(lo)), float(np.log1p(hi))).tolist()}
    return out


def _encode_layer(name: str, steps: list[int], values: np.ndarray, frame_steps: list[int]) -> dict[str, Any]:
    """One character per cell per frame: the value itself when it is a whole number below ``len(CODES)``,
    else one of ``NUMERIC_BINS`` bins."""
    by_step = {s: values[i] for i, s in enumerate(steps)}
    lo, hi = float(np.min(values)), float(np.max(values))
    whole = bool(np.all(values == np.round(values))) and lo >= 0 and hi < len(CODES)
    levels = int(hi) + 1 if whole else NUMERIC_BINS
    frames = []
    for s in frame_steps:
        grid = by_step.get(s)
        if grid is None:
            frames.append(None)
            continue
        idx = grid.astype(int) if whole else np.clip(((grid - lo) / ((hi - lo) or 1.0) * levels).astype(int),
                                                      0, levels - 1)
        frames.append({"cells": "".join(CODES[v] for v in idx.ravel()), "total": float(grid.sum())})
    palette = [_hex(_layer_rgb(i / max(1, levels - 1))) for i in range(levels)]
    return {"name": name, "range": [lo, hi], "levels": levels, "whole": whole, "palette": palette, "frames": frames}


def _layer_rgb(t: float) -> tuple[float, float, float]:
    return tuple(a + (b - a) * t for a, b in zip(LAYER_LOW, LAYER_HIGH))


def _hex(rgb) -> str:
    return "#{:02x}{:02x}{:02x}".format(*(int(round(255 * c)) for c in rgb[:3]))


def _rgb(code: str) -> tuple[float, float, float]:
    return tuple(int(code[i:i + 2], 16) / 255 for i in (1, 3, 5))


def frame_image(payload: dict, k: int, agents: bool = True, layer: bool = True) -> np.ndarray:
    """Frame ``k`` as an RGB array ``[y, x]``: the layer (or empty grey), agents' cells on top."""
    w, h = payload["width"], payload["height"]
    img = np.empty((h * w, 3))
    img[:] = _rgb(EMPTY_CELL) if not (layer and payload["layer"]) else (1.0, 1.0, 1.0)
    lay = payload["layer"]["frames"][k] if layer and payload["layer"] else None
    if lay:
        colours = np.array([_rgb(c) for c in payload["layer"]["palette"]])
        img[:] = colours[[CODES.index(c) for c in lay["cells"]]]
    if agents:
        colours = np.array([_rgb(c) for c in payload["palette"]])
        cells = payload["frames"][k]["cells"]
        at = [i for i, c in enumerate(cells) if c != "."]
        img[at] = colours[[CODES.index(cells[i]) for i in at]]
    return img.reshape(h, w, 3)


def _frame_title(payload: dict, k: int, named: bool = True) -> str:
    f = payload["frames"][k]
    label = "initial" if f["step"] == 0 else f"{payload['time_unit']} {f['step']}"
    if payload["kind"] == "categorical":
        field = f"{payload['field']} " if named else ""
        return label + "\n" + ", ".join(f"{field}{c}: {n}" for c, n in f["counts"].items())
    field = f"{payload['field']} " if named else ""
    return label + (f"\nmean {field}{f['mean']:.3g}" if f.get("mean") is not None else "")


def frames_figure(payload: dict, which: list[int], title: str | None = None) -> bytes:
    """The frames at positions ``which`` side by side (agents over the layer); with a layer, a second row
    shows the layer alone, so what the agents cover can be read too.

    Each row says what it shows at its left ("agents, coloured by their 'sugar'"; "sugar left per cell of
    the landscape") and has its own key: a numeric state's colour bar beside the agents' row, the layer's
    beside the layer's row, each labelled with its quantity, so the agents' wealth and the sugar on the land
    (the same word in Sugarscape) are not confused; categories in a legend underneath."""
    layer = payload["layer"]
    rows = 2 if layer else 1
    cols = len(which)
    numeric = payload["kind"] == "numeric"
    fig = new_figure(figsize=(3.6 * cols + 1.6, 3.1 * rows + 0.9))
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    for j, k in enumerate(which):
        axes[0][j].imshow(frame_image(payload, k), interpolation="nearest")
        axes[0][j].set_title(_frame_title(payload, k), fontsize=8)
        if rows == 2:
            lay = layer["frames"][k]
            axes[1][j].imshow(frame_image(payload, k, agents=False), interpolation="nearest")
            axes[1][j].set_title(f"{_frame_title(payload, k).splitlines()[0]}\n{layer['name']}"
                                 + (f": {lay['total']:,.0f} in all" if lay else ""), fontsize=8)
    field = payload["field"]
    axes[0][0].set_ylabel(f"agents, coloured by\ntheir '{field}'", fontsize=9)
    if rows == 2:
        axes[1][0].set_ylabel(f"{layer['name']} per cell\nof the landscape", fontsize=9)
    size = f"the {payload['width']}x{payload['height']} grid"
    fig.suptitle(title or (f"{payload['study']}, run {payload['run_id']}: {size}"
                           + (f"\ntop: the agents, coloured by their '{field}'; bottom: the {layer['name']} per cell"
                              if layer else f", agents coloured by their '{field}'")), fontsize=10)
    handles = []
    if payload["kind"] == "categorical":
        handles = [Line2D([], [], marker="s", linestyle="", color=c, label=f"{field} {n}")
                   for n, c in zip(payload["categories"], payload["palette"])]
    if not layer:
        handles.append(Line2D([], [], marker="s", linestyle="", color=EMPTY_CELL, label="empty cell"))
    if handles:
        fig.legend(handles=handles, loc="lower center", ncol=min(6, len(handles)), fontsize=8, frameon=False)
    keyed = numeric or bool(layer)
    # the colour bars get a strip of their own at the right, laid out after the maps (made before
    # tight_layout, a bar was drawn over the last map)
    fig.tight_layout(rect=(0, 0.06 if handles else 0.01, 0.84 if keyed else 1, 1),
                     h_pad=2.5)
    if numeric:
        lo, hi = payload["range"]
        sm = ScalarMappable(cmap=colormaps["viridis"], norm=Normalize(lo, hi))
        bar = fig.colorbar(sm, cax=_row_key(fig, axes[0]))
        bar.set_label(f"agent's '{field}'\n(one scale for all frames)", fontsize=8)
        bar.ax.tick_params(labelsize=7.5)
    if layer:
        _layer_key(fig, _row_key(fig, axes[1]), layer)
    return png(fig)


def _row_key(fig, row) -> Any:
    """An axes for a colour bar at the right of a row of maps, as tall as the maps."""
    last = row[-1].get_position()
    return fig.add_axes((last.x1 + 0.03, last.y0 + 0.1 * last.height, 0.015, 0.8 * last.height))


def _layer_key(fig, cax, layer: dict) -> None:
    """The layer's colour bar in its own colours (white to orange): one block per level when its values are
    whole numbers (Sugarscape's sugar 0 to 4), labelled with the layer's name."""
    lo, hi = layer["range"]
    cmap = ListedColormap(layer["palette"])
    if layer["whole"]:
        norm = BoundaryNorm([v - 0.5 for v in range(layer["levels"] + 1)], cmap.N)
        ticks = list(range(int(lo), layer["levels"]))
    else:
        norm = Normalize(lo, hi)
        ticks = None
    bar = fig.colorbar(ScalarMappable(cmap=cmap, norm=norm), cax=cax, ticks=ticks)
    bar.set_label(f"{layer['name']} per cell", fontsize=8)
    bar.ax.tick_params(labelsize=7.5)
    bar.minorticks_off()
    bar.outline.set_edgecolor("0.6")


def small_multiples(payload: dict, max_panels: int = 12) -> bytes:
    chosen = panel_steps(len(payload["frames"]), max_panels)
    cols = min(4, len(chosen))
    rows = -(-len(chosen) // cols)
    fig = new_figure(figsize=(3 * cols, 3.1 * rows + 0.9))
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat:
        ax.set_axis_off()
    for ax, k in zip(axes.flat, chosen):
        ax.imshow(frame_image(payload, k), interpolation="nearest")
        ax.set_title(_frame_title(payload, k, named=False), fontsize=7)
    title = f"{payload['study']}: '{payload['field']}' on the grid, run {payload['run_id']}"
    if payload["layer"]:
        title += f" (background: {payload['layer']['name']}, white = {payload['layer']['range'][0]:g})"
    fig.suptitle(title, fontsize=10)
    state_key(fig, axes, payload, "s", [f"{payload['field']} {n}" for n in payload.get("categories", [])])
    return png(fig)


def grid_player(study_root: str | Path, state: str, run_id: str | None = None,
                out_dir: str | Path | None = None, max_panels: int = 12) -> dict[str, Path]:
    """Write ``grid_<state>.html`` (the player) and ``grid_<state>.png`` (small multiples); their paths."""
    payload = grid_payload(study_root, state, run_id)
    out = Path(out_dir) if out_dir else StudyLayout(study_root).report_dir(payload["run_id"])
    out.mkdir(parents=True, exist_ok=True)
    html_path = out / f"grid_{file_stem(state)}.html"
    html_path.write_text(player_html(payload), encoding="utf-8")
    png_path = out / f"grid_{file_stem(state)}.png"
    png_path.write_bytes(small_multiples(payload, max_panels))
    return {"html": html_path, "png": png_path, "dir": out}


PLAYER_JS = static_text("grid_player.js")


def _legend_html(payload: dict) -> str:
    if payload["kind"] == "categorical":
        keys = [f'<span class="key"><i style="background:{c}"></i>{escape(payload["field"])} {escape(n)}</span>'
                for n, c in zip(payload["categories"], payload["palette"])]
    else:
        lo, hi = payload["range"]
        keys = [f'<span class="key">{escape(payload["field"])} <span id="scale-lo">{lo:.3g}</span> <b class="ramp" '
                f'style="background:linear-gradient(to right, {", ".join(payload["palette"])})"></b> '
                f'<span id="scale-hi">{hi:.3g}</span></span>']
        if payload.get("scales"):
            options = "".join(f'<option value="{escape(name)}">{escape(sc["label"])}</option>'
                              for name, sc in payload["scales"].items())
            keys.append(f'<label class="key">colour scale <select id="scale">{options}</select></label>')
    if payload["layer"]:
        lay = payload["layer"]
        keys.append(f'<span class="key">{escape(lay["name"])} {lay["range"][0]:g} <b class="ramp" style="background:'
                    f'linear-gradient(to right, {lay["palette"][0]}, {lay["palette"][-1]})"></b> '
                    f'{lay["range"][1]:g}</span>')
    return " ".join(keys)


def player_html(payload: dict) -> str:
    return page(payload, title=f"{payload['study']}: {payload['field']} on the grid (run {payload['run_id']})",
                data_id="desim-grid-data", canvas_id="grid", legend=_legend_html(payload), script=PLAYER_JS,
                caption=f"{payload['width']} x {payload['height']} cells; y = 0 is the top row. One frame per step; "
                        "agents not alive are not drawn." + (
                            " Colour scale: the whole run's range (frames compare), each frame's own range (the "
                            "spread within a frame), or log(1 + value) over the whole run (a quantity that grows "
                            "tenfold)." if payload.get("scales") else ""),
                css="canvas { image-rendering: pixelated; }\n"
                    ".ramp { display: inline-block; width: 120px; height: 0.8em; vertical-align: middle; "
                    "border: 1px solid #ccc; }\n")
