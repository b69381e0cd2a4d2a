"""A study's data at a glance in a notebook: one-line plots that return matplotlib figures (Jupyter shows
them; ``fig.savefig`` keeps them), and the HTML summaries ``StudyData`` and ``RunResult`` show.

    import desim
    from desim.report import plot_metrics, plot_shares
    result = desim.run_study(desim.load_study("studies/rumor_network"))
    result                                   # a summary table: status, steps, metrics at the last step
    plot_metrics(result)                     # every metric over the steps, one panel each
    plot_shares(result, "rumor_state")       # the share of each category of a state field over the steps

Each takes a study folder, ``desim.open(...)`` or a run result, and ``run=`` for another run than the
default one (a result's own run; else the latest plain run).

Unlike the report's figures (``desim.report.figures.new_figure``), these are made through ``pyplot``, on the
backend the user has: in Jupyter the inline one, which shows the Figure a cell returns; in a script without a
display, Agg. desim never sets a backend, and imports ``pyplot`` only when one of these plots is asked for.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import pyarrow.compute as pc
from matplotlib.ticker import MaxNLocator

from desim.report.figures import ordered_categories
from desim.report.diffusion import study_colors
from desim.report.palette import category_colors
from desim.store import StudyData


def _source(source: Any, run: str | None) -> tuple[StudyData, str]:
    """The store and the run id of a study folder, a ``StudyData`` or a ``RunResult``."""
    if isinstance(source, StudyData):
        data = source
    elif hasattr(source, "data") and hasattr(source, "run_id"):         # a RunResult
        data = source.data()
        run = run or source.run_id
    elif isinstance(source, (str, Path)):
        data = StudyData(source)
    else:
        raise TypeError(f"a study folder, desim.open(...) or a run result, not {type(source).__name__}")
    return data, data.run_ids(run)[0]


def _subplots(*args, **kwargs):
    """``pyplot.subplots`` on the user's backend, the figure let go by pyplot at once: returned as a cell's
    value, it is shown once by Jupyter, not a second time when pyplot shows the figures it still holds."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(*args, **kwargs)
    plt.close(fig)
    return fig, axes


def plot_metrics(source: Any, run: str | None = None, metrics: Iterable[str] | None = None,
                 columns: int = 3):
    """Every metric of one run (or those named) over the steps, one small panel each; a Figure."""
    data, run_id = _source(source, run)
    table = data.metrics(run_id)
    names = [n for n in table.column_names if n not in ("run_id", "step")]
    if metrics is not None:
        wanted = list(metrics)
        unknown = [m for m in wanted if m not in names]
        if unknown:
            raise KeyError(f"run {run_id} has no metric {unknown[0]!r} (metrics: {', '.join(names)})")
        names = wanted
    steps = table.column("step").to_pylist()
    rows = max(1, -(-len(names) // columns))
    cols = min(columns, max(1, len(names)))
    fig, axes = _subplots(rows, cols, figsize=(4.2 * cols, 2.8 * rows), squeeze=False)
    unit = _time_unit(data, run_id)
    for ax, name in zip(axes.ravel(), names):
        ax.plot(steps, table.column(name).to_pylist(), color="#1f77b4", lw=1.6)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel(unit)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))      # steps are whole
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[len(names):]:
        ax.set_visible(False)
    fig.suptitle(f"run {run_id}", fontsize=11)
    fig.tight_layout()
    return fig


def plot_shares(source: Any, field: str, run: str | None = None):
    """The share of agents in each category of the state ``field`` at every step (step 0: the initial
    states), stacked, in the study's declared colours and order; a Figure."""
    data, run_id = _source(source, run)
    start = data.initial_states(run_id)
    panel = data.panel(run_id, columns=[field])
    if field not in panel.column_names:
        raise KeyError(f"run {run_id} has no state field {field!r}")
    steps = [0] + sorted(set(panel.column("step").to_pylist()))
    by_step = {0: start.column(field).to_pylist()}
    step_col, values = panel.column("step"), panel.column(field)
    for s in steps[1:]:
        by_step[s] = values.filter(pc.equal(step_col, s)).to_pylist()
    text = {s: ["null" if v is None else str(v) for v in vs] for s, vs in by_step.items()}
    declared = study_colors(data.layout.root, field)
    categories = ordered_categories([v for vs in text.values() for v in vs], declared)
    colors = category_colors(categories, declared)
    shares = {c: [text[s].count(c) / max(1, len(text[s])) for s in steps] for c in categories}
    fig, ax = _subplots(figsize=(7.5, 3.6))
    ax.stackplot(steps, [shares[c] for c in categories], labels=categories, colors=colors, alpha=0.9)
    ax.set_xlim(steps[0], steps[-1])
    ax.set_ylim(0, 1)
    ax.set_ylabel(f"share of agents by {field}")
    ax.set_xlabel(_time_unit(data, run_id))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.set_title(f"run {run_id}", fontsize=10)
    fig.tight_layout()
    return fig


def _time_unit(data: StudyData, run_id: str) -> str:
    rows = data.run_rows([run_id])
    return (rows[0].get("time_unit") if rows else None) or "step"
