"""The report's figures, drawn on Agg canvases into PNG bytes.

Every figure desim saves to a file (the reports', the players', ``desim viz``) is made by :func:`new_figure`: a
``matplotlib.figure.Figure`` on its own Agg canvas, never through ``pyplot``. So importing ``desim`` or
drawing a report never chooses or switches the backend of the process that does it (a notebook's inline
one, a script's GUI one), and a machine without a display draws the same pictures. Only the notebook
helpers (``desim.report.notebook``) go through ``pyplot``, on the user's own backend, so Jupyter shows them.

Every figure is ``WIDTH`` pixels wide with a height set by its number of
panels (no tight bounding box), so the size of an image is predictable and
tests can check it. Intervention steps are drawn as dotted vertical lines
labelled with the event names, staggered in rows so that labels of nearby
steps never overlap; a fork step as a solid red line, labelled in the same
rows; the metric panels get headroom above their data for those rows (:func:`headroom`), so a label
never hides a bar or a point. Legends sit above the plot area, clear of both. Markers are drawn only
on short series (up to ``MARKER_MAX_POINTS`` points), where they help read
single steps; on long series they would blur the line.
"""
from __future__ import annotations

import functools
import io
import math
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from desim.report.palette import PALETTE, category_colors  # noqa: F401 - shared with the players and sweep figures

DPI = 100
WIDTH = 900
PANEL_HEIGHT = 2.3  # inches per subplot row
CONTROL_STYLE = {"color": "0.45", "linestyle": "--", "linewidth": 1.4}
TREATMENT_STYLE = {"color": "tab:blue", "linewidth": 1.8}
MARKER_MAX_POINTS = 40
DENSITY_CMAP = "viridis_r"   # light (few agents) to dark (many), perceptually even, colour-blind safe
LABEL_FONT = 7.5      # points
LABEL_ROWS = 4        # rows of staggered event labels at the top of a panel


def step_axis(time_unit: str | None, note: str = "") -> str:
    """The label of a step axis: ``step (day)``, or plain ``step`` when the study's unit is the step itself
    (``step (step)`` said nothing); ``note`` is added inside the brackets (``0 = initial state``)."""
    inside = [t for t in ((time_unit if time_unit and time_unit != "step" else ""), note) if t]
    return "step" + (f" ({'; '.join(inside)})" if inside else "")


def figure_size(rows: int) -> tuple[float, float]:
    return WIDTH / DPI, 0.7 + PANEL_HEIGHT * rows


def new_figure(**kwargs) -> Figure:
    """A figure (``Figure(**kwargs)``) on its own Agg canvas, outside ``pyplot`` (see the module docstring):
    nothing keeps it once its picture is taken, and what it measures (text, tick labels) is measured by Agg,
    the renderer that draws it."""
    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def _subplots(rows: int):
    fig = new_figure(figsize=figure_size(rows))
    axes = fig.subplots(rows, 1, sharex=True, squeeze=False)
    return fig, [row[0] for row in axes]


def marker_style(n_points: int) -> dict:
    """Point markers for short series only."""
    return {"marker": "o", "markersize": 3} if n_points <= MARKER_MAX_POINTS else {}


def label_rows(labels: list[tuple[float, str]], px_per_step: float, font_px: float,
               axis_px: float = float("inf")) -> list[tuple[int, bool]]:
    """A row per label (labels sorted by step) so that no two labels in a row overlap, and whether it is
    drawn to the left of its step.

    A label starts just right of its step and is about ``0.6 * font_px`` per character wide; one that would
    run past the axes' right edge (``axis_px`` from the left) ends just left of its step instead, so an
    intervention at the last step is named, not cut at the picture's edge. It takes the first row whose last
    label ends before it starts. Past ``LABEL_ROWS`` rows the row with the most room is reused.
    """
    ends = [float("-inf")] * LABEL_ROWS
    rows = []
    for step, text in labels:
        width = 0.6 * font_px * len(text) + 6
        left = step * px_per_step + 3 + width > axis_px and step * px_per_step - 3 - width >= 0
        start = step * px_per_step - 3 - width if left else step * px_per_step + 3
        free = [r for r in range(LABEL_ROWS) if ends[r] < start]
        row = free[0] if free else min(range(LABEL_ROWS), key=lambda r: ends[r])
        ends[row] = max(ends[row], start + width)
        rows.append((row, left))
    return rows


