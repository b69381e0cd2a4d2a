"""Comparing two runs: treatment minus control, per step and, for paired runs,
per agent.

Metrics are compared step by step. State fields are compared agent by agent
(the same ``agent_id`` at the same step), which is meaningful when both runs
share a population: a branch and its parent, or two versions of one study.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb

from .store import fetch_dicts, field, read_only, store_path


def compare(study_root: str | Path, control: str, treatment: str,
            states: list[str] | None = None) -> dict[str, Any]:
    """Differences of ``treatment`` minus ``control``.

    Returns ``{"metrics": [{step, name, control, treatment, diff}],
    "paired": [{step, field, n, mean_diff, sd_diff, min_diff, max_diff}],
    "fork_step": int | None}``. ``states`` defaults to the study's
    ``display_states``; only numeric fields are paired.
    """
    root = Path(study_root)
    con = read_only(store_path(root))
    try:
        runs = {r["run_id"]: r for r in fetch_dicts(
            con, "SELECT run_id, parent_run_id, fork_step, config FROM runs WHERE run_id IN (?, ?)",
            [control, treatment])}
        for run_id in (control, treatment):
            if run_id not in runs:
                raise ValueError(f"no run '{run_id}' in {store_path(root)}")
        if states is None:
            states = json.loads(runs[treatment]["config"])["study"].get("display_states", [])
        metrics = fetch_dicts(con, """
            SELECT coalesce(c.step, t.step) AS step, coalesce(c.name, t.name) AS name,
                   c.value AS control, t.value AS treatment, t.value - c.value AS diff
            FROM (SELECT * FROM metrics WHERE run_id = ?) c
            FULL JOIN (SELECT * FROM metrics WHERE run_id = ?) t USING (step, name)
            ORDER BY name, step""", [control, treatment])
        paired = []
        for name in states:
            d = f"TRY_CAST({field('t.state', name)} AS DOUBLE) - TRY_CAST({field('c.state', name)} AS DOUBLE)"
            try:
                paired += fetch_dicts(con, f"""
                    SELECT t.step, ? AS field, count(*) AS n,
                           avg(d) AS mean_diff, stddev_pop(d) AS sd_diff, min(d) AS min_diff, max(d) AS max_diff
                    FROM (SELECT t.step, {d} AS d
                          FROM panel t JOIN panel c ON c.agent_id = t.agent_id AND c.step = t.step
                          WHERE t.run_id = ? AND c.run_id = ?) t
                    WHERE d IS NOT NULL GROUP BY t.step ORDER BY t.step""", [name, treatment, control])
            except duckdb.BinderException:      # a display state these runs do not have
                continue
    finally:
        con.close()
    fork = runs[treatment]["fork_step"] if runs[treatment]["parent_run_id"] == control else None
    return {"control": control, "treatment": treatment, "fork_step": fork, "metrics": metrics, "paired": paired}


def agent_differences(study_root: str | Path, control: str, treatment: str, name: str) -> list[dict[str, Any]]:
    """Per agent and step: the state field in both runs and the difference (for plots)."""
    con = read_only(store_path(study_root))
    try:
        c, t = f"TRY_CAST({field('c.state', name)} AS DOUBLE)", f"TRY_CAST({field('t.state', name)} AS DOUBLE)"
        return fetch_dicts(con, f"""
            SELECT t.step, t.agent_id, {c} AS control, {t} AS treatment, {t} - {c} AS diff
            FROM panel t JOIN panel c ON c.agent_id = t.agent_id AND c.step = t.step
            WHERE t.run_id = ? AND c.run_id = ? ORDER BY t.step, t.agent_id""", [treatment, control])
    finally:
        con.close()
