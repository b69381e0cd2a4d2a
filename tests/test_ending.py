"""Runs that end when the process they model does: ``stop_when`` in simulation.json, or ``ctx.end_run``
from study code. The run is ``completed`` with its last step and the reason; sweeps, branches and
reports take runs of different lengths."""
from __future__ import annotations

import pytest

import desim
from desim import Action, DecisionModel, EnvironmentProvider, MetricCollector, Observation
from desim.cli import main
from desim.experiments.sweep import run_sweep, sweep_table
from storeq import sql


class Countdown(EnvironmentProvider):
    """Every agent counts down from ``start``; the study ends the run when everyone reached ``end_at``."""

    def __init__(self, start: int = 5, end_at: int | None = None):
        self.start, self.end_at = start, end_at

    def reset(self, seed):
        self.left = {a: self.start for a in self.ctx.agent_ids}

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, local_physical={"left": self.left[a]}) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.left[a.agent_id] = a.payload["left"]

    def agent_state(self, agent_id):
        return {"left": self.left[agent_id]}

    def end_step(self, t):
        if self.end_at is not None and max(self.left.values()) <= self.end_at:
            self.ctx.end_run(f"everyone is at {self.end_at}")


class Down(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="tick",
                       payload={"left": max(0, o.local_physical["left"] - 1)}) for o in observations]


class Left(MetricCollector):
    def collect(self, t, environment, actions):
        return {"most_left": float(max(environment.left.values()))}


def study(**extra):
    return desim.Study(environment=Countdown(start=5, end_at=extra.pop("end_at", None)), decision=Down,
                       collector=extra.pop("collector", Left), population=4, steps=10, **extra)


def row(result):
    (status, last, end_reason), = sql(result.store_path.parent.parent,
                                      "SELECT status, last_step, end_reason FROM runs WHERE run_id = ?", [result.run_id])
    return status, last, end_reason


def test_stop_when_ends_the_run_completed_at_that_step():
    result = desim.run_study(study(stop_when=[{"metric": "most_left", "op": "<=", "value": 2}]))
    assert result.status == "completed" and result.steps_done == 3
    assert result.end_reason == "stop_when: most_left <= 2 at step 3"
    assert row(result) == ("completed", 3, "stop_when: most_left <= 2 at step 3")
    assert sorted({r["step"] for r in result.panel().to_pylist()}) == [1, 2, 3]
    assert result.metrics().to_pydict()["step"] == [0, 1, 2, 3]
    # the report's card says why the run has fewer steps than n_steps
    from desim.report import write_report
    md = write_report(result.store_path.parent.parent, run_id=result.run_id)["markdown"].read_text()
    assert "| steps | 3 of 10 (step) |" in md
    assert "| status | completed, ended with its process (stop_when: most_left <= 2 at step 3) |" in md


class LeftAndDay(MetricCollector):
    def collect(self, t, environment, actions):
        return {"most_left": float(max(environment.left.values())), "day": float(t)}


def test_conditions_under_all_end_the_run_only_when_they_hold_together(tmp_path):
    both = [{"all": [{"metric": "most_left", "op": "<=", "value": 3}, {"metric": "day", "op": ">=", "value": 4}]}]
    result = desim.run_study(study(collector=LeftAndDay, stop_when=both))
    assert result.steps_done == 4         # most_left <= 3 from step 2 on, step >= 4 at 4: together at 4
    assert result.end_reason == "stop_when: most_left <= 3 and day >= 4 at step 4"
    either = [{"metric": "most_left", "op": "<=", "value": 3}, {"metric": "day", "op": ">=", "value": 4}]
    assert desim.run_study(study(collector=LeftAndDay, stop_when=either)).steps_done == 2
    # a metric inside all is checked like any, and a condition is one form or the other
    with pytest.raises(desim.StudyConfigError, match=r"stop_when\[0\]\.metric: 'cases' is not a metric"):
        desim.run_study(study(folder=tmp_path / "s", collector=LeftAndDay, stop_when=[
            {"all": [{"metric": "most_left", "value": 0}, {"metric": "cases", "value": 0}]}]))
    assert not (tmp_path / "s" / "runs").exists()
    for bad, said in (({"all": [{"metric": "most_left", "value": 0}], }, "at least 2"),
                      ({"metric": "most_left"}, "needs metric and value"),
                      ({"metric": "day", "value": 1, "all": [{"metric": "day", "value": 1}] * 2}, "not both")):
        with pytest.raises(desim.StudyConfigError, match=said):
            desim.run_study(study(collector=LeftAndDay, stop_when=[bad]))


