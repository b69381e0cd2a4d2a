"""Summaries across replicates: per combination of a sweep and per metric, the
final-step value's mean, sample standard deviation and 95 % confidence
interval of the mean (Student t, n - 1 degrees of freedom).

Only completed runs count, and of them those with a number for the metric at
their last step: ``n`` says how many; a row's ``n_nan`` how many had NaN there
(left out of mean, sd and interval) and its ``n_missing`` how many had no value
for the metric at their last step (a collector that records it only
sometimes), so ``n + n_nan + n_missing`` is the combination's completed runs,
and :func:`left_out_note` says so in words under the table.
:func:`sweep_table` is what the report and the CLI call; it reads the study's
database read-only.

A t interval from few replicates can reach past what the quantity can take (a
share of 0.99 and 1.0 from two replicates gives an upper end above 1). Given
the quantity's bounds (``metric_bounds`` in study.json), :func:`describe` clips
the interval to them and says so in the row (``ci_clipped``), so every table
and figure can mark the clipped end.

A sweep or an effect some of whose runs failed summarises fewer runs than it
planned; :func:`warn_runs_failed` says so to a Python caller with a
:class:`RunsFailedWarning` (the command line reports it itself and exits 2).
"""
from __future__ import annotations

import math
import statistics
import warnings
from pathlib import Path
from typing import Any

from desim.experiments.sweep.merge import load_plan
from desim.experiments.sweep.plan import SweepError
from desim.store import Catalogue, StudyLayout, open_store, queries
from desim.study.files import read_study_file

# two-sided 95 % quantiles of Student's t, t(0.975, df), df = 1..30
T975 = [12.706204736, 4.302652730, 3.182446305, 2.776445105, 2.570581836, 2.446911851, 2.364624252,
        2.306004135, 2.262157163, 2.228138852, 2.200985160, 2.178812830, 2.160368656, 2.144786688,
        2.131449546, 2.119905299, 2.109815578, 2.100922040, 2.093024054, 2.085963447, 2.079613845,
        2.073873068, 2.068657610, 2.063898562, 2.059538553, 2.055529439, 2.051830516, 2.048407142,
        2.045229642, 2.042272456]
Z975 = 1.959963985


def t975(df: int) -> float:
    """t(0.975, df): the table up to 30, then the Cornish-Fisher expansion (error < 1e-5)."""
    if df < 1:
        raise ValueError("df must be at least 1")
    if df <= len(T975):
        return T975[df - 1]
    z = Z975
    return (z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3))


Bounds = tuple[float, float]


class RunsFailedWarning(UserWarning):
    """Runs of a sweep or an effect failed: its summaries count fewer runs (or pairs) than planned.

    Issued by ``run_sweep`` and ``desim.effect`` once every run that completed is stored, so nothing is lost
    whatever the caller's filter does with it. ``result`` is what the call would have returned (its
    ``failed`` runs and their ``errors``, and the id ``resume=`` takes). A caller that must never go on with
    a partial result makes it an error, raised at the end of the call with ``result`` attached::

        warnings.simplefilter("error", RunsFailedWarning)
    """

    def __init__(self, message: str, result: Any):
        super().__init__(message)
        self.result = result


# Shown every time, not once per line of the caller as Python's default does: a notebook cell that resumes
# an effect until it completes would otherwise hear of the first failure only. Appended, so a filter the
# caller sets ("error", "ignore") comes first and wins.
warnings.filterwarnings("always", category=RunsFailedWarning, append=True)


def warn_runs_failed(what: str, failed: int, incomplete: str, errors: dict[str, str], resume: str,
                     result: Any) -> None:
    """Warn the caller of ``run_sweep`` or ``run_effect`` (two frames up) that ``failed`` runs failed.

    ``what`` names the sweep or effect, ``incomplete`` says what its summaries count now, ``errors`` maps a
    run id to its error (the first by run id is quoted, on one line) and ``resume`` is the call that runs
    the rest."""
    first = ""
    if errors:
        run_id = min(errors)
        lines = (errors[run_id] or "").strip().splitlines()
        first = f"; first error, {run_id}: {lines[0] if lines else 'no message'}"
    message = (f"{what}: {failed} run{'s' if failed != 1 else ''} did not complete, so {incomplete}{first}. "
               f"The completed runs are stored; {resume} runs the rest")
    warnings.warn(RunsFailedWarning(message, result), stacklevel=3)


