"""Summaries across replicates: per combination of a sweep and per metric, the
final-step value's mean, sample standard deviation and 95 % confidence
interval of the mean (Student t, n - 1 degrees of freedom).

Only completed runs count; ``n`` says how many. :func:`sweep_table` is what
the report and the CLI call; it reads the study's database read-only.
"""
from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from desim.experiments.sweep.merge import load_plan
from desim.experiments.sweep.plan import SweepError
from desim.store import Catalogue, StudyLayout, open_store, queries
from desim.study.files import read_json

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


def describe(values: list[float]) -> dict[str, Any]:
    """n, mean, sd and the 95 % interval of the mean (None where n is too small)."""
    n = len(values)
    if n == 0:
        return {"mean": None, "sd": None, "ci_low": None, "ci_high": None, "n": 0}
    mean = statistics.fmean(values)
    if n == 1:
        return {"mean": mean, "sd": None, "ci_low": None, "ci_high": None, "n": 1}
    sd = statistics.stdev(values)
    half = t975(n - 1) * sd / math.sqrt(n)
    return {"mean": mean, "sd": sd, "ci_low": mean - half, "ci_high": mean + half, "n": n}


def default_metrics(study_root: str | Path) -> list[str]:
    """The study's ``display_metrics`` (study.json)."""
    return list(read_json(Path(study_root) / "study.json").get("display_metrics") or [])


def sweep_table(study_root: str | Path, sweep_id: str, metrics: list[str] | None = None) -> list[dict[str, Any]]:
    """One row per combination and metric: the swept parameters, ``metric``, ``mean``, ``sd``,
    ``ci_low``, ``ci_high`` and ``n`` (completed replicates), at each run's final step.

    ``metrics`` defaults to the study's ``display_metrics`` (those the runs
    recorded), else every metric the sweep's runs recorded; naming a metric
    the runs did not record is an error. Rows follow the plan's order of
    combinations.
    """
    layout = StudyLayout(study_root)
    if not layout.db.exists():
        raise SweepError(f"{layout.db} does not exist: no sweep has run in {study_root}")
    with open_store(layout) as con:
        plan = load_plan(Catalogue(con), sweep_id)
        if plan is None:
            raise SweepError(f"no sweep '{sweep_id}' in {layout.db}")
        rows = queries.final_metrics_of_sweep(con, sweep_id)
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
    combo_of = {r.run_id: r.combo_idx for r in plan.runs}
    values: dict[tuple[int, str], list[float]] = {}
    for run_id, name, value in sorted(rows):
        if run_id in combo_of:
            values.setdefault((combo_of[run_id], name), []).append(value)
    table = []
    for combo_idx, combo in enumerate(plan.combos()):
        for metric in chosen:
            table.append({**combo, "metric": metric, **describe(values.get((combo_idx, metric), []))})
    return table