def test_study_code_ends_the_run_with_its_reason():
    result = desim.run_study(study(end_at=1))
    assert (result.status, result.steps_done, result.end_reason) == ("completed", 4, "everyone is at 1")
    assert row(result) == ("completed", 4, "everyone is at 1")


def test_a_run_that_never_meets_its_condition_runs_every_step():
    result = desim.run_study(study(stop_when=[{"metric": "most_left", "op": "<", "value": -1}]))
    assert (result.steps_done, result.end_reason) == (10, None)
    assert row(result) == ("completed", 10, None)


def test_a_condition_on_a_metric_nobody_reports_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(desim.StudyConfigError, match=r"simulation/simulation\.json: stop_when\[1\]\.metric: 'cases' "
                                                     r"is not a metric the collector reports \(it reports: most_left\)"):
        desim.run_study(study(folder=tmp_path / "s", stop_when=[{"metric": "most_left", "op": "<", "value": 0},
                                                              {"metric": "cases", "op": "==", "value": 0}]))
    assert not (tmp_path / "s" / "runs").exists()


def test_branches_of_a_shorter_run_and_sweeps_over_runs_of_different_lengths(capsys):
    s = study(stop_when=[{"metric": "most_left", "op": "<=", "value": "$floor"}], parameters={"floor": 2})
    parent = desim.run_study(s)
    assert parent.steps_done == 3
    child = desim.branch(s.folder, parent.run_id, 2)
    assert child.status == "completed" and child.steps_done == 3
    with pytest.raises(desim.BranchRefused, match="complete only up to step 3"):
        desim.branch(s.folder, parent.run_id, 6)
    sweep = run_sweep(s.folder, {"floor": ["1", "3"]}, replicates=1, workers=1)
    finals = {r["floor"]: r["mean"] for r in sweep_table(s.folder, sweep.sweep_id, ["most_left"])}
    assert finals == {1: 1.0, 3: 3.0}                 # each run at its own last step
    assert main(["run", str(s.folder)]) == 0
    assert "ended after step 3 of 10: stop_when: most_left <= 2 at step 3" in capsys.readouterr().out
    # the branch command and the list of runs say why a run ended before its last step
    assert main(["branch", str(s.folder), "--from-run", parent.run_id, "--at-step", "2"]) == 0
    assert "ended after step 3: stop_when: most_left <= 2 at step 3" in capsys.readouterr().out
    assert main(["runs", str(s.folder)]) == 0
    listed = [line for line in capsys.readouterr().out.splitlines() if parent.run_id in line]
    assert len(listed) == 1 and "steps 3/10 (ended: stop_when: most_left <= 2 at step 3)" in listed[0]


class Paced(Countdown):
    """Counts down by the environment value ``rate`` (an intervention can raise it)."""

    def observe_batch(self, ids, t, round_idx):
        rate = self.ctx.interventions.value("rate", 1)
        return [Observation(agent_id=a, step=t, local_physical={"left": self.left[a], "rate": rate}) for a in ids]


class PacedDown(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="tick",
                       payload={"left": max(0, o.local_physical["left"] - o.local_physical["rate"])})
                for o in observations]


