"""What `desim sweep` and `desim effect` check before they record anything, what they say of a
categorical state, how they end on Ctrl-C and on a failed run, and what the effect's figures mark.
Tiny studies, few steps, one worker."""
from __future__ import annotations

import re

import pytest

import desim.experiments.effects as effects
import desim.experiments.sweep.runner as runner
from desim.cli import main
from desim.experiments.effects import EffectError, effect_table, run_effect
from desim.experiments.sweep import SweepError, run_sweep
from storeq import sql, store_path
from walk_study import write_walk_study

ONE = ["--workers", "1"]


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("desim: error: "), err
    return lines[0]


def test_a_categorical_state_is_printed_and_reported_with_the_time_unit_and_both_arms_marks(
        study_copy, capsys, monkeypatch):
    """epidemic_testing's display state `state` (S/I/R): each category's share, treatment - control, is
    printed and reported (a table and a figure per category); the step axes say 'day'; the figures mark
    the treatment's testing from day 3 and the control's from day 10 (what the treatment moves away)."""
    root = study_copy("epidemic_testing")
    assert main(["effect", str(root), "--at-step", "3", "--set", "testing_starts=3", "--control-set",
                 "n_people=200", "--steps", "12", "--replicates", "2", *ONE]) == 0
    out = capsys.readouterr().out
    effect_id = re.search(r"effect (ef\w+):", out).group(1)
    shares = out.split("share of agents in each category")[1]
    printed = {(line.split()[1], int(line.split()[2])) for line in shares.splitlines()
               if line.split()[:1] == ["state"]}
    assert {("S", 12), ("I", 12), ("R", 12), ("I", 3)} <= printed

    from desim.report import effect as report, figures
    drawn = []
    monkeypatch.setattr(figures, "png", lambda fig: drawn.append(fig) or b"png")
    built = report.build(root, effect_id)
    titles = [s.title for s in built.sections]
    assert [t for t in titles if t.startswith("share with state")] == [f"share with state = {c}" for c in "SIR"]
    section = built.sections[titles.index("share with state = I")]
    assert section.tables[0].rows and section.figures[0].name == "effect_category_state_I"
    assert "dash-dot grey: the control's own interventions (step 10: control: testing_starts)" in \
        section.figures[0].caption
    assert {fig.axes[0].get_xlabel() for fig in drawn} == {"step (day)"}
    marks = [t.get_text() for fig in drawn[:1] for t in fig.axes[0].texts]
    assert {"treatment: testing_starts", "control: testing_starts", "fork at step 3"} <= set(marks)


def test_a_sweep_or_an_effect_refuses_a_value_the_study_refuses_before_recording(study_copy, capsys):
    """`desim run --set rule=foo` refuses it at set-up; a sweep and an effect do so before recording a
    sweep, an effect or a failed run that --resume could never mend."""
    root = study_copy("opinion_diffusion")
    assert main(["sweep", str(root), "--set", "rule=foo", "--steps", "2", *ONE]) == 2
    # the file named from where the command was typed, as desim run names it
    sim = root / "simulation" / "simulation.json"
    assert f"--set rule=foo: {sim}: parameters.rule: opinion_diffusion: must be one of" in \
        one_error_line(capsys.readouterr().err)
    assert main(["effect", str(root), "--at-step", "2", "--set", "campaign_week=3", "--control-set", "rule=foo",
                 "--steps", "3", "--replicates", "2", *ONE]) == 2
    assert f"the controls: {sim}: parameters.rule" in one_error_line(capsys.readouterr().err)
    assert not store_path(root).exists()


