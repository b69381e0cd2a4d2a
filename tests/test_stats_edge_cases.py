"""Summaries at their edges: NaN metrics (left out and said, never a traceback), runs without a metric at
their last step (counted, and said), exact values printed whole, an effect report's tables from the fork to
the last step, and its curves held as its pairs are."""
from __future__ import annotations

import json
import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from desim.cli import main
from desim.experiments.effects import effect_rows, effect_table, run_effect
from desim.experiments.sweep import describe, run_sweep, sweep_table
from desim.report.numbers import estimate_cells, row_cells, show

MODEL = '''
import math

from desim import Action, DecisionModel, EnvironmentProvider, MetricCollector, Observation


class Line(EnvironmentProvider):
    def reset(self, seed):
        self.x = {a: 0.0 for a in self.ctx.agent_ids}

    def observe_batch(self, ids, t, round_idx):
        drift = self.ctx.interventions.value("drift")
        return [Observation(agent_id=a, step=t, local_physical={"x": self.x[a], "drift": drift}) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.x[a.agent_id] = a.payload["x"]

    def agent_state(self, agent_id):
        return {"x": self.x[agent_id]}


class Walk(DecisionModel):
    def decide_batch(self, observations, memories):
        t = observations[0].step
        rng = self.ctx.rng("walk")
        return [Action(agent_id=o.agent_id, step=t, kind="move",
                       payload={"x": o.local_physical["x"] + o.local_physical["drift"] + float(rng.normal())})
                for o in observations]


class Stats(MetricCollector):
    """mean_x; nan_odd: NaN at odd steps; nan_odd_seed: NaN in the runs of an odd seed; nan_in_lockdown: NaN
    once the lockdown is on (a treatment's NaN against its control's number); even_seed_only: only in runs of
    an even seed; exact: 12345 in every run; closed: 1 once the closing event fired (what stop_when reads)."""

    def collect(self, t, environment, actions):
        xs = list(environment.x.values())
        mean = sum(xs) / len(xs)
        lockdown = self.ctx.interventions.value("drift") < 0
        out = {"mean_x": mean, "nan_odd": float("nan") if t % 2 else float(t),
               "nan_odd_seed": float("nan") if self.ctx.seed % 2 else mean,
               "nan_in_lockdown": float("nan") if lockdown else mean,
               "exact": 12345.0, "closed": float(self.ctx.interventions.value("closed"))}
        if self.ctx.seed % 2 == 0:
            out["even_seed_only"] = mean
        return out
'''