def test_an_effect_pairs_a_run_that_ended_early_as_it_ended():
    # control: 5, 4, 3, 2, 1, 0 -> ends at step 5; treatment (rate 2 from step 2): 4, 2, 0 -> ends at step 3
    s = desim.Study(environment=Paced(start=5), decision=PacedDown, collector=Left, population=3, steps=10,
                    parameters={"faster_at": 20}, layers={"rate": 1},
                    scheduled_events=[{"at_step": "$faster_at", "name": "faster", "target": "rate", "value": 2}],
                    stop_when=[{"metric": "most_left", "op": "<=", "value": 0}], display_states=["left"])
    effect = desim.effect(s.save(), 2, {"faster_at": 2}, replicates=2, workers=1)
    table = desim.effect_table(s.folder, effect.effect_id)
    most_left = {r["step"]: (r["mean"], r["n"]) for r in table["metrics"] if r["name"] == "most_left"}
    # steps 4 and 5: the treatment holds its 0 against the control's 1 and 0; every pair counts
    assert {s: most_left[s] for s in range(1, 6)} == {1: (0.0, 2), 2: (-1.0, 2), 3: (-2.0, 2), 4: (-1.0, 2),
                                                      5: (0.0, 2)}
    assert max(most_left) == 5                      # both arms are over by then: nothing is made up beyond
    left = {r["step"]: r["mean"] for r in table["states"] if r["field"] == "left"}
    assert left[4] == -1.0 and left[5] == 0.0


def test_two_runs_that_ended_are_paired_up_to_a_given_step_and_a_short_run_is_not_held():
    s = study(stop_when=[{"metric": "most_left", "op": "<=", "value": "$floor"}], parameters={"floor": 2})
    early = desim.run_study(s)                                   # ends at step 3 (left 2)
    late = desim.run_study(s.spec(params={"floor": 0}, seed=1))               # ends at step 5 (left 0)
    short = desim.run_study(s.spec(params={"floor": -1}, steps=4, seed=2))    # 4 steps, no end of its own
    root = s.folder
    pairs = sql(root, "SELECT step, treatment_value, control_value FROM paired_metrics(?, ?) WHERE name = "
                      "'most_left' ORDER BY step", [early.run_id, late.run_id])
    assert pairs == [(0, 5.0, 5.0), (1, 4.0, 4.0), (2, 3.0, 3.0), (3, 2.0, 2.0), (4, 2.0, 1.0), (5, 2.0, 0.0)]
    extended = sql(root, "SELECT max(step), count(*) FROM paired_panel(?, ?, until := 8)", [early.run_id, late.run_id])
    assert extended == [(8, 8 * 4)]
    # the 4-step run merely stopped: the early run is held against its step 4, but it is not carried on
    assert sql(root, "SELECT step, treatment_value, control_value FROM paired_metrics(?, ?, until := 8) "
                     "WHERE name = 'most_left' AND step > 2 ORDER BY step", [short.run_id, early.run_id]) == [
        (3, 2.0, 2.0), (4, 1.0, 2.0)]
    assert sql(root, "SELECT max(step) FROM paired_panel(?, ?, until := 8)", [late.run_id, short.run_id]) == [(4,)]


class StopsAtThree(Down):
    """Stops the run from inside step 3's decisions (a budget running out, say)."""

    def decide_batch(self, observations, memories):
        if observations[0].step == 3:
            raise desim.StopRun("budget spent")
        return super().decide_batch(observations, memories)


def test_a_run_stopped_inside_a_step_counts_the_steps_it_stored():
    result = desim.run_study(desim.Study(environment=Countdown(start=5), decision=StopsAtThree, collector=Left,
                                         population=4, steps=10))
    assert result.status == "interrupted"
    assert result.steps_done == 2 == row(result)[1]          # step 3 was in flight, not stored
    assert sorted({r["step"] for r in result.panel().to_pylist()}) == [1, 2]