def draw_labels(ax, labels: list[tuple[float, str, str]]) -> int:
    """Each ``(step, text, colour)`` written at the top of the axes beside its step, in staggered rows
    (:func:`label_rows`); returns the number of rows drawn."""
    if not labels:
        return 0
    labels = sorted(labels, key=lambda x: x[0])
    fig = ax.figure
    lo, hi = ax.get_xlim()
    width_px = ax.get_position().width * fig.get_figwidth() * fig.dpi
    px_per_step = width_px / max(1e-9, hi - lo)
    places = label_rows([(s - lo, t) for s, t, _ in labels], px_per_step, LABEL_FONT * fig.dpi / 72, width_px)
    for (step, text, color), (row, left) in zip(labels, places):
        ax.annotate(text, xy=(step, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(-3 if left else 3, -3 - row * (LABEL_FONT + 3)), textcoords="offset points",
                    va="top", ha="right" if left else "left", fontsize=LABEL_FONT, color=color, zorder=5,
                    bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.85})
    return max(row for row, _ in places) + 1


def mark_events(ax, events: dict[int, list[str]], fork: int | None = None, label: bool = True) -> int:
    """Dotted lines at intervention steps, a red line at the fork step, their names in staggered rows;
    returns the number of label rows drawn (for :func:`headroom`).

    Every figure over steps calls this, so it also keeps the step axis on whole numbers.
    """
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    labels: list[tuple[float, str, str]] = []
    for step, names in sorted(events.items()):
        ax.axvline(step, color="tab:orange", linestyle=":", linewidth=1.3, zorder=0)
        labels.append((step, ", ".join(names), "tab:orange"))
    if fork is not None:
        ax.axvline(fork, color="tab:red", linewidth=1.4, zorder=0)
        labels.append((fork, f"fork at step {fork}", "tab:red"))
    return draw_labels(ax, labels) if label else 0


def headroom(ax, rows: int) -> None:
    """Raise the top of the y axis by the height of ``rows`` label rows, so that the labels at the top
    of the panel sit above every bar or point instead of covering the values at the labelled steps."""
    if rows <= 0:
        return
    fig = ax.figure
    height_pt = ax.get_position().height * fig.get_figheight() * 72
    share = min(0.5, (4 + rows * (LABEL_FONT + 3)) / height_pt)   # of the panel's height
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, lo + (hi - lo) / (1 - share))


def state_key(fig: Figure, axes, payload: dict, marker: str, labels: list[str]) -> None:
    """The key under a player's small multiples: a legend of the categories (``labels``, drawn
    with ``marker``) or, for a numeric state, a colour bar over its range."""
    if payload["kind"] == "categorical":
        handles = [Line2D([], [], marker=marker, linestyle="", color=c, label=label)
                   for label, c in zip(labels, payload["palette"])]
        fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    else:
        lo, hi = payload["range"]
        sm = ScalarMappable(cmap=colormaps["viridis"], norm=Normalize(lo, hi))
        fig.colorbar(sm, ax=axes.ravel().tolist(), orientation="horizontal", fraction=0.03, pad=0.02,
                     label=payload["field"])


def legend_above(ax, ncol: int = 4) -> None:
    """The legend in a row above the plot area: never over the data, the event labels or the fork label."""
    ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0.0, 1.01), ncol=ncol, frameon=False,
              borderaxespad=0.0, handlelength=2.2)


MIN_SPAN_SHARE = 0.1
"""A metric panel's y axis spans at least this share of the metric's scale (:func:`metric_limits`)."""
AXIS_MARGIN = 0.05   # of the axis span, above and below the values (matplotlib's own default margin)


def metric_limits(values, bounds: tuple[float | None, float | None] = (None, None)) -> tuple[float, float] | None:
    """The y range of a metric's panel: its values, widened to at least ``MIN_SPAN_SHARE`` of its scale.

    The scale is the width of the metric's declared range (``metric_bounds`` in study.json) when both ends
    are declared, else the largest absolute value shown. Autoscaled, an axis stretches any change to its full
    height: a mean opinion moving from 0.4842 to 0.4833 looked like a steep drop. Widened to a tenth of the
    scale, a change smaller than that reads as nearly flat, and a real one still fills the panel: a share of
    infected peaking at 0.08 of [0, 1] is drawn on [0, 0.1], not squashed at the bottom of [0, 1]. The axis
    never passes a declared bound (the window is moved inside it), and a margin keeps a line that runs along
    an end clear of the frame. None when there is nothing to draw and no range is declared."""
    low, high = bounds
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return (low, high) if low is not None and high is not None else None
    lo, hi = min(finite), max(finite)
    scale = high - low if low is not None and high is not None else max(abs(lo), abs(hi))
    need = MIN_SPAN_SHARE * scale or 1.0     # an all-zero series with no declared range: a unit span
    if hi - lo < need:
        mid = (lo + hi) / 2
        lo, hi = mid - need / 2, mid + need / 2
        if low is not None and lo < low:
            lo, hi = low, hi + (low - lo)
        if high is not None and hi > high:
            lo, hi = lo - (hi - high), high
        lo, hi = min(lo, min(finite)), max(hi, max(finite))   # a value past a declared bound is still shown
    margin = AXIS_MARGIN * (hi - lo)
    return lo - margin, hi + margin