def describe(values: list[float], bounds: Bounds | None = None) -> dict[str, Any]:
    """n, mean, sd and the 95 % interval of the mean (None where n is too small).

    A NaN value (a collector's mean over nobody, or a paired difference with NaN on either side: NaN - x is
    NaN) says nothing about where the mean lies, so it is left out of the mean, sd and interval, and counted:
    ``n`` is the number of values used, ``n_nan`` the NaN values left out (0 when none; an effect or a sweep
    says so in words, ``left_out_note``). An infinite value is kept, as the store keeps it: the mean is then
    infinite (NaN for +inf and -inf together) and the sd and interval NaN, since no spread is finite.

    With ``bounds`` (low, high), the values the quantity can take, an interval end past a bound is set to
    that bound: ``ci_low_clipped`` and ``ci_high_clipped`` say which end was, ``ci_clipped`` whether either
    was (all three always present, False without bounds, so rows stay rectangular). A value outside
    ``bounds`` is a ValueError: the bounds are wrong, and a clipped interval would not hold the mean.
    """
    used = [v for v in values if not math.isnan(v)]
    n = len(used)
    row: dict[str, Any] = {"mean": None, "sd": None, "ci_low": None, "ci_high": None, "n": n,
                           "n_nan": len(values) - n,
                           "ci_clipped": False, "ci_low_clipped": False, "ci_high_clipped": False}
    if n == 0:
        return row
    if bounds is not None:
        low, high = bounds
        outside = [v for v in used if v < low or v > high]
        if outside:
            raise ValueError(f"{outside[0]!r} is outside [{low:g}, {high:g}]")
    finite = all(math.isfinite(v) for v in used)
    # fsum refuses +inf and -inf together: their mean is NaN, as the docstring says
    row["mean"] = statistics.fmean(used) if finite else sum(used) / n
    if n == 1:
        return row
    if not finite:                                  # statistics.stdev raises on an infinite value
        nan = float("nan")
        row.update(sd=nan, ci_low=nan, ci_high=nan)
        return row
    sd = statistics.stdev(used)
    half = t975(n - 1) * sd / math.sqrt(n)
    row.update(sd=sd, ci_low=row["mean"] - half, ci_high=row["mean"] + half)
    if bounds is not None:
        if row["ci_low"] < bounds[0]:
            row.update(ci_low=float(bounds[0]), ci_low_clipped=True, ci_clipped=True)
        if row["ci_high"] > bounds[1]:
            row.update(ci_high=float(bounds[1]), ci_high_clipped=True, ci_clipped=True)
    return row


def _count(k: int, one: str, many: str) -> str:
    return f"{k} {one if k == 1 else many}"


def left_out_note(rows: list[dict[str, Any]]) -> str:
    """In words, what the summary ``rows`` (of :func:`sweep_table` or ``effect_table``) left out, per metric
    (or state field, or category): NaN values (``n_nan``) and completed runs or pairs with no value
    (``n_missing``); "" when nothing was. ``n`` counts only the values used, so a table whose ``n`` is below
    its runs must say why, never silently."""
    nan: dict[str, list[dict[str, Any]]] = {}
    missing: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        label = r.get("metric") or r.get("name") or r.get("field") or "?"
        if r.get("category") is not None:
            label = f"{label} = {r['category']}"
        counts = {k: r.get(k, getattr(r, k, 0)) or 0 for k in ("n_nan", "n_missing")}   # keys, or SummaryRow's
        if counts["n_nan"]:
            nan.setdefault(label, []).append({**r, **counts})
        if counts["n_missing"]:
            missing.setdefault(label, []).append({**r, **counts})
    if not nan and not missing:
        return ""
    paired = not any("metric" in r for r in rows)     # an effect's rows (name, step), not a sweep's (metric)
    unit = "pairs" if paired else "runs"

    def where(found: list[dict[str, Any]], key: str) -> str:
        total = sum(r[key] for r in found)
        if paired:      # an effect: one row a step
            counts = sorted({r[key] for r in found})
            each = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
            steps = sorted(r["step"] for r in found)
            at = (f"step {steps[0]}" if len(steps) == 1
                  else f"each of {len(steps)} steps between {steps[0]} and {steps[-1]}")
            return f"{each} pair{'s' if counts[-1] != 1 else ''} at {at} ({total} in all)"
        return _count(total, "completed run", "completed runs") + (
            f" (in {len(found)} combinations)" if len(found) > 1 else "")

    parts = []
    if nan:
        what = ("had a NaN difference (NaN in the treatment run, the control run or both) in" if paired
                else "was NaN at the last step of")
        said = "; ".join(f"{label!r} {what} {where(found, 'n_nan')}" for label, found in nan.items())
        parts.append(f"NaN left out: {said}. NaN says nothing about where a mean lies (a mean over nobody is "
                     f"NaN), so those values are not in the mean, sd or interval, and n counts the {unit} with a "
                     "number.")
    if missing:
        what = "had no value in one run or both of" if paired else "had no value at the last step of"
        said = "; ".join(f"{label!r} {what} {where(found, 'n_missing')}" for label, found in missing.items())
        parts.append(f"No value: {said}. They are not counted in n, which is below the completed {unit} there.")
    return " ".join(parts)


def metric_bounds(study_root: str | Path) -> dict[str, Bounds]:
    """The study's ``metric_bounds`` (study.json, validated: an invalid entry is an error naming the metric),
    an open side (null) as an infinite bound."""
    inf = float("inf")
    return {name: (-inf if low is None else low, inf if high is None else high)
            for name, (low, high) in read_study_file(study_root).metric_bounds.items()}


def default_metrics(study_root: str | Path) -> list[str]:
    """The study's ``display_metrics`` (study.json)."""
    return list(read_study_file(study_root).display_metrics)


