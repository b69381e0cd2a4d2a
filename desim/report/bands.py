"""Curves over replicates with bands, for the sweep and effect reports, with an analytic reference line
where the model has one (``desim.report.final_size``).

A group is a set of runs that differ only by their seed (a sweep's combination, an effect's
controls or treatments). Per group and step: the mean over its runs, and a band holding the middle
90 % of them (5th to 95th percentile; no band for fewer than 3 runs). The reference, where valid, is a
dashed horizontal line in the group's colour at the configuration-model final size, computed on each
run's own network and seeds and averaged over the group's runs; where it is not valid, the caption
says why, and no line is drawn.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import matplotlib.axes
import matplotlib.figure
import numpy as np
from matplotlib.ticker import MaxNLocator

from desim.jsontext import parsed
from desim.report import data, figures
from desim.report.final_size import reference
from desim.store import Catalogue, network_reads, queries

REFERENCE_METRIC = "cumulative_incidence"   # the share ever infected: what the final size is the limit of
BAND = (0.05, 0.95)
MIN_BAND_RUNS = 3
FIGURE_HEIGHT = 4.4       # inches: 900 x 440 px


def series(study_root: str | Path, groups: dict[str, list[str]], metrics: list[str]) -> dict[str, dict[str, Any]]:
    """``{metric: {group: {"steps": [...], "values": array (runs, steps), "runs": [run ids]}}}`` of the
    groups' completed runs (a run missing a step holds NaN there).

    A run that ended with its process (``stop_when``, ``ctx.end_run``) holds its last values for the group's
    later steps, the rule ``compare`` and effects pair by: an epidemic that died out at step 28 still has its
    final size at step 30. Left out, the mean of the later steps would be over the runs that happened to last,
    and a curve of a quantity no run lowers could fall."""
    run_ids = [r for members in groups.values() for r in members]
    with data.connect(study_root) as con:
        rows = queries.metric_rows(con, run_ids) if run_ids else []
        ended = queries.held_from(con, run_ids) if run_ids else {}
    by: dict[tuple[str, str], dict[int, float]] = {}
    for run_id, name, step, value in rows:
        if name in metrics:
            by.setdefault((name, run_id), {})[step] = value
    out: dict[str, dict[str, Any]] = {}
    for metric in metrics:
        for label, members in groups.items():
            have = [r for r in members if (metric, r) in by]
            if not have:
                continue
            steps = sorted({s for r in have for s in by[(metric, r)]})
            values = np.array([[by[(metric, r)].get(s, np.nan) if by[(metric, r)].get(s) is not None else np.nan
                                for s in steps] for r in have], dtype=float)
            held = 0
            for i, r in enumerate(have):
                if r in ended and ended[r] in by[(metric, r)] and ended[r] < steps[-1]:
                    values[i, np.asarray(steps) > ended[r]] = values[i, steps.index(ended[r])]
                    held += 1
            out.setdefault(metric, {})[label] = {"steps": steps, "values": values, "runs": have, "held": held}
    return out


def effect_series(study_root: str | Path, effect_id: str, metrics: list[str]) -> dict[str, dict[str, Any]]:
    """:func:`series` of an effect's completed pairs, ``{metric: {"control": ..., "treatment": ...}}``, one row
    of ``values`` a pair (by replicate).

    Made of the rows the effect's differences are made of (``queries.effect_metric_pairs``: the paired
    macros, every ended run held at its last values up to the effect's longest run), not of each arm on its
    own: a treatment whose runs all ended early is held out to the effect's last step as the pairs are, so the
    curves reach every step the difference figure and table do, and at every step the treatment's mean minus
    the control's is the mean difference (where no value is NaN)."""
    with data.connect(study_root) as con:
        rows = queries.effect_metric_pairs(con, effect_id)
        runs = sorted({r for row in rows for r in (row[3], row[5])})
        ended = queries.held_from(con, runs) if runs else {}
    by: dict[str, dict[str, Any]] = {}
    for name, step, replicate, treatment, t, control, c in rows:
        if name not in metrics:
            continue
        got = by.setdefault(name, {"steps": set(), "pairs": {}})
        got["steps"].add(step)
        pair = got["pairs"].setdefault(replicate, {"control": control, "treatment": treatment, "values": {}})
        pair["values"][step] = (c, t)
    out: dict[str, dict[str, Any]] = {}
    for metric in metrics:
        if metric not in by:
            continue
        steps = sorted(by[metric]["steps"])
        pairs = [p for _, p in sorted(by[metric]["pairs"].items())]
        for i, arm in enumerate(("control", "treatment")):
            values = np.array([[np.nan if p["values"].get(s, (None, None))[i] is None else p["values"][s][i]
                                for s in steps] for p in pairs], dtype=float)
            members = [p[arm] for p in pairs]
            held = sum(1 for r in members if r in ended and ended[r] < steps[-1])
            out.setdefault(metric, {})[arm] = {"steps": steps, "values": values, "runs": members, "held": held}
    return out


