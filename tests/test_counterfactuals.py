"""Counterfactuals you can trust: interventions as parameters, code in the version,
branches that inherit their parent, warm starts from Python, and paired effects
whose intervals match SQL over their runs. Real DuckDB files throughout."""
from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest
from scipy import stats

import desim
from desim import RunFailed
from desim.experiments.branches import BranchRefused, branch, resume
from desim.cli import main
from desim.study.files import StudyConfigError
from desim.experiments.effects import EffectError, effect_table, run_effect
from storeq import store_path
from desim.experiments.sweep import run_sweep
from storeq import sql
from walk_study import write_walk_study


def panel(root, run_id, until=10**6):
    return sql(root, "SELECT step, agent_id, state::VARCHAR, action_kind, payload::VARCHAR FROM panel "
                     "WHERE run_id=? AND step<=? ORDER BY step, agent_id", [run_id, until])


def fired(root, run_id):
    return sql(root, "SELECT step, name, detail->>'value' FROM events WHERE run_id=? ORDER BY step", [run_id])


def edit(path, fn):
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


def test_intervention_timing_and_value_are_parameters(tmp_path):
    root = write_walk_study(tmp_path / "walk")
    spec = desim.load_study(root, params={"lockdown_day": "3", "lockdown_drift": "0.5"})
    (event,) = spec.environment.scheduled_events
    assert (event.at_step, event.value) == (3, 0.5)
    assert json.loads(json.dumps(spec.files))["environment"]["scheduled_events"][0]["at_step"] == "$lockdown_day"
    run = desim.run_study(spec)
    assert fired(root, run.run_id) == [(3, "lockdown", "0.5")]
    edit(root / "environment" / "environment.json",
         lambda d: d["scheduled_events"][0].update(at_step="$lockdown_week"))
    with pytest.raises(StudyConfigError, match=r"environment\.json: scheduled_events\[0\]\.at_step: unknown "
                                               r"parameter '\$lockdown_week'"):
        desim.load_study(root)
    edit(root / "environment" / "environment.json", lambda d: d["scheduled_events"][0].update(at_step="$pause"))
    with pytest.raises(StudyConfigError, match=r"scheduled_events\[0\]\.at_step"):
        desim.load_study(root, params={"pause": "0.5"})     # a float step is refused like a literal one


def test_cli_run_and_sweep_over_lockdown_day(tmp_path, capsys):
    root = write_walk_study(tmp_path / "walk")
    assert main(["run", str(root), "--set", "lockdown_day=4"]) == 0
    (run_id,) = sql(root, "SELECT run_id FROM runs")[0]
    assert [s for s, *_ in fired(root, run_id)] == [4]
    result = run_sweep(root, {"lockdown_day": ["2", "5", "8"]}, replicates=2, workers=2)
    assert result.completed == 6
    steps = sql(root, "SELECT CAST(r.parameters->>'lockdown_day' AS INT), e.step FROM runs r JOIN events e "
                      "USING (run_id) WHERE r.sweep_id = ? ORDER BY 1", [result.sweep_id])
    assert steps == [(2, 2), (2, 2), (5, 5), (5, 5), (8, 8), (8, 8)]
    # the drift changes at the lockdown: before it the walks of day 5 and day 8 are the same process
    finals = {row["lockdown_day"]: row["mean"] for row in result.table if row["metric"] == "mean_x"}
    assert finals[2] < finals[5] < finals[8]


