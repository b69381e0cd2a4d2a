"""Sweep figures keep every label inside the picture, whatever width the tick labels the data calls for.

The y-axis label sits left of the tick labels, so a fixed left margin lets wide ticks (``-0.024``,
``-1,234,567``) push it past the picture's edge: measured here with matplotlib's renderer, the way the
PNG is drawn."""
from __future__ import annotations

import numpy as np
import pytest

from desim.report import bands, sweep

# values whose tick labels are narrow, wide negative decimals (the walk's sweep), and very wide numbers
LEVELS = {"narrow": (0.2, 0.6), "negative_decimals": (-0.0243, -0.0365), "thousands": (-1250.5, -3870.25),
          "millions": (-1_234_567.0, -9_876_543.0)}


def inside(fig) -> list[str]:
    """Every axis label and tick label of ``fig`` that leaves its bounds, as text (empty when none does)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    out = []
    for ax in fig.axes:
        (x_lo, x_hi), (y_lo, y_hi) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
        # the labels drawn: a tick past the axis' limits has a label too, which matplotlib leaves out
        ticks = [t for t in ax.get_yticklabels() if y_lo <= t.get_position()[1] <= y_hi] + \
                [t for t in ax.get_xticklabels() if x_lo <= t.get_position()[0] <= x_hi]
        texts = [t for t in [ax.yaxis.label, ax.xaxis.label, ax.yaxis.offsetText, ax.xaxis.offsetText] + ticks
                 if t.get_visible() and t.get_text()]
        for t in texts:
            box = t.get_window_extent(renderer)
            if box.x0 < 0 or box.x1 > width or box.y0 < 0 or box.y1 > height:
                out.append(f"{t.get_text()!r} at x {box.x0:.1f}..{box.x1:.1f}, y {box.y0:.1f}..{box.y1:.1f}")
    return out


def curves(lo: float, hi: float) -> dict:
    """Three groups of three runs drifting from ``lo`` towards ``hi`` over 21 steps."""
    steps = list(range(21))
    out = {}
    for g, share in enumerate((0.3, 0.6, 1.0)):
        path = lo + (hi - lo) * share * np.linspace(0.0, 1.0, 21)
        out[f"epsilon={0.2 + 0.3 * g:.1f}"] = {"steps": steps, "values": np.array([path, path * 1.01, path * 0.99])}
    return out


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_the_curves_figure_keeps_its_y_label_inside_the_picture(level):
    lo, hi = LEVELS[level]
    fig = bands.draw("mean_opinion", curves(lo, hi), {}, "week",
                     "'mean_opinion' over time per combination (mean and middle 90 % of replicates)")
    assert fig.axes[0].get_ylabel() == "mean_opinion"
    assert inside(fig) == []


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_the_final_step_figure_keeps_its_y_label_inside_the_picture(level):
    lo, hi = LEVELS[level]
    half = abs(hi - lo) / 20        # each point's 95 % interval: its mean +- a twentieth of the range
    means = {(x, mode): lo + (hi - lo) * (i / 2 + k / 10)
             for i, x in enumerate((0.2, 0.5, 0.8)) for k, mode in enumerate(("a", "b"))}
    rows = [{"epsilon": x, "mode": mode, "mean": m, "ci_low": m - half, "ci_high": m + half}
            for (x, mode), m in means.items()]
    fig = sweep.draw_metric("mean_opinion", rows, "epsilon", [0.2, 0.5, 0.8], ["mode"])
    assert fig.axes[0].get_ylabel() == "mean_opinion (final step)"
    assert inside(fig) == []


def test_a_narrow_figure_keeps_the_margin_it_was_given():
    """Only a figure whose labels would leave the picture moves its plot: the usual one is drawn as before."""
    fig = bands.draw("share", curves(0.2, 0.6), {}, "week", "title")
    assert fig.subplotpars.left == pytest.approx(0.08)
