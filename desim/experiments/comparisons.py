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

from desim.store import Catalogue, StudyLayout, open_store, queries
from desim.store import states as state_reads


def compare(study_root: str | Path, control: str, treatment: str,
            states: list[str] | None = None) -> dict[str, Any]:
    """Differences of ``treatment`` minus ``control``.

    Returns ``{"metrics": [{step, name, control, treatment, diff}],
    "paired": [{step, field, n, mean_diff, sd_diff, min_diff, max_diff}],
    "fork_step": int | None}``. ``states`` defaults to the study's
    ``display_states``; only numeric fields are paired.
    """
    layout = StudyLayout(study_root)
    with open_store(layout) as con:
        runs = {r["run_id"]: r for r in Catalogue(con).runs(run_ids=[control, treatment])}
        for run_id in (control, treatment):
            if run_id not in runs:
                raise ValueError(f"no run '{run_id}' in {layout.db}")
        if states is None:
            states = json.loads(runs[treatment]["config"])["study"].get("display_states", [])
        metrics = queries.metric_comparison(con, control, treatment)
        paired = []
        for name in states:
            if not state_reads.has_field(con, name):     # a display state these runs do not have
                continue
            paired += [{"step": step, "field": name, "n": n, "mean_diff": mean, "sd_diff": sd, "min_diff": lo,
                        "max_diff": hi}
                       for step, n, mean, sd, lo, hi in state_reads.paired_summary(con, treatment, control, name)]
    fork = runs[treatment]["fork_step"] if runs[treatment]["parent_run_id"] == control else None
    return {"control": control, "treatment": treatment, "fork_step": fork, "metrics": metrics, "paired": paired}


def agent_differences(study_root: str | Path, control: str, treatment: str, name: str) -> list[dict[str, Any]]:
    """Per agent and step: the state field in both runs and the difference (for plots)."""
    with open_store(StudyLayout(study_root)) as con:
        return [{"step": step, "agent_id": agent, "control": c, "treatment": t, "diff": d}
                for step, agent, c, t, d in state_reads.paired_values(con, treatment, control, name)]