def test_code_edit_makes_a_version_and_branch_and_resume_refuse_it(tmp_path, capsys):
    root = write_walk_study(tmp_path / "walk")
    parent = desim.run_study(desim.load_study(root))
    model = root / "model.py"
    model.write_text(model.read_text().replace("float(rng.normal())", "2 * float(rng.normal())"))
    edited = desim.run_study(desim.load_study(root))
    rows = dict(sql(root, "SELECT run_id, version_id FROM runs"))
    assert rows[parent.run_id] != rows[edited.run_id]
    (diff,) = sql(root, "SELECT diff FROM versions WHERE version_id = ?", [rows[edited.run_id]])[0]
    assert [d["path"] for d in json.loads(diff)] == ["code.model.py"]
    with pytest.raises(BranchRefused, match=r"code changed since run .*: model\.py \(edited\)"):
        branch(root, parent.run_id, 4)
    assert main(["runs", str(root)]) == 0
    assert "model.py edited" in capsys.readouterr().out
    # a helper module the model could import counts too
    (root / "helpers.py").write_text("SCALE = 1\n")
    with pytest.raises(BranchRefused, match=r"helpers\.py \(added\)"):
        branch(root, edited.run_id, 4)
    # resume after an edit would mix two models in one run
    stopped = desim.load_study(root, params={"exit_step": "3"})
    with pytest.raises(RunFailed, match=r"sys\.exit\(3\) during step 3"):      # a failed run like any other
        desim.run_study(stopped)
    (stopped_id, status, error), = sql(root, "SELECT run_id, status, error FROM runs WHERE status <> 'completed'")
    assert status == "failed" and "sys.exit(3) during step 3" in error
    (root / "helpers.py").write_text("SCALE = 2\n")
    with pytest.raises(BranchRefused, match=r"cannot resume .*helpers\.py \(edited\)"):
        resume(root, stopped_id)
    # the study's sys.exit(3) does not choose desim's exit status: a failed run exits 2
    capsys.readouterr()
    assert main(["run", str(root), "--set", "exit_step=2"]) == 2
    assert "sys.exit(3) during step 2" in capsys.readouterr().err


def test_branch_of_a_seed_and_set_run_replays_exactly_and_takes_set(tmp_path, capsys):
    root = write_walk_study(tmp_path / "walk")
    assert main(["run", str(root), "--seed", "11", "--set", "base_drift=0.25", "--set", "lockdown_day=8"]) == 0
    (parent_id,) = sql(root, "SELECT run_id FROM runs")[0]
    assert main(["branch", str(root), "--from-run", parent_id, "--at-step", "5"]) == 0
    (same_id,) = sql(root, "SELECT run_id FROM runs WHERE kind = 'branch'")[0]
    assert panel(root, same_id) == panel(root, parent_id)          # no change: the parent, exactly
    assert main(["branch", str(root), "--from-run", parent_id, "--at-step", "5", "--set", "lockdown_day=5"]) == 0
    (moved_id,) = sql(root, "SELECT run_id FROM runs WHERE kind = 'branch' AND run_id <> ?", [same_id])[0]
    assert panel(root, moved_id, 4) == panel(root, parent_id, 4)
    assert panel(root, moved_id) != panel(root, parent_id)
    assert [s for s, *_ in fired(root, moved_id)] == [5]
    seed, over = sql(root, "SELECT seed, overrides FROM runs WHERE run_id = ?", [moved_id])[0]
    assert seed == 11 and json.loads(over) == {"seed": 11, "set": {"base_drift": 0.25, "lockdown_day": 5}}
    capsys.readouterr()
    assert main(["runs", str(root)]) == 0
    assert "--seed 11 --set base_drift=0.25 --set lockdown_day=8" in capsys.readouterr().out
    # a parameter used outside the interventions, or a lockdown moved before the fork, is refused
    assert main(["branch", str(root), "--from-run", parent_id, "--at-step", "5", "--set", "base_drift=1"]) == 2
    assert "used outside the interventions (environment.layers.drift)" in capsys.readouterr().err
    assert main(["branch", str(root), "--from-run", parent_id, "--at-step", "5", "--set", "lockdown_day=3"]) == 2
    assert "scheduled_events before step 5 changed (lockdown)" in capsys.readouterr().err