def scale_rule(bounded: list[str], free: list[str]) -> str:
    """The caption's sentence on how the metric panels' y axes are chosen (:func:`metric_limits`)."""
    share = f"{MIN_SPAN_SHARE:.0%}".replace("%", " %")
    parts = []
    if bounded:
        parts.append(f"{', '.join(bounded)}: at least {share} of the range declared in study.json's "
                     "metric_bounds, and not past it but for a thin margin")
    if free:
        parts.append(f"{', '.join(free)}: at least {share} of the largest absolute value shown")
    return ("Each y axis spans its values, widened where they vary little (" + "; ".join(parts)
            + "), so that a change small against that scale reads as nearly flat.")


def metric_trajectories(metrics: dict[str, list[tuple[int, float]]], names: list[str],
                        events: dict[int, list[str]], time_unit: str,
                        control: dict[str, list[tuple[int, float]]] | None = None,
                        labels: tuple[str, str] = ("run", "control"), fork: int | None = None,
                        bounds: dict[str, tuple[float | None, float | None]] | None = None,
                        titles: dict[str, str] | None = None, units: dict[str, str] | None = None) -> bytes:
    """:func:`draw_metric_trajectories` as a PNG."""
    return png(draw_metric_trajectories(metrics, names, events, time_unit, control, labels, fork, bounds,
                                        titles, units))


def draw_metric_trajectories(metrics: dict[str, list[tuple[int, float]]], names: list[str],
                             events: dict[int, list[str]], time_unit: str,
                             control: dict[str, list[tuple[int, float]]] | None = None,
                             labels: tuple[str, str] = ("run", "control"), fork: int | None = None,
                             bounds: dict[str, tuple[float | None, float | None]] | None = None,
                             titles: dict[str, str] | None = None,
                             units: dict[str, str] | None = None) -> Figure:
    """One panel per metric over steps (with ``control``, both runs overlaid): titled ``titles[name]`` (else
    the name), its y axis labelled ``units[name]`` (else the name) and ranged by :func:`metric_limits` on
    ``bounds[name]``, every panel's step axis labelled with the time unit."""
    rows = max(1, len(names))
    fig = new_figure(figsize=figure_size(rows))
    axes = [row[0] for row in fig.subplots(rows, 1, sharex=True, squeeze=False)]
    for ax, name in zip(axes, names):
        steps, values = zip(*metrics[name]) if metrics.get(name) else ((), ())
        ax.plot(steps, values, label=labels[0], **marker_style(len(steps)), **TREATMENT_STYLE)
        shown = list(values)
        if control and control.get(name):
            cs, cv = zip(*control[name])
            ax.plot(cs, cv, label=labels[1], **CONTROL_STYLE)
            shown += list(cv)
        limits = metric_limits(shown, (bounds or {}).get(name, (None, None)))
        if limits is not None:
            ax.set_ylim(*limits)
        ax.set_title((titles or {}).get(name, name), fontsize=9, loc="left")
        ax.set_ylabel((units or {}).get(name, name), fontsize=9)
        ax.set_xlabel(step_axis(time_unit), fontsize=8.5)
        ax.tick_params(labelbottom=True, labelsize=8)
        ax.grid(alpha=0.3)
    height = fig.get_figheight()
    top = 0.75 + (0.3 if control else 0.0)       # inches above the first panel: the title (and the legend)
    bottom, gap = 0.5, 0.72                      # inches: the last step axis; between panels, a step axis and a title
    panel = (height - top - bottom - (rows - 1) * gap) / rows
    fig.subplots_adjust(left=0.1, right=0.97, top=1 - top / height, bottom=bottom / height, hspace=gap / panel)
    fig.suptitle("Metrics over time", fontsize=11, y=1 - 0.1 / height, va="top")
    if control:
        fig.legend(*axes[0].get_legend_handles_labels(), loc="upper center", ncol=2, fontsize=8, frameon=False,
                   bbox_to_anchor=(0.5, 1 - 0.4 / height))
    for ax in axes:     # after the layout is final, so labels are staggered at their drawn width
        headroom(ax, mark_events(ax, events, fork))
    return fig