def write_study(root: Path, *, n_steps: int = 8, stop: bool = False) -> Path:
    """A random walk of four agents; ``lockdown_day`` sets a negative drift, ``close_day`` (with ``stop``) ends
    the run through ``stop_when``."""
    simulation = {"n_steps": n_steps, "seed": 11,
                  "parameters": {"lockdown_day": n_steps, "close_day": n_steps, "base_drift": 0.0,
                                 "lockdown_drift": -1.0},
                  "decision": {"ref": "model:Walk"}, "collector": {"ref": "model:Stats"}}
    if stop:
        simulation["stop_when"] = [{"metric": "closed", "op": ">=", "value": 1}]
    files = {
        "study.json": {"id": root.name, "title": "edges", "display_metrics": ["mean_x"], "display_states": []},
        "simulation/simulation.json": simulation,
        "population/population.json": {"personas": [{"agent_id": f"a{i}"} for i in range(4)],
                                       "interaction": {"kind": "ring", "k": 2}},
        "environment/environment.json": {
            "provider": {"ref": "model:Line"}, "layers": {"drift": "$base_drift", "closed": 0.0},
            "scheduled_events": [
                {"at_step": "$lockdown_day", "name": "lockdown", "target": "drift", "op": "set",
                 "value": "$lockdown_drift"},
                {"at_step": "$close_day", "name": "closing", "target": "closed", "op": "set", "value": 1.0}]},
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(json.dumps(data))
    (root / "model.py").write_text(MODEL)
    return root


def final_values(root: Path, sweep_id: str, metric: str) -> list[tuple[int, float | None]]:
    """(seed, value at the run's last step or None) of every completed run of the sweep, from the store."""
    import duckdb
    con = duckdb.connect(str(root / "runs" / "desim.duckdb"), read_only=True)
    try:
        return con.execute("SELECT r.seed, m.value FROM runs r LEFT JOIN metrics m ON m.run_id = r.run_id "
                           "AND m.name = ? AND m.step = r.last_step WHERE r.sweep_id = ? AND r.status = "
                           "'completed' ORDER BY r.run_id", [metric, sweep_id]).fetchall()
    finally:
        con.close()


# --- 1. NaN -------------------------------------------------------------------------------------------

def test_describe_leaves_nan_out_and_counts_it():
    row = describe([1.0, float("nan"), 3.0])
    assert (row["mean"], row["n"], row["n_nan"]) == (2.0, 2, 1)
    assert row["sd"] == pytest.approx(math.sqrt(2)) and row["ci_low"] < 2.0 < row["ci_high"]
    nothing = describe([float("nan")] * 3, (0.0, 1.0))          # a mean over nobody, three times
    assert (nothing["mean"], nothing["sd"], nothing["n"], nothing["n_nan"]) == (None, None, 0, 3)
    infinite = describe([1.0, float("inf")])                      # kept, as the store keeps it: no spread
    assert infinite["mean"] == math.inf and math.isnan(infinite["sd"]) and infinite["n"] == 2
    assert list(describe([])) == list(row) == list(nothing) == list(infinite)      # rectangular


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    root = write_study(tmp_path_factory.mktemp("sweep") / "edges", n_steps=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_sweep(root, {"lockdown_day": [2, 3]}, replicates=4, workers=1)
    return root, result.sweep_id


def test_a_nan_final_value_is_left_out_of_the_sweep_summary_and_said(swept, capsys):
    root, sweep_id = swept
    finals = final_values(root, sweep_id, "nan_odd_seed")
    nan = sum(1 for _, v in finals if v is not None and math.isnan(v))
    assert 0 < nan < len(finals)                                  # the case at issue: some runs NaN, some not
    table = sweep_table(root, sweep_id, ["nan_odd_seed"])
    assert sum(r["n"] for r in table) == len(finals) - nan and sum(r.n_nan for r in table) == nan
    for row in table:
        assert row["mean"] is None or math.isfinite(row["mean"])
    assert "NaN left out: 'nan_odd_seed' was NaN at the last step of" in table.note
    # the command line and the report: no traceback, and the note under the table
    assert main(["sweep", str(root), "--resume", sweep_id, "--metrics", "nan_odd_seed", "-q"]) == 0
    out = capsys.readouterr().out
    assert f"NaN left out: 'nan_odd_seed' was NaN at the last step of {nan} completed runs" in out
    header = next(line for line in out.splitlines() if line.startswith("lockdown_day"))
    assert header.split() == ["lockdown_day", "metric", "mean", "sd", "ci_low", "ci_high", "n"]   # as before
    assert main(["report", str(root), "--sweep", sweep_id, "--metrics", "nan_odd_seed,mean_x"]) == 0
    pages = [p.read_text() for p in (Path(root) / "runs" / "reports").rglob("*.md")]
    assert any("NaN left out: 'nan_odd_seed'" in page for page in pages)     # under the report's table too


@pytest.fixture(scope="module")
def effect_with_nan(tmp_path_factory):
    """An effect whose treatment (lockdown from step 3) makes 'nan_in_lockdown' NaN against the controls' numbers
    (NaN - x), and whose 'nan_odd' is NaN at odd steps in both arms."""
    root = write_study(tmp_path_factory.mktemp("effect") / "edges", n_steps=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eff = run_effect(root, 3, {"lockdown_day": 3}, control={"lockdown_day": 8}, replicates=3, workers=1)
    return root, eff.effect_id


def test_a_nan_difference_is_left_out_of_the_effect_and_said(effect_with_nan, capsys):
    root, effect_id = effect_with_nan
    table = effect_table(root, effect_id)
    rows = {(m["name"], m["step"]): m for m in table["metrics"]}
    for step in range(0, 9):
        odd = rows[("nan_odd", step)]
        assert (odd["n"], odd["n_nan"], odd["mean"] is None) == ((0, 3, True) if step % 2 else (3, 0, False))
        treated = rows[("nan_in_lockdown", step)]      # NaN - x from the fork on, the same run before it
        assert (treated["n"], treated["n_nan"]) == ((0, 3) if step >= 3 else (3, 0)), step
    said = " ".join(table["notes"])
    assert "NaN left out: 'nan_in_lockdown' had a NaN difference" in said and "'nan_odd'" in said
    tidy = effect_rows(root, effect_id)
    assert len({tuple(r) for r in tidy}) == 1 and "n_nan" in tidy[0]
    assert main(["effect", str(root), "--resume", effect_id, "--metrics", "nan_odd,nan_in_lockdown", "-q"]) == 0
    out = capsys.readouterr().out
    assert "note: NaN left out: 'nan_in_lockdown' had a NaN difference" in out
    assert main(["report", str(root), "--effect", effect_id, "--metrics", "nan_odd,nan_in_lockdown"]) == 0
    from desim.report.effect import build
    report = build(root, effect_id, ["nan_odd", "nan_in_lockdown"])
    (section,) = [s for s in report.sections if s.title == "nan_in_lockdown"]
    assert "NaN left out: 'nan_in_lockdown'" in section.tables[0].note


# --- 2. the effect report's tables: from the fork to the last step ---------------------------------------

def test_the_effect_reports_tables_run_from_the_fork_to_the_last_step(tmp_path):
    from desim.report.content import MAX_TABLE_ROWS, steps_shown
    from desim.report.effect import build
    fork, n_steps = 5, 130
    root = write_study(tmp_path / "edges", n_steps=n_steps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eff = run_effect(root, fork, {"lockdown_day": fork}, control={"lockdown_day": n_steps}, replicates=2,
                         workers=1)
    report = build(root, eff.effect_id, ["mean_x"])
    (section,) = [s for s in report.sections if s.title == "mean_x"]
    table = section.tables[0]
    steps = [int(r[0]) for r in table.rows]
    assert steps[0] == fork and steps[-1] == n_steps              # the step desim effect prints last is there
    assert steps == steps_shown(list(range(fork, n_steps + 1))) and len(steps) <= MAX_TABLE_ROWS + 1
    assert f"From the fork (step {fork}) on" in table.note and f"of those {n_steps - fork + 1} steps" in table.note
    last = next(m for m in effect_table(root, eff.effect_id)["metrics"] if m["name"] == "mean_x"
                and m["step"] == n_steps)
    assert table.rows[-1][1:5] == [row_cells(last)[0], row_cells(last)[2], row_cells(last)[3], row_cells(last)[1]]


# --- 3. the effect report's curves: ended runs held to the effect's last step -------------------------------

def test_the_effect_curves_hold_ended_treatments_to_the_effects_last_step(tmp_path, monkeypatch):
    """The treatment (closing at the fork, so stop_when ends its runs there) ends at step 3, the controls at
    step 8: the pairs hold the treatment to step 8, and so must its curve."""
    from desim.report import bands
    from desim.report.effect import build
    root = write_study(tmp_path / "edges", n_steps=8, stop=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eff = run_effect(root, 3, {"close_day": 3}, control={"close_day": 8}, replicates=3, workers=1)
    assert {p["treatment_last_step"] for p in eff.pairs} == {3} and {p["control_last_step"] for p in eff.pairs} == {8}
    drawn = {}
    figure = bands.figure

    def record(metric, groups, *args, **kwargs):
        drawn[metric] = groups
        return figure(metric, groups, *args, **kwargs)

    monkeypatch.setattr(bands, "figure", record)
    build(root, eff.effect_id, ["mean_x"])
    curves = drawn["mean_x"]
    treatment, control = curves["treatment"], curves["control"]
    assert treatment["steps"][-1] == control["steps"][-1] == 8     # as far as the differences go
    held = np.asarray(treatment["values"])[:, treatment["steps"].index(3):]
    assert np.all(held == held[:, :1])                              # each run at its last value
    assert treatment["held"] == 3 and "hold their last value" in bands.caption("mean_x", curves, {})
    means = {m["step"]: m["mean"] for m in effect_table(root, eff.effect_id)["metrics"] if m["name"] == "mean_x"}
    t_mean = dict(zip(treatment["steps"], np.nanmean(treatment["values"], axis=0)))
    c_mean = dict(zip(control["steps"], np.nanmean(control["values"], axis=0)))
    assert sorted(means) == treatment["steps"] == control["steps"]
    for step, diff in means.items():                                # one rule: the curves' gap is the difference
        assert t_mean[step] - c_mean[step] == pytest.approx(diff, abs=1e-12)


# --- 4. exact values printed whole -----------------------------------------------------------------------

def test_a_value_with_no_spread_is_printed_whole():
    assert show(12345.0, None) == "12345" and show(1.0000852, None) == "1.00009"
    assert show(0.5, None) == "0.5" and show(-0.0, None) == "0"
    assert show(1234567.89, None) == "1234567.9"                   # the integer part whole, not 1.235e+06
    assert show(0.99999997, None) == "0.99999997"                   # not 1: the integer part is 0
    assert show(1.0000000001, None) == "1.00000"                    # not an integer, so not printed as one
    assert show(1.5e-9, None) == "1.5e-09"
    assert estimate_cells(12345.0, 0.0, 12345.0, 12345.0) == ["12345", "0", "12345", "12345"]
    assert estimate_cells(1.0000852, None, None, None) == ["1.00009", "", "", ""]


def test_the_sweep_prints_an_exact_value_whole(swept, capsys):
    root, sweep_id = swept
    assert main(["sweep", str(root), "--resume", sweep_id, "--metrics", "exact", "-q"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if " exact " in f" {line} "]
    assert len(rows) == 2 and all(r[2:7] == ["12345", "0", "12345", "12345", "4"] for r in rows)


# --- 5. runs without the metric at their last step ---------------------------------------------------------

def test_runs_without_the_metric_at_their_last_step_are_counted_and_said(swept, capsys):
    root, sweep_id = swept
    finals = final_values(root, sweep_id, "even_seed_only")
    lacking = sum(1 for _, v in finals if v is None)
    assert 0 < lacking < len(finals)
    table = sweep_table(root, sweep_id, ["even_seed_only"])
    assert sum(r["n"] for r in table) == len(finals) - lacking and sum(r.n_missing for r in table) == lacking
    assert all(r["n"] + r.n_nan + r.n_missing == 4 for r in table)  # the combination's completed runs
    assert main(["sweep", str(root), "--resume", sweep_id, "--metrics", "even_seed_only,mean_x", "-q"]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"No value: 'even_seed_only' had no value at the last step of {lacking} completed runs", out)
    assert "mean_x" not in out.split("No value:")[1].split(".")[0]  # the metric that lacks nothing is not named


def test_plus_and_minus_infinity_together_have_a_nan_mean_not_an_error():
    row = describe([float("inf"), float("-inf"), 1.0])        # statistics.fmean raised ValueError (fsum)
    assert math.isnan(row["mean"]) and row["n"] == 3 and math.isnan(row["sd"])
    assert describe([float("inf"), 1.0])["mean"] == float("inf")