def test_a_parameter_named_after_the_layer_it_sets_branches_unless_code_reads_the_parameter(tmp_path, capsys):
    # the event sets layer 'drift' to "$drift": model.py spells "drift" to read the layer, not the parameter
    root = write_walk_study(tmp_path / "walk")
    edit(root / "simulation" / "simulation.json",
         lambda d: d["parameters"].update(drift=d["parameters"].pop("lockdown_drift")))
    edit(root / "environment" / "environment.json", lambda d: d["scheduled_events"][0].update(value="$drift"))
    assert main(["run", str(root)]) == 0
    (parent_id,) = sql(root, "SELECT run_id FROM runs")[0]
    assert main(["branch", str(root), "--from-run", parent_id, "--at-step", "3", "--set", "drift=2.5"]) == 0
    (child,) = sql(root, "SELECT run_id FROM runs WHERE kind = 'branch'")[0]
    assert fired(root, child) == [(6, "lockdown", "2.5")]
    # code that reads the parameter itself is refused, as any parameter spelled in code is
    model = root / "model.py"
    model.write_text(model.read_text().replace('drift = self.ctx.interventions.value("drift")',
                                               'drift = self.ctx.interventions.value("drift") * '
                                               '(1 + 0 * self.ctx.params["drift"])'))
    assert main(["run", str(root)]) == 0
    (edited,) = sql(root, "SELECT run_id FROM runs WHERE kind = 'run' ORDER BY started_at DESC LIMIT 1")[0]
    capsys.readouterr()
    assert main(["branch", str(root), "--from-run", edited, "--at-step", "3", "--set", "drift=2.5"]) == 2
    assert "model.py mentions 'drift' (code may read it through ctx.params" in capsys.readouterr().err


def test_run_study_honours_warm_start(tmp_path):
    root = write_walk_study(tmp_path / "walk")
    parent = desim.run_study(desim.load_study(root))
    edit(root / "simulation" / "simulation.json",
         lambda d: d.update(warm_start={"from_run": parent.run_id, "at_step": 4}))
    warm = desim.run_study(desim.load_study(root))
    assert sql(root, "SELECT kind, parent_run_id, fork_step FROM runs WHERE run_id = ?", [warm.run_id]) == \
        [("branch", parent.run_id, 4)]
    assert panel(root, warm.run_id, 3) == panel(root, parent.run_id, 3)
    assert set(sql(root, "SELECT DISTINCT action_source FROM panel WHERE run_id = ? AND step < 4",
                   [warm.run_id])) == {("replay",)}
    edit(root / "simulation" / "simulation.json", lambda d: d.update(interaction_rounds=3))
    before = sql(root, "SELECT count(*) FROM runs")
    with pytest.raises(BranchRefused, match="interaction_rounds is 3"):
        desim.run_study(desim.load_study(root))
    assert sql(root, "SELECT count(*) FROM runs") == before


def t_interval(values):
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


