"""The report of a sweep: how each metric's final value moves with the swept parameter.

A sweep's runs are ordinary runs of the study, so one run's report says
nothing about the spread across replicates. This report reads the sweep's
recorded plan (the ``sweeps`` table) and the runs' statuses, and takes the
per-combination summary (mean, sd, 95 % interval of the mean, n) from
:func:`desim.experiments.sweep.sweep_table`, so the report and ``desim sweep`` print the
same numbers. :func:`build` returns the format-free :class:`Report` that
``html`` and ``markdown`` lay out.

The x axis of every figure is the first parameter the grid varies (a
parameter given one value is set for every run of the sweep, so it is listed on
the card, not plotted); every combination of the other varied parameters is
one labelled line.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib.figure
from pydantic import ValidationError

from desim.jsontext import parsed
from desim.experiments.sweep import SweepError, SweepPlan, sweep_table
from desim.report import bands, data, figures
from desim.report.numbers import clipped_note, left_out_note, row_cells
from desim.report.content import MAX_TABLE_ROWS, Figure, Report, Section, Table, fmt
from desim.report.data import ReportError
from desim.report.figures import file_stem
from desim.study.files import StudyFile, study_file_or_none
from desim.store import Catalogue
from desim.records import is_number

FIGURE_HEIGHT = 4.2   # inches: with figures.WIDTH and figures.DPI, every sweep figure is 900 x 420 px
DODGE = 0.012         # horizontal shift between lines, as a share of the x range, so error bars stay apart


def load_plan(study_root: str | Path, sweep_id: str) -> tuple[SweepPlan, dict[str, Any], list[dict[str, Any]]]:
    """The sweep's plan, its ``sweeps`` row and its runs as stored (read-only)."""
    with data.connect(study_root) as con:
        catalogue = Catalogue(con)
        row = catalogue.sweep(sweep_id)
        if row is None:
            raise ReportError(f"no sweep '{sweep_id}' in the store of {study_root} "
                              f"(sweeps: {', '.join(catalogue.sweep_ids()) or 'none'})")
        runs = catalogue.sweep_runs(sweep_id)
    rows = [row]
    plan = SweepPlan.from_json(rows[0]["plan"])
    # the plan's JSON sorts its keys; the grid column keeps the order the parameters were given in
    plan.grid = {name: plan.grid[name] for name in json.loads(rows[0]["grid"])}
    return plan, rows[0], runs


def axis_parameters(plan: SweepPlan) -> tuple[str, list[str]]:
    """The x-axis parameter and the other varied ones (which make the lines)."""
    names = list(plan.grid)
    if not names:           # replicates of the study's own values: nothing to put on an axis
        return None, []
    varied = [n for n in names if len(plan.grid[n]) > 1]
    if not varied:
        return names[0], []
    return varied[0], varied[1:]


def _is_numeric(values: list[Any]) -> bool:
    return all(is_number(v) for v in values)


def _label(combo: dict[str, Any], names: list[str]) -> str:
    return ", ".join(f"{n}={fmt(combo[n])}" for n in names)


def metric_figure(metric: str, rows: list[dict[str, Any]], x: str, x_values: list[Any],
                  lines: list[str]) -> bytes:
    """:func:`draw_metric` as a PNG."""
    return figures.png(draw_metric(metric, rows, x, x_values, lines))


