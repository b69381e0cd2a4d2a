"""Every metric of every reference study declares the bounds it cannot leave (``metric_bounds`` in study.json),
so a sweep's 95 % interval stays inside them.

Without them a sweep of few replicates printed impossible intervals: opinion_diffusion's support_share from
-0.76 to 1.72, opinion_sd from -0.25; Schelling's ``moves`` (a count) from -6. Shares and opinions lie in
[0, 1]; the standard deviation of values in [0, 1] in [0, 0.5]; NetLogo's percent similar in [0, 100]; a
count, a mean of counts or a wait has no upper bound (null in study.json, an infinite bound when read).
"""
from __future__ import annotations

import pytest

import desim
from desim.experiments.sweep import describe, run_sweep, sweep_table
from desim.experiments.sweep.checks import recorded_names
from desim.experiments.sweep.summary import metric_bounds
from storeq import query

SHARE, COUNT, SD = (0.0, 1.0), (0.0, float("inf")), (0.0, 0.5)
OPINION = {"mean_opinion": SHARE, "opinion_sd": SD, "support_share": SHARE, "extreme_share": SHARE}
DORM = {**{m: SHARE for m in ("canteen_share", "delivery_share", "cook_share", "consensus_share",
                              "changed_mind_share", "disagreement_r0", "disagreement_r1", "disagreement_r2",
                              "disagreement_final")}, "canteen_wait_min": COUNT}
BOUNDS = {
    "rumor_network": {"reach": SHARE, "share_spreader": SHARE, "share_stifler": SHARE, "share_ignorant": SHARE,
                      "new_spreaders": COUNT},
    "opinion_diffusion": OPINION,
    "opinion_diffusion_llm": OPINION,
    "schelling": {"share_happy": SHARE, "mean_same_share": SHARE, "pct_similar": (0.0, 100.0),
                  "share_fully_segregated": SHARE, "moves": COUNT},
    "sugarscape": {"population": COUNT, "sugar_left": COUNT, "mean_vision": COUNT, "mean_metabolism": COUNT,
                   "gini": SHARE},
    "dorm_deliberation": DORM,
    "dorm_deliberation_llm": DORM,
    "epidemic_testing": {**{f"share_{s}": SHARE for s in "SIR"}, "cumulative_incidence": SHARE,
                         **{f"{k}_{s}": COUNT for k in ("count", "new") for s in "SIR"},
                         **{m: COUNT for m in ("changed", "tests_done", "waiting_for_a_test", "isolated")}},
}


def copy(study_copy, study):
    if study.endswith("_llm"):
        study_copy(study.removesuffix("_llm"))                    # the variant imports its sibling's model.py
    return study_copy(study)


@pytest.mark.parametrize("study", sorted(BOUNDS))
def test_every_metric_has_its_true_bounds_and_runs_stay_inside_them(study_copy, tmp_path, study):
    root = copy(study_copy, study)
    declared = metric_bounds(root)
    assert declared == BOUNDS[study]
    metrics, _ = recorded_names(root, {})
    assert metrics == set(declared), "a metric without bounds, or bounds of no metric"
    # a few steps of the study as it stands: every value within its bounds
    run = desim.run_study(desim.load_study(root, steps=3), db_path=tmp_path / "r.duckdb").run_id
    rows = query(tmp_path / "r.duckdb", "SELECT name, step, value FROM metrics WHERE run_id = ?", [run])
    assert rows
    outside = [(n, s, v) for n, s, v in rows if not declared[n][0] <= v <= declared[n][1]]
    assert not outside


@pytest.mark.parametrize("study", sorted(BOUNDS))
def test_a_summary_clips_each_metric_at_its_bounds(study_copy, study):
    """Two replicates at a bound and near it: the t interval reaches past the bound and is clipped to it."""
    bounds = metric_bounds(copy(study_copy, study))
    assert set(bounds) == set(BOUNDS[study])
    for name, (low, high) in bounds.items():
        step = min(1.0, (high - low) / 10)
        at_low = describe([low, low + step], (low, high))
        assert at_low["ci_low"] == low and at_low["ci_low_clipped"], name
        if high < float("inf"):
            at_high = describe([high - step, high], (low, high))
            assert at_high["ci_high"] == high and at_high["ci_high_clipped"], name


def test_a_schelling_sweep_no_longer_gives_a_negative_number_of_moves(study_copy):
    """The reviewer's case: `moves`, a count, had a 95 % interval from -6; with two replicates it is now clipped
    at 0 (and the shares at 1), marked as clipped."""
    root = study_copy("schelling")
    result = run_sweep(root, {"width": [10], "height": [10]}, replicates=2, workers=1, steps=1, metrics=None)
    assert result.completed == 2
    rows = {r["metric"]: r for r in sweep_table(root, result.sweep_id, ["moves", "share_happy", "mean_same_share"])}
    for name, row in rows.items():
        low, high = BOUNDS["schelling"][name]
        assert low <= row["ci_low"] <= row["mean"] <= row["ci_high"] <= high, row
    moves = rows["moves"]
    assert moves["ci_low"] == 0 and moves["ci_low_clipped"]           # unclipped: mean - t(1) * sd / sqrt(2) < 0