def numeric_distribution(name: str, bands: dict[str, list], events: dict[int, list[str]], time_unit: str,
                         density: dict[str, Any] | None = None, whom: str = "agents") -> bytes:
    """:func:`draw_numeric_distribution` as a PNG."""
    return png(draw_numeric_distribution(name, bands, events, time_unit, density, whom))


def draw_numeric_distribution(name: str, bands: dict[str, list], events: dict[int, list[str]], time_unit: str,
                              density: dict[str, Any] | None = None, whom: str = "agents") -> Figure:
    """A numeric state field over time: with ``density``, on top the share of ``whom`` in each bin of values at
    each step (a heat map, :func:`draw_density`), where clusters show as dark bands and the gaps between them
    as white; below, the quantile bands (5-95 %, 25-75 %), the median and the mean. The bands alone drew eight
    opinion clusters as one smooth band from 0.05 to 0.95; the heat map alone would hide the exact quantiles of
    a skewed quantity such as wealth. Dead agents left out (``bands["left_out"]``) are said in the title."""
    heights = [3, 2] if density else [1]
    fig = new_figure(figsize=figure_size(len(heights)))
    axes = [row[0] for row in fig.subplots(len(heights), 1, sharex=True, squeeze=False,
                                           gridspec_kw={"height_ratios": heights})]
    ax = axes[-1]
    steps = bands["steps"]
    q = list(zip(*bands["quantiles"])) if steps else [()] * 5
    ax.fill_between(steps, q[0], q[4], color="tab:blue", alpha=0.15, label="5-95 %")
    ax.fill_between(steps, q[1], q[3], color="tab:blue", alpha=0.35, label="25-75 %")
    ax.plot(steps, q[2], color="tab:blue", linewidth=1.8, label="median")
    ax.plot(steps, bands["mean"], color="black", linewidth=1, linestyle="--", label="mean")
    ax.set_ylabel(name)
    ax.set_xlabel(step_axis(time_unit, "0 = initial state"))
    ax.grid(alpha=0.3)
    height = fig.get_figheight()
    left_out = any(bands.get("left_out") or ())
    title = f"Distribution of '{name}' over time" + (f", {whom} only" if left_out else "")
    if left_out:
        title += f"\n(dead agents, alive = false, are left out: {bands['left_out'][-1]:,} at the last step)"
    fig.suptitle(title, fontsize=11, y=1 - 0.08 / height, va="top")
    fig.subplots_adjust(left=0.09, right=0.86, top=1 - (0.85 if left_out else 0.6) / height,
                        bottom=0.55 / height, hspace=0.3)
    if density:
        draw_density(fig, axes[0], name, density, whom)
        axes[0].set_title(f"share of {whom} in each bin of '{name}'", fontsize=9, loc="left")
        ax.set_title("quantile bands, median and mean", fontsize=9, loc="left")
    for i, a in enumerate(axes):
        mark_events(a, events, label=i == 0)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False, borderaxespad=0.0)
    return fig