def test_a_value_the_studys_reset_fails_on_is_refused_before_recording(tmp_path, capsys):
    """A value that fails only in the environment's ``reset`` (rumor_network's ``n_seeds=-3``: numpy's
    "negative dimensions") passed the check, which built the study but never set it up: the sweep was
    recorded with failed runs. ``desim run`` refuses it before writing; so do a sweep and an effect now."""
    root = write_walk_study(tmp_path / "walk", n_steps=4, lockdown_day=3)
    model = root / "model.py"
    model.write_text(model.read_text().replace(
        "        self.x = {a: 0.0 for a in self.ctx.agent_ids}",
        "        if self.ctx.params['base_drift'] < 0:\n"
        "            raise ValueError('negative dimensions are not allowed')\n"
        "        self.x = {a: 0.0 for a in self.ctx.agent_ids}", 1))
    assert main(["sweep", str(root), "--set", "base_drift=0.0,-1.0", *ONE]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "--set base_drift=-1.0: " in line and "reset" in line and "negative dimensions" in line
    assert main(["effect", str(root), "--at-step", "2", "--set", "lockdown_day=2", "--control-set",
                 "base_drift=-1.0", "--replicates", "2", *ONE]) == 2
    assert "the controls: " in one_error_line(capsys.readouterr().err)
    assert not store_path(root).exists()
    assert main(["sweep", str(root), "--set", "base_drift=0.0,0.5", "-q", *ONE]) == 0     # set-ups that pass run


def test_unknown_state_and_metric_names_are_refused_before_anything_runs(tmp_path, capsys):
    root = write_walk_study(tmp_path / "walk", n_steps=5)
    effect = ["effect", str(root), "--at-step", "3", "--set", "lockdown_day=3", "--replicates", "2", *ONE]
    assert main(effect + ["--states", "nosuch"]) == 2
    assert "--states: unknown name(s) nosuch (the agents' states have: x)" in one_error_line(capsys.readouterr().err)
    assert main(effect + ["--metrics", "mean_x,nosuch"]) == 2
    assert "--metrics: unknown name(s) nosuch (the study's collector reports: mean_x, top_x)" in \
        one_error_line(capsys.readouterr().err)
    assert main(["sweep", str(root), "--set", "lockdown_day=2,3", "--metrics", "nosuch", *ONE]) == 2
    assert "unknown name(s) nosuch" in one_error_line(capsys.readouterr().err)
    assert not store_path(root).exists()
    # an effect already run: effect_table names the unknown field instead of DuckDB's binder error
    done = run_effect(root, 3, {"lockdown_day": "3"}, replicates=2, workers=1)
    with pytest.raises(EffectError, match="unknown state field.* nosuch; the effect's runs have: x"):
        effect_table(root, done.effect_id, ["nosuch"])


def test_ctrl_c_inside_a_query_exits_130_and_resume_finishes_the_effect(tmp_path, capsys, monkeypatch):
    """DuckDB turns a Ctrl-C that lands in a query into RuntimeError('Query interrupted'): the effect
    exits 130 with one line, keeps its completed runs and the card says it is incomplete; --resume
    runs only the branches that are missing."""
    root = write_walk_study(tmp_path / "walk", n_steps=5)
    merge = effects.merge_run

    def ctrl_c_in_the_second_branch(db, worker_file, run_id, *args):
        if run_id.endswith("-t1"):
            raise RuntimeError("Query interrupted")
        return merge(db, worker_file, run_id, *args)

    monkeypatch.setattr(effects, "merge_run", ctrl_c_in_the_second_branch)
    assert main(["effect", str(root), "--at-step", "3", "--set", "lockdown_day=3", "--replicates", "3", *ONE]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    effect_id = re.search(r"--resume (ef\w+)", err[-1]).group(1)
    assert err[-1] == (f"desim: interrupted; the completed runs are kept: desim effect {root} --resume {effect_id} "
                       "runs the rest") and "Traceback" not in "\n".join(err)
    statuses = dict(sql(root, "SELECT run_id, status FROM runs"))
    assert statuses == {**{f"{effect_id}-c{i}": "completed" for i in range(3)}, f"{effect_id}-t0": "completed"}
    from desim.report.effect import build
    card = build(root, effect_id).sections[0]
    assert any("Incomplete: 2 of 3 pairs have not completed" in p for p in card.paragraphs)

    monkeypatch.setattr(effects, "merge_run", merge)
    started = dict(sql(root, "SELECT run_id, started_at FROM runs"))
    assert main(["effect", str(root), "--resume", effect_id, *ONE]) == 0
    assert f"effect {effect_id}: 3 of 3 pairs completed" in capsys.readouterr().out
    after = dict(sql(root, "SELECT run_id, started_at FROM runs"))
    assert len(after) == 6 and all(after[r] == t for r, t in started.items())       # nothing ran twice
    assert main(["effect", str(root), "--resume", effect_id, "--set", "lockdown_day=4"]) == 2
    assert "drop --set" in one_error_line(capsys.readouterr().err)


def test_ctrl_c_inside_a_query_of_a_sweep_exits_130_with_its_resume_line(tmp_path, capsys, monkeypatch):
    root = write_walk_study(tmp_path / "walk", n_steps=3)

    def interrupted(*args, **kwargs):
        raise RuntimeError("Query interrupted")

    monkeypatch.setattr(runner, "merge_run", interrupted)
    assert main(["sweep", str(root), "--set", "lockdown_day=2,3", *ONE]) == 130
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.fullmatch(rf"desim: interrupted; the completed runs are kept: desim sweep {root} --resume sw\w+ "
                        "runs the rest", last)


def test_a_parameter_twice_and_fewer_than_one_worker_are_refused(tmp_path, capsys):
    root = write_walk_study(tmp_path / "walk", n_steps=4)
    assert main(["sweep", str(root), "--set", "lockdown_day=2", "--set", "lockdown_day=3", *ONE]) == 2
    assert "--set gives lockdown_day more than once" in one_error_line(capsys.readouterr().err)
    effect = ["effect", str(root), "--at-step", "2", "--replicates", "2"]
    assert main(effect + ["--set", "lockdown_day=2", "--set", "lockdown_day=3", *ONE]) == 2
    assert "--set gives lockdown_day more than once" in one_error_line(capsys.readouterr().err)
    assert main(effect + ["--set", "lockdown_day=2", "--control-set", "lockdown_day=3", "--control-set",
                          "lockdown_day=4", *ONE]) == 2
    assert "--control-set gives lockdown_day more than once" in one_error_line(capsys.readouterr().err)
    # one rule for every command that takes --set: run and branch too
    assert main(["run", str(root), "--set", "lockdown_day=2", "--set", "lockdown_day=3"]) == 2
    assert "--set gives lockdown_day more than once" in one_error_line(capsys.readouterr().err)
    for workers in ("0", "-1"):
        assert main(["sweep", str(root), "--set", "lockdown_day=2,3", "--workers", workers]) == 2
        assert f"--workers must be 1 or more (got {workers})" in one_error_line(capsys.readouterr().err)
        assert main(effect + ["--set", "lockdown_day=2", "--workers", workers]) == 2
        assert f"--workers must be 1 or more (got {workers})" in one_error_line(capsys.readouterr().err)
    with pytest.raises(SweepError, match="--workers must be 1 or more"):
        run_sweep(root, {"lockdown_day": ["2"]}, workers=0)
    assert not store_path(root).exists()


def test_effects_zero_by_construction_are_refused_and_a_treatment_past_the_end_is_warned_of(tmp_path, capsys,
                                                                                              monkeypatch):
    root = write_walk_study(tmp_path / "walk", n_steps=6, lockdown_day=4)
    effect = ["effect", str(root), "--at-step", "2", "--replicates", "2", *ONE]
    assert main(effect) == 2
    assert "give the treatment with --set" in one_error_line(capsys.readouterr().err)
    assert main(effect + ["--set", "lockdown_day=4"]) == 2
    assert ("--set lockdown_day=4 is the controls' value too (the study's value, which the controls run with)"
            in one_error_line(capsys.readouterr().err))
    assert main(effect + ["--set", "lockdown_day=3", "--control-set", "lockdown_day=3"]) == 2
    assert "(--control-set gives the controls the same)" in one_error_line(capsys.readouterr().err)
    assert not store_path(root).exists()
    # a treatment that moves the lockdown past the end takes it away: run, with run's warning
    assert main(effect + ["--set", "lockdown_day=20"]) == 0
    captured = capsys.readouterr()
    assert ("warning: treatment: environment/environment.json: scheduled_events[0].at_step: scheduled event "
            "'lockdown' is at step 20 (parameter 'lockdown_day'), after the last step (6): it never fires"
            in captured.err)
    effect_id = re.search(r"effect (ef\w+):", captured.out).group(1)
    from desim.report import effect as report, figures
    drawn = []
    monkeypatch.setattr(figures, "png", lambda fig: drawn.append(fig) or b"png")
    caption = report.build(root, effect_id).sections[1].figures[0].caption
    assert ("dotted orange: the treatment's own interventions (step 20: treatment: lockdown (after the last step: "
            "it never fires)); dash-dot grey: the control's own interventions (step 4: control: lockdown)") in caption
    assert drawn[0].axes[0].get_xlim()[1] < 8          # the step past the end is named, not drawn
    assert "control: lockdown" in [t.get_text() for t in drawn[0].axes[0].texts]


def test_a_sweep_with_a_failed_run_exits_2_as_the_readme_says(tmp_path, capsys):
    root = write_walk_study(tmp_path / "walk", n_steps=3, lockdown_day=2)
    assert main(["sweep", str(root), "--set", "exit_step=0,2", *ONE]) == 2
    out = capsys.readouterr().out
    assert "1 failed" in out and "rerun them: desim sweep" in out


def test_an_effect_prints_the_study_s_display_metrics_unless_told_others(tmp_path, capsys):
    """The walk study displays mean_x of its two metrics: the effect's table shows it alone (1,906 lines of
    every metric at every step were printed before), and --metrics chooses."""
    root = write_walk_study(tmp_path / "walk", n_steps=5)
    effect = ["effect", str(root), "--at-step", "3", "--set", "lockdown_day=3", "--replicates", "2", "-q", *ONE]

    def metrics_printed(out: str) -> set[str]:
        return {line.split()[0] for line in out.splitlines() if re.match(r"^(mean_x|top_x)\s+\d", line)}
    assert main(effect) == 0
    assert metrics_printed(capsys.readouterr().out) == {"mean_x"}
    effect_id = sql(root, "SELECT effect_id FROM effects")[0][0]
    assert main(["effect", str(root), "--resume", effect_id, "--metrics", "top_x,mean_x", "-q"]) == 0
    assert metrics_printed(capsys.readouterr().out) == {"mean_x", "top_x"}


def test_a_parameter_nothing_reads_is_refused_by_a_sweep_and_warned_of_by_run_and_validate(tmp_path, capsys):
    """A sweep over a parameter no "$name" and no study code reads gives the same runs for every value (a
    researcher read it as "beta has no effect"): refused before anything is recorded, --allow runs it anyway."""
    import json
    root = write_walk_study(tmp_path / "walk", n_steps=2, lockdown_day=2)
    sim = root / "simulation" / "simulation.json"
    data = json.loads(sim.read_text())
    data["parameters"]["beta"] = 0.1
    sim.write_text(json.dumps(data))
    said = "nothing in the study reads parameter 'beta': no \"$beta\" in its files"
    assert main(["sweep", str(root), "--set", "beta=0.1,0.2", *ONE]) == 2
    assert said in capsys.readouterr().err and not store_path(root).exists()
    assert main(["validate", str(root), "--no-probe"]) == 0
    assert f"warning: simulation/simulation.json: parameters.beta: {said}" in capsys.readouterr().out
    assert main(["run", str(root), "--set", "beta=0.3"]) == 0
    assert f"warning: --set beta: {said}" in capsys.readouterr().err
    assert main(["sweep", str(root), "--set", "beta=0.1,0.2", "--allow", "-q", *ONE]) == 0
    # a parameter the study's code reads by name is read
    (root / "model.py").write_text((root / "model.py").read_text() + "\nBETA = 'beta'\n")
    assert main(["sweep", str(root), "--set", "beta=0.1,0.2", "-q", *ONE]) == 0
    capsys.readouterr()


def test_a_sweep_or_effect_is_not_resumed_after_its_code_changed(tmp_path, capsys):
    """A resume after an edit ran the rest of an effect on other code (its branches all refused, and every
    attempt said to resume again); a sweep's runs would mix two versions. Both refuse now, naming the file."""
    import duckdb
    root = write_walk_study(tmp_path / "walk", n_steps=4, lockdown_day=3)
    assert main(["sweep", str(root), "--set", "base_drift=0.0,0.5", "-q", *ONE]) == 0
    assert main(["effect", str(root), "--at-step", "2", "--set", "lockdown_day=2", "--replicates", "2", "-q",
                 *ONE]) == 0
    sweep_id, effect_id = sql(root, "SELECT sweep_id FROM sweeps")[0][0], sql(root, "SELECT effect_id FROM effects")[0][0]
    # a run of each left failed, as a killed worker leaves it: something to resume
    with duckdb.connect(str(store_path(root))) as con:
        con.execute("UPDATE runs SET status = 'failed' WHERE run_id IN (SELECT max(run_id) FROM runs WHERE "
                    "sweep_id = ? UNION ALL SELECT max(treatment_run_id) FROM effect_pairs WHERE effect_id = ?)",
                    [sweep_id, effect_id])
    model = root / "model.py"
    model.write_text(model.read_text() + "\n# an edit\n")
    capsys.readouterr()
    assert main(["sweep", str(root), "--resume", sweep_id, *ONE]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"cannot resume sweep {sweep_id}: the study's code changed since its runs ran (model.py" in line
    assert main(["effect", str(root), "--resume", effect_id, *ONE]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"cannot resume effect {effect_id}: the study's code changed since its runs ran (model.py" in line
    model.write_text(model.read_text().replace("\n# an edit\n", ""))        # restored: both resume
    assert main(["sweep", str(root), "--resume", sweep_id, "-q", *ONE]) == 0
    assert main(["effect", str(root), "--resume", effect_id, "-q", *ONE]) == 0


def test_a_sweep_that_repeats_stored_runs_says_so(tmp_path, capsys):
    """Its seeds come from its values, so the same sweep again stores the same runs: pooled in SQL with the
    first, each would count twice (pseudo-replication). It runs, and a note says so; another seed does not."""
    root = write_walk_study(tmp_path / "walk", n_steps=4, lockdown_day=3)
    argv = ["sweep", str(root), "--set", "base_drift=0.0,0.5", "--replicates", "2", "-q", *ONE]
    assert main(argv) == 0
    first = sql(root, "SELECT sweep_id FROM sweeps")[0][0]
    assert "desim: note:" not in capsys.readouterr().err
    assert main(argv) == 0
    assert f"repeats runs already stored (4 of sweep {first})" in capsys.readouterr().err
    assert main(argv + ["--seed", "99"]) == 0
    assert "repeats runs" not in capsys.readouterr().err


def test_the_set_up_check_uses_the_seed_the_first_replicate_will_run_with(tmp_path, capsys):
    """The check ran each combination with the study's own seed, which no run of a sweep uses: a set-up that
    fails only for that seed refused a good sweep (blaming the --set value)."""
    root = write_walk_study(tmp_path / "walk", n_steps=4, lockdown_day=3)
    model = root / "model.py"
    model.write_text(model.read_text().replace(
        "        self.x = {a: 0.0 for a in self.ctx.agent_ids}",
        "        if seed == 5:       # the study's own seed (simulation.json), no sweep run's\n"
        "            raise ValueError('the study seed')\n"
        "        self.x = {a: 0.0 for a in self.ctx.agent_ids}", 1))
    assert main(["sweep", str(root), "--set", "base_drift=0.0,0.5", "-q", *ONE]) == 0, capsys.readouterr().err


def test_frames_of_installed_libraries_are_not_study_code():
    import site

    import simpy

    from desim.study.failures import _library
    assert _library(simpy.__file__) and _library(__import__("networkx").__file__)
    assert _library(str(__import__("pathlib").Path(site.getusersitepackages()) / "somepkg" / "mod.py"))
    assert not _library(__file__)                   # code of one's own (here, a test file) is not