def draw_metric(metric: str, rows: list[dict[str, Any]], x: str, x_values: list[Any],
                lines: list[str]) -> matplotlib.figure.Figure:
    """Final-step mean of ``metric`` against ``x``, 95 % intervals as error bars, one line per
    combination of ``lines`` (a line without intervals where fewer than two replicates completed).

    A text-valued ``x`` (a rule's name) has no order or distance between its values: its points stand
    apart at evenly spaced ticks, side by side per combination, and are not joined by a line, which
    would suggest a trend between categories."""
    fig = figures.new_figure(figsize=(figures.WIDTH / figures.DPI, FIGURE_HEIGHT))
    ax = fig.subplots()
    numeric = _is_numeric(x_values)
    position = {repr(v): (v if numeric else i) for i, v in enumerate(x_values)}
    positions = sorted(position.values())
    span = (positions[-1] - positions[0]) or 1
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(repr(row[n]) for n in lines), []).append(row)
    dodge = DODGE * span if numeric else min(0.1, 0.6 / len(groups or [0]))  # categories: a tenth of a slot
    for i, members in enumerate(groups.values()):
        shift = (i - (len(groups) - 1) / 2) * dodge
        points = sorted(((position[repr(r[x])] + shift, r) for r in members if r["mean"] is not None),
                        key=lambda p: p[0])
        if not points:
            continue
        xs = [p for p, _ in points]
        means = [r["mean"] for _, r in points]
        low = [r["mean"] - r["ci_low"] if r["ci_low"] is not None else 0.0 for _, r in points]
        high = [r["ci_high"] - r["mean"] if r["ci_high"] is not None else 0.0 for _, r in points]
        color = figures.PALETTE[i % len(figures.PALETTE)]
        bars = any(r["ci_low"] is not None for _, r in points)
        ax.errorbar(xs, means, yerr=[low, high] if bars else None, color=color, marker="o", markersize=5, linewidth=1.6,
                    linestyle="-" if numeric else "none", capsize=4, label=_label(members[0], lines))
    if not numeric:
        ax.set_xticks(positions, [fmt(v) for v in x_values])
        ax.set_xlim(positions[0] - 0.5, positions[-1] + 0.5)
    ax.set_xlabel(x)
    ax.set_ylabel(f"{metric} (final step)")
    ax.grid(alpha=0.3)
    if lines:
        ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle(f"'{metric}' at the final step against {x} (mean and 95 % interval)", fontsize=11)
    fig.subplots_adjust(left=0.09, right=0.78 if lines else 0.97, top=0.88, bottom=0.14)
    bands.fit_left_margin(fig, ax)      # long tick labels (-0.0245) would push the y label off the picture
    return fig


def sweep_card(plan: SweepPlan, row: dict[str, Any], runs: list[dict[str, Any]], study: StudyFile) -> Section:
    status = {r["run_id"]: r["status"] for r in runs}
    planned = [r.run_id for r in plan.runs]
    completed = sum(1 for r in planned if status.get(r) == "completed")
    failed = sum(1 for r in planned if status.get(r) == "failed")
    missing = sum(1 for r in planned if r not in status)
    other = len(planned) - completed - failed - missing
    # a parameter the sweep sets to one value for every run, apart from those it leaves at the study's value
    set_once = {k: vs[0] for k, vs in plan.grid.items() if len(vs) == 1}
    fixed = {k: v for k, v in plan.runs[0].parameters.items() if k not in plan.grid} if plan.runs else {}
    steps = plan.n_steps if plan.n_steps is not None else next((r["n_steps"] for r in runs), None)
    time_unit = next((r["time_unit"] for r in runs), "")
    seeds = {r.seed for r in plan.runs}
    counts = f"{completed} completed, {failed} failed" + (f", {missing} missing" if missing else "") \
        + (f", {other} unfinished" if other else "")
    rows = [
        ["study", f"{plan.study_id}: {study.title}".rstrip(": ")],
        ["question", study.question],
        ["sweep", f"{plan.sweep_id} (created {fmt(row['created_at'])[:19]})"],
        ["grid", "; ".join(f"{n} = {', '.join(fmt(v) for v in vs)}" for n, vs in plan.grid.items()
                           if len(vs) > 1) or "none (replicates of one combination)"],
        ["set for every run", ", ".join(f"{k}={fmt(v)}" for k, v in sorted(set_once.items())) or "none"],
        ["study values", ", ".join(f"{k}={fmt(v)}" for k, v in sorted(fixed.items()))],
        ["behaviour model", _component(runs, "simulation", "decision")],
        ["environment", _component(runs, "environment", "provider")],
        ["replicates", f"{plan.replicates} per combination ({len(plan.combos())} combinations, "
                       f"{len(planned)} runs)"],
        ["steps", f"{fmt(steps)} ({time_unit})" if time_unit else fmt(steps)],
        ["runs", counts],
        ["seeds", f"derived from study seed {plan.base_seed}, the run's parameters and its replicate: "
                  f"{len(seeds)} distinct seeds for {len(planned)} runs"],
    ]
    section = Section("Sweep card", [], [Table(["", "value"], rows, align_numbers=False)])
    errors = [r for r in runs if r["status"] != "completed" and r.get("error")]
    for r in errors[:10]:
        section.paragraphs.append(f"{r['run_id']} {r['status']}: {r['error']}")
    return section