def draw_density(fig: Figure, ax, name: str, density: dict[str, Any], whom: str) -> None:
    """The share of ``whom`` in each bin of values (``density["edges"]``) at each step, as colour on a log
    scale, white where the bin is empty; its colour bar at the right of ``ax``.

    A log scale, since the shares span two orders of magnitude: an agent alone in its bin (1/n) and a
    cluster holding a third of them must both show. A colour map from light (few) to dark (many), so that
    an empty bin (white) and a sparse one read alike as "little here"."""
    shares = np.asarray(density["shares"], dtype=float)        # [step, bin]
    steps = np.asarray(density["steps"], dtype=float)
    if len(steps) > 1:
        mids = (steps[1:] + steps[:-1]) / 2
        x = np.concatenate([[2 * steps[0] - mids[0]], mids, [2 * steps[-1] - mids[-1]]])
    else:
        x = np.array([steps[0] - 0.5, steps[0] + 0.5]) if len(steps) else np.array([0.0, 1.0])
    positive = shares[shares > 0]
    low = float(positive.min()) if positive.size else 1e-3
    high = max(float(positive.max()) if positive.size else 1.0, low * 1.0001)
    mesh = ax.pcolormesh(x, np.asarray(density["edges"], dtype=float), np.ma.masked_less_equal(shares, 0).T,
                         cmap=DENSITY_CMAP, norm=LogNorm(low, high), shading="flat", rasterized=True,
                         zorder=-1)   # under the intervention lines (zorder 0)
    ax.set_ylabel(name)
    ax.set_xlim(x[0], x[-1])
    pos = ax.get_position()
    cax = fig.add_axes((pos.x1 + 0.015, pos.y0, 0.015, pos.height))
    bar = fig.colorbar(mesh, cax=cax)
    ticks = [m * 10.0 ** k for k in range(-6, 1) for m in (1, 2, 5) if low <= m * 10.0 ** k <= high]
    bar.set_ticks(ticks, labels=[f"{t:g}" for t in ticks])     # 0.01, 0.02, 0.05: shares, not 10^-2
    bar.minorticks_off()
    bar.set_label(f"share of {whom} in the bin\n(log scale; white: none)", fontsize=8)
    bar.ax.tick_params(labelsize=7.5)


def categorical_shares(name: str, counts: dict, events: dict[int, list[str]], time_unit: str,
                       colors: dict[str, str] | None = None) -> bytes:
    """Stacked shares of each category of a categorical or boolean state field, in the study's colours and
    declared order (the first declared at the bottom, as the dashboard stacks them: S, I, R, not I, R, S)."""
    fig, (ax,) = _subplots(1)
    steps = counts["steps"]
    categories = ordered_categories(counts["categories"], colors)
    totals = [sum(counts["counts"][c][i] for c in categories) or 1 for i in range(len(steps))]
    shares = [[n / t for n, t in zip(counts["counts"][c], totals)] for c in categories]
    ax.stackplot(steps, *shares, labels=categories, colors=category_colors(categories, colors), alpha=0.9)
    ax.set_ylim(0, 1)
    ax.set_xlim(min(steps, default=0), max(steps, default=1))
    ax.set_ylabel("share of agents")
    ax.set_xlabel(step_axis(time_unit, "0 = initial state"))
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle(f"Shares of '{name}' over time", fontsize=11)
    fig.subplots_adjust(left=0.1, right=0.84, top=0.85, bottom=0.2)
    mark_events(ax, events)
    return png(fig)


def mark_held(ax, held: list[tuple[int, int, str]]) -> None:
    """Grey spans over the steps where a run that ended with its process is held at its last step
    (``(last step, the other run's last step, who)``): the differences there compare against that end."""
    for last, to, who in held:
        ax.axvspan(last + 0.5, to + 0.5, color="0.85", alpha=0.5, zorder=0, linewidth=0)
        ax.annotate(f"{who} ended at step {last}: held", xy=(to + 0.5, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(-3, -3), textcoords="offset points", va="top", ha="right", fontsize=LABEL_FONT,
                    color="0.3", zorder=5,
                    bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.85})


def metric_differences(diffs: dict[str, list[tuple[int, float]]], events: dict[int, list[str]],
                       fork: int | None, time_unit: str, title: str,
                       held: list[tuple[int, int, str]] = ()) -> bytes:
    """Treatment minus control per step, one panel per metric, the fork step marked, and the steps
    where an ended run is held shaded (:func:`mark_held`)."""
    names = list(diffs)
    fig, axes = _subplots(max(1, len(names)))
    for ax, name in zip(axes, names):
        if diffs[name]:
            steps, values = zip(*diffs[name])
            ax.bar(steps, values, color=["tab:green" if v >= 0 else "tab:purple" for v in values], width=0.7)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_ylabel(f"Δ {name}", fontsize=9)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel(step_axis(time_unit))
    fig.suptitle(title, fontsize=11)
    fig.subplots_adjust(left=0.1, right=0.97, top=1 - 0.45 / fig.get_figheight(),
                        bottom=0.45 / fig.get_figheight() + 0.02, hspace=0.25)
    for ax in axes:
        rows = mark_events(ax, events, fork)
        mark_held(ax, held)
        headroom(ax, max(rows, 1 if held else 0))
    return png(fig)