@pytest.mark.slow
def test_effect_intervals_match_sql_over_its_runs(tmp_path, capsys):
    root = write_walk_study(tmp_path / "walk", n_agents=5, n_steps=8, lockdown_day=6)
    sweep = run_sweep(root, {"lockdown_day": ["6"]}, replicates=2, workers=2)   # two controls to reuse
    result = run_effect(root, 3, {"lockdown_day": "3"}, replicates=4, workers=2)
    assert result.reused == 2 and not result.errors
    pairs = sql(root, "SELECT replicate, control_run_id, treatment_run_id FROM effect_pairs WHERE effect_id = ? "
                      "ORDER BY replicate", [result.effect_id])
    assert [c for _, c, _ in pairs][:2] == sorted(r.run_id for r in sweep.plan.runs)
    assert sql(root, "SELECT DISTINCT kind, fork_step FROM runs WHERE run_id IN (SELECT treatment_run_id FROM "
                     "effect_pairs)") == [("branch", 3)]
    for _, control, treatment in pairs:
        assert panel(root, treatment, 2) == panel(root, control, 2)
    table = effect_table(root, result.effect_id)
    got = {(m["name"], m["step"]): m for m in table["metrics"]}
    diffs = sql(root, """SELECT c.name, c.step, list(t.value - c.value ORDER BY p.replicate)
                         FROM effect_pairs p JOIN metrics c ON c.run_id = p.control_run_id
                         JOIN metrics t ON t.run_id = p.treatment_run_id AND t.step = c.step AND t.name = c.name
                         WHERE p.effect_id = ? GROUP BY ALL""", [result.effect_id])
    assert len(diffs) == len(got) == 2 * 9
    for name, step, values in diffs:
        m = got[(name, step)]
        assert m["n"] == 4
        if step < 3:
            assert values == [0.0] * 4 and m["mean"] == 0.0
            continue
        mean, low, high = t_interval(values)
        assert m["mean"] == pytest.approx(mean, abs=1e-12)
        assert (m["ci_low"], m["ci_high"]) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
    # the lockdown's drift of -1 per step from step 3 instead of 6: about -1, -2, -3 and then -3
    assert [round(got[("mean_x", s)]["mean"]) for s in (3, 4, 5, 6, 7, 8)] == [-1, -2, -3, -3, -3, -3]
    per_agent = sql(root, """SELECT t.step, avg(TRY_CAST(t.state.x AS DOUBLE) - TRY_CAST(c.state.x AS DOUBLE))
                             FROM effect_pairs p JOIN panel c ON c.run_id = p.control_run_id
                             JOIN panel t ON t.run_id = p.treatment_run_id AND t.step = c.step
                                          AND t.agent_id = c.agent_id
                             WHERE p.effect_id = ? AND t.step = 5 GROUP BY t.step""", [result.effect_id])
    (state5,) = [s for s in table["states"] if s["step"] == 5]
    assert state5["field"] == "x" and state5["mean"] == pytest.approx(per_agent[0][1], abs=1e-12)
    assert state5["share_changed"] == 1.0
    # the report draws it; a second effect reuses all four controls
    assert main(["report", str(root), "--effect", result.effect_id]) == 0
    assert (root / "runs" / "reports" / f"effect-{result.effect_id}" / "effect_mean_x.png").stat().st_size > 5000
    again = run_effect(root, 3, {"lockdown_day": "4"}, replicates=4, workers=1)
    assert again.reused == 4
    assert not (root / "runs" / "effects").exists()


def test_effect_refuses_a_treatment_that_is_not_an_intervention(tmp_path):
    root = write_walk_study(tmp_path / "walk")
    with pytest.raises(EffectError, match="base_drift changed .* used outside the interventions"):
        run_effect(root, 3, {"base_drift": "1"}, replicates=2)
    with pytest.raises(EffectError, match="declares no parameter 'lockdown_week'"):
        run_effect(root, 3, {"lockdown_week": "1"}, replicates=2)
    with pytest.raises(EffectError, match=r"--at-step 9 is after the last step \(8\)"):    # a fork past the horizon
        run_effect(root, 9, {"lockdown_day": "4"}, replicates=2, steps=8)
    assert not store_path(root).exists()    # checked before anything ran