def metric_section(metric: str, rows: list[dict[str, Any]], plan: SweepPlan, x: str, lines: list[str]) -> Section:
    png = metric_figure(metric, rows, x, list(plan.grid[x]), lines)
    numeric = _is_numeric(list(plan.grid[x]))
    clipped = clipped_note(rows)
    caption = ("Points: the mean over completed replicates of the metric at each run's final step; "
               "bars: 95 % confidence interval of the mean (Student t, n - 1 degrees of freedom)"
               + ("; lines are shifted slightly sideways so their bars do not overlap." if lines and numeric
                  else "; combinations stand side by side at each value." if lines else ".")
               + ("" if numeric else f" {x} takes text values, so its points are not joined by lines.")
               + (" Bars are clipped at the metric's bounds (metric_bounds in study.json)." if clipped else ""))
    varied = [x] + lines
    table_rows = [[fmt(r[n]) for n in varied] + row_cells(r) + [str(r["n"])] for r in rows]
    table = Table(varied + ["mean", "sd", "95 % low", "95 % high", "n"], table_rows,
                  "sd and the interval are blank where fewer than two replicates completed; each estimate to "
                  "the digits its interval supports (the store and desim.sweep_table keep every digit)."
                  + (f" {clipped}" if clipped else "") + (f" {left}" if (left := left_out_note(rows)) else ""))
    return Section(metric, [f"'{metric}' at each run's final step, per combination of the grid."],
                   [table], [Figure(f"sweep_{file_stem(metric)}", f"{metric} against {x}", png, caption)])


def curves_section(study_root: str | Path, plan: SweepPlan, runs: list[dict[str, Any]], varied: list[str],
                   metrics: list[str]) -> Section:
    """Each metric over time per combination: the mean over replicates with a band holding the middle 90 %
    of them, and the analytic final size where the model has one (``desim.report.bands``)."""
    done = {r["run_id"] for r in runs if r["status"] == "completed"}
    groups: dict[str, list[str]] = {}
    for r in plan.runs:
        if r.run_id in done:
            groups.setdefault(_label(r.combo, varied) or "all runs", []).append(r.run_id)
    curves = bands.series(study_root, groups, metrics)
    refs = bands.references(study_root, groups) if bands.REFERENCE_METRIC in curves else {}
    time_unit = next((r["time_unit"] for r in runs if r.get("time_unit")), "step")
    section = Section("Over time", [f"Each metric step by step, per combination: {plan.replicates} replicates each "
                                    "(different seeds)."])
    study = study_file_or_none(study_root)
    declared = study.metric_bounds if study is not None else {}
    for metric in metrics:
        if metric not in curves:
            continue
        bounds = tuple(declared.get(metric, (None, None)))
        png = bands.figure(metric, curves[metric], refs, time_unit,
                           f"'{metric}' over time per combination (mean and middle 90 % of replicates)", bounds=bounds)
        section.figures.append(Figure(f"sweep_curves_{file_stem(metric)}", f"{metric} over time", png,
                                      bands.caption(metric, curves[metric], refs, bounds=bounds)))
    return section


def runs_section(plan: SweepPlan, runs: list[dict[str, Any]]) -> Section:
    """Every planned run with its combination, replicate, derived seed and status."""
    status = {r["run_id"]: r["status"] for r in runs}
    names = list(plan.grid)
    rows = [[r.run_id] + [fmt(r.combo[n]) for n in names] + [str(r.replicate), str(r.seed),
                                                             status.get(r.run_id, "missing")]
            for r in plan.runs[:MAX_TABLE_ROWS]]
    note = "" if len(plan.runs) <= MAX_TABLE_ROWS else f"{MAX_TABLE_ROWS} of {len(plan.runs)} runs shown."
    return Section("Runs", [], [Table(["run"] + names + ["replicate", "seed", "status"], rows, note)])