def paired_differences(name: str, kind: str, data: dict[str, list], fork: int | None, time_unit: str,
                       held: list[tuple[int, int, str]] = ()) -> bytes:
    """Per-agent treatment minus control: quantile bands of the differences, or the share changed."""
    fig, (ax,) = _subplots(1)
    steps = data["steps"]
    if kind == "numeric":
        q = list(zip(*data["quantiles"])) if steps else [()] * 5
        ax.fill_between(steps, q[0], q[4], color="tab:green", alpha=0.15, label="5-95 % of agents")
        ax.fill_between(steps, q[1], q[3], color="tab:green", alpha=0.35, label="25-75 %")
        ax.plot(steps, data["mean"], color="black", linewidth=1.5, label="mean difference")
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_ylabel(f"Δ {name} per agent")
    else:
        ax.plot(steps, data["changed_share"], color="tab:green", **marker_style(len(steps)))
        ax.set_ylim(0, 1)
        ax.set_ylabel(f"share with a different {name}")
    ax.grid(alpha=0.3)
    ax.set_xlabel(step_axis(time_unit))
    fig.suptitle(f"Per-agent paired differences in '{name}' (treatment minus control)", fontsize=11)
    fig.subplots_adjust(left=0.1, right=0.97, top=0.78 if kind == "numeric" else 0.85, bottom=0.2)
    mark_events(ax, {}, fork)
    mark_held(ax, held)
    if kind == "numeric":
        legend_above(ax, ncol=3)
    return png(fig)


def file_stem(name: str) -> str:
    """A state or metric name made safe as part of a file name (no path separators)."""
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)


# --- categories, ramps and text that fits: shared by the players, the dashboard and the figures -------
def ordered_categories(categories, declared: dict[str, str] | None = None) -> list[str]:
    """Categories in the order the study declares them (the keys of ``state_colors[field]`` in
    ``study.json``), then any others sorted, ``null`` (no value) last. A legend, a stack of shares and
    the slices of a pie all follow this order, so ``S, I, R`` reads as declared, not as ``I, R, S``."""
    present = list(dict.fromkeys(categories))
    first = [c for c in (declared or {}) if c in present]
    rest = sorted(c for c in present if c not in first and c != "null")
    return first + rest + (["null"] if "null" in present and "null" not in first else [])


def ramp_colors(n: int, cmap: str = "viridis") -> list[str]:
    """``n`` colours evenly along a matplotlib colour map, as ``#rrggbb`` (low values first)."""
    m = colormaps[cmap].resampled(n)
    return ["#{:02x}{:02x}{:02x}".format(*(int(round(255 * c)) for c in m(i)[:3])) for i in range(n)]


def text_size(fig: Figure, text: str, fontsize: float, weight: str = "normal") -> tuple[float, float]:
    """Width and height in pixels of ``text`` drawn at ``fontsize`` points on ``fig`` (Agg's own metrics)."""
    return _text_size(text, float(fontsize), weight, float(fig.dpi))


@functools.lru_cache(maxsize=4096)
def _text_size(text: str, fontsize: float, weight: str, dpi: float) -> tuple[float, float]:
    from matplotlib.font_manager import FontProperties
    w, h, _ = _renderer(dpi).get_text_width_height_descent(text, FontProperties(size=fontsize, weight=weight),
                                                            ismath=False)
    return w, h


@functools.lru_cache(maxsize=8)
def _renderer(dpi: float):
    from matplotlib.backends.backend_agg import RendererAgg
    return RendererAgg(10, 10, dpi)


def wrap_to_width(fig: Figure, text: str, fontsize: float, width_px: float, weight: str = "normal") -> list[str]:
    """``text`` broken into lines at spaces so that every line fits ``width_px`` (a single word longer
    than the width is cut with an ellipsis rather than allowed to run over its neighbours)."""
    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for word in paragraph.split(" "):
            trial = f"{line} {word}" if line else word
            if text_size(fig, trial, fontsize, weight)[0] <= width_px or not line:
                line = trial
            else:
                lines.append(line)
                line = word
            while text_size(fig, line, fontsize, weight)[0] > width_px and len(line) > 2:
                line = line[:-2].rstrip() + "…"
        lines.append(line)
    return lines


def flow_rows(widths: list[float], width_px: float, gap_px: float) -> list[list[int]]:
    """Items of the given widths placed left to right in rows no wider than ``width_px``: their indices per row."""
    rows: list[list[int]] = [[]]
    used = 0.0
    for i, w in enumerate(widths):
        need = w if not rows[-1] else used + gap_px + w
        if rows[-1] and need > width_px:
            rows.append([i])
            used = w
        else:
            rows[-1].append(i)
            used = need
    return [r for r in rows if r]