def test_an_intervention_after_the_horizon_is_said_by_run_and_refused_by_sweep(tmp_path, capsys):
    """The run's own values (--set, --steps) are checked, not the file's defaults: a lockdown at day 20 of a
    10-day run never fires, which a run warns about and a sweep refuses unless --allow."""
    root = write_walk_study(tmp_path / "walk", n_steps=10)
    assert main(["run", str(root)]) == 0
    assert "never fires" not in capsys.readouterr().err                  # day 6 of 10: fine
    assert main(["run", str(root), "--set", "lockdown_day=20"]) == 0
    err = capsys.readouterr().err
    assert "warning: environment/environment.json: scheduled_events[0].at_step: scheduled event 'lockdown' is at " \
           "step 20 (parameter 'lockdown_day'), after the last step (10): it never fires" in err
    assert main(["run", str(root), "--steps", "4"]) == 0                 # the default day 6, after a shorter run
    assert "is at step 6 (parameter 'lockdown_day'), after the last step (4)" in capsys.readouterr().err
    before = sql(root, "SELECT count(*) FROM runs")[0][0]
    assert main(["sweep", str(root), "--set", "lockdown_day=3,20", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert "lockdown_day=20: environment/environment.json" in err and "lockdown_day=3:" not in err
    assert "--allow" in err and sql(root, "SELECT count(*) FROM runs")[0][0] == before      # nothing ran
    assert main(["sweep", str(root), "--set", "lockdown_day=3,20", "--workers", "1", "--allow"]) == 0
    assert sql(root, "SELECT count(*) FROM runs")[0][0] == before + 2


def test_which_run_a_read_means_and_the_runs_by_role(tmp_path):
    """After a sweep and an effect, desim.open(s).panel() reads the latest plain run, not a treatment; runs()
    says each run's sweep, effect and arm in typed columns, and its parameters one typed column each."""
    root = write_walk_study(tmp_path / "walk", n_steps=8)
    plain = desim.run_study(desim.load_study(root, params={"lockdown_day": 5}))
    sweep = run_sweep(root, {"lockdown_day": ["2", "3"]}, replicates=1, workers=1)
    effect = run_effect(root, 3, {"lockdown_day": "4"}, replicates=2, workers=1)
    data = desim.open(root)
    assert data.run_ids(None) == [plain.run_id]
    assert set(data.panel().column("run_id").to_pylist()) == {plain.run_id}
    runs = data.runs()
    by_id = {r["run_id"]: r for r in runs.to_pylist()}
    assert by_id[plain.run_id]["sweep_id"] is None and by_id[plain.run_id]["arm"] is None
    treatments = data.select_runs(effect=effect.effect_id, arm="treatment")
    controls = data.select_runs(effect=effect.effect_id, arm="control")
    assert len(treatments) == len(controls) == 2 and not set(treatments) & set(controls)
    assert {by_id[r]["effect_id"] for r in treatments + controls} == {effect.effect_id}
    assert sorted(data.select_runs(sweep=sweep.sweep_id)) == sorted(r.run_id for r in sweep.plan.runs)
    assert runs.schema.field("param_lockdown_day").type == pa.int64()
    assert by_id[plain.run_id]["param_lockdown_day"] == 5
    assert sorted(by_id[r]["param_lockdown_day"] for r in data.select_runs(sweep=sweep.sweep_id)) == [2, 3]
    assert set(data.metrics(treatments).column("run_id").to_pylist()) == set(treatments)
    with pytest.raises(ValueError, match="give effect= too"):
        data.select_runs(arm="control")


def test_an_effect_as_one_tidy_table_with_category_shares(study_copy):
    """effect_rows: one row per metric / category and step, plain values (a DataFrame takes it as it is);
    a categorical state's rows are the mean over pairs of each category's share, treatment - control,
    checked against the two panels of each pair."""
    root = study_copy("epidemic_testing")
    eff = run_effect(root, 5, {"testing_starts": 5}, control={"testing_starts": 40, "n_people": 300},
                     replicates=3, steps=20, workers=1)
    rows = desim.effect_rows(root, eff.effect_id)
    assert {r["what"] for r in rows} == {"metric", "share"}
    assert all(not isinstance(v, (dict, list)) for r in rows for v in r.values())
    assert len({tuple(r) for r in rows}) == 1                        # every row has the same columns
    data = desim.open(root)

    def shares(run_id):
        out = {}
        for row in data.panel(run_id, columns=["state"]).to_pylist():
            out.setdefault(row["step"], []).append(row["state"])
        return {s: {c: v.count(c) / len(v) for c in ("S", "I", "R")} for s, v in out.items()}

    pairs = [(shares(p["treatment_run_id"]), shares(p["control_run_id"])) for p in eff.pairs]
    checked = 0
    for r in rows:
        if r["what"] == "share" and all(r["step"] in t and r["step"] in c for t, c in pairs):
            want = sum(t[r["step"]][r["category"]] - c[r["step"]][r["category"]] for t, c in pairs) / len(pairs)
            assert r["mean"] == pytest.approx(want, abs=1e-12) and r["n"] == 3
            checked += 1
    assert checked >= 3 * 15
    assert any(r["what"] == "share" and r["mean"] != 0 for r in rows)    # testing earlier changed something
    # the effect's figures mark the treatment's own intervention (testing from day 5), not only the fork
    from desim.report.effect import build, treatment_events
    assert treatment_events(root, desim.effect_table(root, eff.effect_id)) == {5: ["treatment: testing_starts"]}
    captions = [f.caption for section in build(root, eff.effect_id).sections for f in section.figures]
    assert any("the treatment's own interventions (step 5: treatment: testing_starts)" in c for c in captions)