def _component(runs: list[dict[str, Any]], section: str, name: str) -> str:
    """A component as the sweep's runs built it: its ref and its arguments resolved, an argument that differs
    between runs (a swept parameter's) said as such: what was simulated, which parameter names alone do not
    say (a rate may come from a roster column or an edge, and a parameter may be read by nothing)."""
    built = [parsed(r.get("config"), {}).get(section, {}).get(name) or {} for r in runs]
    built = [b for b in built if b.get("ref")]
    if not built:
        return ""
    args: dict[str, Any] = {}
    for key in sorted({k for b in built for k in (b.get("args") or {})}):
        values = {json.dumps((b.get("args") or {}).get(key), sort_keys=True) for b in built}
        args[key] = json.loads(values.pop()) if len(values) == 1 else "(varies with the sweep)"
    refs = sorted({b["ref"] for b in built})
    return ", ".join(refs) + (f" {json.dumps(args, sort_keys=True)}" if args else "")


def sweep_study(study_root: str | Path, runs: list[dict[str, Any]]) -> StudyFile:
    """The study's ``study.json`` as the sweep ran it: from a completed run's configuration, else any
    run's (a run that failed at set-up has one too), else the file as it is now, so a sweep whose runs
    all failed still gets its title and question (with neither, the study's folder name alone)."""
    for r in sorted(runs, key=lambda r: r["status"] != "completed"):
        config = parsed(r.get("config"), {})
        if config.get("study"):
            try:
                return StudyFile.model_validate(config["study"])
            except ValidationError:         # stored by a desim whose study.json had other fields
                continue
    return study_file_or_none(study_root) or StudyFile.model_construct(id=Path(study_root).name)


def build(study_root: str | Path, sweep_id: str, metrics: list[str] | None = None) -> Report:
    """The sweep's report: card, one figure and table per metric, the runs."""
    plan, row, runs = load_plan(study_root, sweep_id)
    try:
        table = sweep_table(study_root, sweep_id, metrics)
    except SweepError as e:
        raise ReportError(str(e)) from None
    study = sweep_study(study_root, runs)
    x, lines = axis_parameters(plan)
    sections = [sweep_card(plan, row, runs, study)]
    by_metric: dict[str, list[dict[str, Any]]] = {}
    for r in table:
        by_metric.setdefault(r["metric"], []).append(r)
    if not by_metric:
        sections[0].paragraphs.append("The sweep's runs recorded no metrics, so there is nothing to plot.")
    if x is None and by_metric:
        sections.append(replicates_section(by_metric))
    for metric, rows in by_metric.items() if x is not None else ():
        sections.append(metric_section(metric, rows, plan, x, lines))
    if by_metric:
        sections.append(curves_section(study_root, plan, runs, [x] + lines if x else [], list(by_metric)))
    sections.append(runs_section(plan, runs))
    title = study.title or plan.study_id
    what = f"final-step metrics against {x}" if x else f"{plan.replicates} replicates of the study's values"
    return Report(title, f"sweep {plan.sweep_id}: {what}", sections)


def replicates_section(by_metric: dict[str, list[dict[str, Any]]]) -> Section:
    """A sweep with no grid: each metric at the runs' final step over the replicates, one row a metric."""
    rows = [[metric] + row_cells(r) + [str(r["n"])] for metric, (r,) in by_metric.items()]
    clipped = clipped_note([r for (r,) in by_metric.values()])
    return Section("Final values", ["Each metric at each run's final step, over the replicates (the sweep varies "
                                    "no parameter: only the seed differs)."],
                   [Table(["metric", "mean", "sd", "95 % low", "95 % high", "n"], rows,
                          "sd and the interval are blank where fewer than two replicates completed."
                          + (f" {clipped}" if clipped else "")
                          + (f" {left}" if (left := left_out_note([r for (r,) in by_metric.values()])) else ""))])