def capped_note(study_root: str | Path, sweep_id: str) -> str | None:
    """In words, the completed runs of a sweep of a study with ``stop_when`` that reached their last step before
    any condition held: their process had not ended, so their final values are not its outcome (a threshold
    cascade still spreading, an epidemic still going), which the summary of final values would otherwise hide."""
    from desim.study.files import load_study
    try:
        if not load_study(study_root).simulation.stop_when:
            return None
    except Exception:  # noqa: BLE001 - the study's files as they are now need not load: a note, not a check
        return None
    with open_store(StudyLayout(study_root)) as con:
        runs = [r for r in Catalogue(con).run_statuses(sweep_id).values() if r["status"] == "completed"]
    capped = [r for r in runs if not r["end_reason"]]
    if not capped:
        return None
    steps = sorted({r["last_step"] for r in capped})
    at = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
    return (f"{len(capped)} of {len(runs)} completed runs stopped at their last step ({at}) before any stop_when "
            "condition held: their process had not ended, so their final values are not its outcome (a larger "
            "n_steps, or --steps, lets them end)")


class SummaryRow(dict):
    """A row of :func:`sweep_table`: a dict whose keys are the columns ``desim sweep`` prints, and what its mean
    left out as attributes, not keys, so the printed table (and scripts that read it) keep their columns:
    ``n_nan``, the runs whose value was NaN, and ``n_missing``, the completed runs with no value for the metric
    at their last step."""

    n_nan: int = 0
    n_missing: int = 0


class SweepTable(list):
    """:func:`sweep_table`'s rows (:class:`SummaryRow`); ``note`` says in words what their means left out ("" when
    nothing), the line ``desim sweep`` prints under the table."""

    @property
    def note(self) -> str:
        return left_out_note(self)


def sweep_table(study_root: str | Path, sweep_id: str, metrics: list[str] | None = None) -> SweepTable:
    """One row per combination and metric: the swept parameters, ``metric``, ``mean``, ``sd``,
    ``ci_low``, ``ci_high``, ``n`` and the ``ci_clipped`` flags of :func:`describe`, at each run's final step;
    the interval is clipped to the metric's ``metric_bounds`` (study.json).

    ``n`` counts the completed runs (replicates) with a number for the metric at their own last step: a run
    whose value there is NaN is left out of mean, sd and interval and counted in the row's ``n_nan``; a
    completed run with no value for the metric at its last step (recorded at other steps only, or never) is
    left out too and counted in its ``n_missing``. ``n + n_nan + n_missing`` is the combination's completed
    runs. Those two are attributes of the row (:class:`SummaryRow`), not keys, so the columns ``desim sweep``
    prints stay as they were; the table's ``note`` (:func:`left_out_note`) says in words what was left out,
    and ``desim sweep`` prints it under the table.

    ``metrics`` defaults to the study's ``display_metrics`` (those the runs
    recorded), else every metric the sweep's runs recorded; naming a metric
    the runs did not record is an error. Rows follow the plan's order of
    combinations.
    """
    layout = StudyLayout(study_root)
    if not layout.db.exists():
        raise SweepError(f"{layout.db} does not exist: no sweep has run in {study_root}")
    with open_store(layout) as con:
        catalogue = Catalogue(con)
        plan = load_plan(catalogue, sweep_id)
        if plan is None:
            raise SweepError(f"no sweep '{sweep_id}' in {layout.db}")
        rows = queries.final_metrics_of_sweep(con, sweep_id)
        statuses = catalogue.run_statuses(sweep_id)
    recorded = sorted({name for _, name, _ in rows})
    if metrics:
        chosen = list(metrics)
        unknown = [m for m in chosen if m not in recorded]
        if unknown and recorded:
            raise SweepError(f"unknown metric(s) {', '.join(unknown)}; the sweep's runs recorded: "
                             f"{', '.join(recorded)}")
    else:   # display metrics the collector does not produce are left out, not an error
        shown = [m for m in default_metrics(study_root) if m in recorded or not recorded]
        chosen = shown or recorded
    bounds = metric_bounds(study_root)
    combo_of = {r.run_id: r.combo_idx for r in plan.runs}
    completed: dict[int, int] = {}
    for run_id, status in statuses.items():
        if status["status"] == "completed" and run_id in combo_of:
            completed[combo_of[run_id]] = completed.get(combo_of[run_id], 0) + 1
    values: dict[tuple[int, str], list[float]] = {}
    for run_id, name, value in sorted(rows):
        if run_id in combo_of:
            values.setdefault((combo_of[run_id], name), []).append(value)
    table = SweepTable()
    for combo_idx, combo in enumerate(plan.combos()):
        for metric in chosen:
            got = values.get((combo_idx, metric), [])
            try:
                summary = describe(got, bounds.get(metric))
            except ValueError as e:
                raise SweepError(f"metric '{metric}' of sweep {sweep_id}: a run's final value {e}, its "
                                 "metric_bounds in study.json; correct the bounds") from None
            row = SummaryRow(combo, metric=metric)
            row.n_nan = summary.pop("n_nan")
            row.update(summary)
            row.n_missing = max(0, completed.get(combo_idx, 0) - len(got))
            table.append(row)
    return table