def references(study_root: str | Path, groups: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    """Per group, the final-size reference (``desim.report.final_size.reference``) of its runs, averaged
    over the runs (each on its own network and seeds), or ``{"value": None, "why": ...}``."""
    out: dict[str, dict[str, Any]] = {}
    with data.connect(study_root) as con:
        catalogue = Catalogue(con)
        for label, members in groups.items():
            found = []
            for run_id in members[:50]:
                row = catalogue.run(run_id)
                if row is None or row["status"] != "completed":
                    continue
                config = parsed(row["config"], {})
                ids, edges = network_reads.network(con, run_id)
                start = [v for s, v in queries.metric_series(con, run_id).get(REFERENCE_METRIC, []) if s == 0]
                if not start:
                    found.append({"value": None, "why": f"the run recorded no '{REFERENCE_METRIC}' metric"})
                    break
                found.append(reference(config, len(ids), edges, float(start[0])))
                if found[-1]["value"] is None:
                    break
            if not found:
                continue
            if any(f["value"] is None for f in found):
                out[label] = next(f for f in found if f["value"] is None)
                continue
            value = float(np.mean([f["value"] for f in found]))
            first = found[0]
            out[label] = {**first, "value": value, "runs": len(found),
                          "label": first["label"].rsplit(":", 1)[0] + f": {value:.3f}"}
    return out


def figure(metric: str, groups: dict[str, dict[str, Any]], refs: dict[str, dict[str, Any]], time_unit: str,
           title: str, fork: int | None = None, colors: dict[str, str] | None = None,
           bounds: tuple[float | None, float | None] = (None, None)) -> bytes:
    """Mean and middle-90 % band per group over steps; dashed reference lines where given (as a PNG)."""
    return figures.png(draw(metric, groups, refs, time_unit, title, fork, colors, bounds))


def draw(metric: str, groups: dict[str, dict[str, Any]], refs: dict[str, dict[str, Any]], time_unit: str,
         title: str, fork: int | None = None, colors: dict[str, str] | None = None,
         bounds: tuple[float | None, float | None] = (None, None)) -> matplotlib.figure.Figure:
    """:func:`figure`'s drawing, as a matplotlib figure (what a test measures). Its y axis follows the rule of
    the run report's metric panels (``figures.metric_limits``; ``bounds``: the metric's ``metric_bounds``), so
    that curves which barely move across replicates read as flat, not as a steep trend."""
    fig = figures.new_figure(figsize=(figures.WIDTH / figures.DPI, FIGURE_HEIGHT))
    ax = fig.subplots()
    shown: list[float] = []
    for i, (label, g) in enumerate(groups.items()):
        color = (colors or {}).get(label) or figures.PALETTE[i % len(figures.PALETTE)]
        steps, values = np.asarray(g["steps"]), g["values"]
        n = len(values)
        with warnings.catch_warnings():     # a step where every run's value is NaN is a gap, not a warning
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(values, axis=0)
            if n >= MIN_BAND_RUNS:
                lo, hi = np.nanquantile(values, BAND[0], axis=0), np.nanquantile(values, BAND[1], axis=0)
        if n >= MIN_BAND_RUNS:
            ax.fill_between(steps, lo, hi, color=color, alpha=0.18, linewidth=0)
            shown += [*lo.tolist(), *hi.tolist()]
        shown += mean.tolist()
        gaps = bool(np.isnan(mean).any())       # a point between two gaps is no line: marked, so it shows
        ax.plot(steps, mean, color=color, linewidth=1.8, marker="." if gaps else None, markersize=4,
                label=f"{label} (mean of {n} run{'s' if n != 1 else ''})")
        ref = refs.get(label) if metric == REFERENCE_METRIC else None
        if ref and ref.get("value") is not None:
            ax.axhline(ref["value"], color=color, linestyle="--", linewidth=1.2, label=ref["label"])
            shown.append(float(ref["value"]))
    limits = figures.metric_limits(shown, bounds)
    if limits is not None:
        ax.set_ylim(*limits)
    if fork is not None:
        ax.axvline(fork, color="tab:red", linewidth=1.3, zorder=0, label=f"fork at step {fork}")
    ax.set_xlabel(figures.step_axis(time_unit))
    ax.set_ylabel(metric)
    ax.grid(alpha=0.3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles, [_wrap(t) for t in labels], fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False, borderaxespad=0.0)
    fig.suptitle(title, fontsize=10.5)
    fig.subplots_adjust(left=0.08, right=0.62, top=0.88, bottom=0.13)
    fit_left_margin(fig, ax)
    return fig


LABEL_PAD_PX = 4     # room left of the y-axis label, in pixels


def fit_left_margin(fig: matplotlib.figure.Figure, ax: matplotlib.axes.Axes, pad_px: float = LABEL_PAD_PX) -> None:
    """Move the axes' left edge right until its y-axis label and tick labels lie inside the figure.

    A fixed left margin fits the tick labels it was tried with: ``-0.0245`` and ``-1250`` are wider
    than ``0.5``, and the label beside them was cut at the picture's edge. The ticks matplotlib picks
    are only known once it lays the figure out, so the margin is measured on a draw, not guessed. The
    plot's height does not change, so neither do its y ticks: one correction is enough."""
    renderer = fig.canvas.get_renderer()
    x0 = ax.yaxis.get_tightbbox(renderer).x0
    if x0 < pad_px:
        fig.subplots_adjust(left=fig.subplotpars.left + (pad_px - x0) / fig.bbox.width)


def _wrap(text: str, width: int = 44) -> str:
    import textwrap
    return "\n".join(textwrap.wrap(text, width)) or text


def caption(metric: str, groups: dict[str, dict[str, Any]], refs: dict[str, dict[str, Any]],
            bounds: tuple[float | None, float | None] = (None, None)) -> str:
    """What the figure shows, how its y axis is chosen (:func:`draw`'s ``bounds``), and about the reference
    line: its assumptions, or why there is none."""
    text = ("Lines: the mean over a group's runs at each step; shaded: the middle 90 % of its runs "
            f"(5th to 95th percentile; drawn for {MIN_BAND_RUNS} runs or more).")
    both = None not in bounds
    text += " " + figures.scale_rule([metric] if both else [], [] if both else [metric])
    if any(np.isnan(np.asarray(g["values"], dtype=float)).any() for g in groups.values()):
        text += (" A run with NaN (or no value) at a step is left out of that step's mean and band; a step where "
                 "every run has NaN is a gap.")
    held = sum(g.get("held", 0) for g in groups.values())
    if held:
        one = held == 1
        text += (f" {held} run{'' if one else 's'} ended with {'its' if one else 'their'} process before the last "
                 f"step shown and {'holds its' if one else 'hold their'} last value after it.")
    if metric != REFERENCE_METRIC:
        return text
    shown = [r for r in refs.values() if r.get("value") is not None]
    if shown:
        said = {r["assumptions"] for r in shown}
        # one group's figures (its mean degree, its T) said of every group would misstate the others
        text += " Dashed: " + (shown[0]["assumptions"] if len(said) == 1 else shown[0]["assumptions_each"]) + "."
    else:
        why = {r.get("why") for r in refs.values() if r.get("why")}
        if why:
            text += " No analytic reference line: " + "; ".join(sorted(why)) + "."
    return text
