"""What study code hands the engine mid-run is refused naming the method, the step and the round, and a run
that cannot start leaves one error and no run stuck at ``running``: each case as a fuzz review found it.

One small study, a line of agents that move; ``fault`` (an argument of each component) names what goes wrong,
at step 3."""
from __future__ import annotations

import pytest

import desim
from desim import Action, DecisionModel, EnvironmentProvider, MetricCollector, Observation
from desim.errors import RunFailed
from desim.run.checks import RunError, checked_actions, checked_metrics, checked_observations
from desim.store import StudyLayout
from storeq import sql

FAULT_STEP = 3


class Line(EnvironmentProvider):
    def __init__(self, fault: str = ""):
        self.fault = fault

    def reset(self, seed):
        self.x = {a: float(i) for i, a in enumerate(self.ctx.agent_ids)}

    def observe_batch(self, ids, t, round_idx):
        observations = [Observation(agent_id=a, step=t, local_physical={"x": self.x[a]}) for a in ids]
        if t == FAULT_STEP and self.fault == "observe_none":
            return None
        if t == FAULT_STEP and self.fault == "observe_unknown":
            observations[0].agent_id = "zz"
        return observations

    def apply(self, actions):
        for a in actions:
            self.x[a.agent_id] = a.payload["x"]

    def agent_state(self, agent_id):
        return {"x": self.x[agent_id]}


class Step(DecisionModel):
    def __init__(self, fault: str = ""):
        self.fault = fault

    def decide_batch(self, observations, memories):
        if self.ctx.step == FAULT_STEP and self.fault == "keyboard_interrupt":
            raise KeyboardInterrupt         # study code's own, not a Ctrl-C
        return [Action(agent_id=o.agent_id, step=o.step, kind="move", payload={"x": o.local_physical["x"] + 1.0})
                for o in observations]


class Mean(MetricCollector):
    def __init__(self, fault: str = ""):
        self.fault = fault

    def collect(self, t, environment, actions):
        figures = {"mean_x": sum(environment.x.values()) / len(environment.x)}
        if t != FAULT_STEP or not self.fault:
            return figures
        return {"empty_name": {**figures, "": 1.0}, "list": [], "zero": 0, "text": "", "none": None}[self.fault]


def line_study(folder, *, observe: str = "", decide: str = "", collect: str = "") -> desim.Study:
    return desim.Study(environment={"ref": Line, "args": {"fault": observe}},
                       decision={"ref": Step, "args": {"fault": decide}},
                       collector={"ref": Mean, "args": {"fault": collect}},
                       population=4, steps=5, seed=1, folder=folder)


def failure(study) -> str:
    with pytest.raises(RunFailed) as failed:
        desim.run_study(study)
    return str(failed.value)


# --- 1. a run that cannot start ------------------------------------------------------------------------------
def test_a_run_that_cannot_start_raises_its_own_error_and_is_recorded_failed(tmp_path):
    """A file where the run's data folder goes: the run's row was written, then its folder could not be made;
    the recorder's close raised AttributeError over the real error (a live file that could not be made alike)
    and left the row ``running``: a stale run in ``desim runs``, one more at each attempt."""
    study = line_study(tmp_path / "line")
    data = StudyLayout(study.folder).data
    data.mkdir(parents=True)
    for run_id in ("first", "second"):
        (data / f"run_id={run_id}").write_text("x")
        with pytest.raises(OSError) as stopped:
            desim.run_study(study, run_id=run_id)
        assert f"run_id={run_id}" in str(stopped.value)
        assert not isinstance(stopped.value.__context__, AttributeError)
    rows = sql(study.folder, "SELECT run_id, status, error, traceback IS NOT NULL FROM runs ORDER BY run_id")
    assert [(run_id, status) for run_id, status, _, _ in rows] == [("first", "failed"), ("second", "failed")]
    for run_id, _, error, traced in rows:
        assert f"run_id={run_id}" in error and traced


def test_a_run_whose_live_file_cannot_be_made_says_only_why(tmp_path, monkeypatch):
    """The live progress file refused (a full disk, no permission): its ``OSError``, not ``AttributeError:
    'NoneType' object has no attribute 'finishing'`` from the recorder's close, raised while handling it."""
    from desim.store import recorder

    def refused(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))
    monkeypatch.setattr(recorder, "LiveFile", refused)
    study = line_study(tmp_path / "line")
    with pytest.raises(PermissionError) as stopped:
        desim.run_study(study)
    assert stopped.value.__context__ is None
    (status, error), = sql(study.folder, "SELECT status, error FROM runs")
    assert status == "failed" and error.startswith("PermissionError: [Errno 13] Permission denied")


# --- 2. an empty metric name -------------------------------------------------------------------------------
def test_an_empty_metric_name_is_refused_naming_the_step_and_the_collector(tmp_path):
    assert failure(line_study(tmp_path / "line", collect="empty_name")).endswith(
        f"RunError: step {FAULT_STEP}: Mean.collect: metric key '' is not a non-empty string (a metric's name is a "
        "column of the wide metrics table)")
    with pytest.raises(RunError, match="step 4: C.collect: metric key '' is not a non-empty string"):
        checked_metrics({"m": 1.0, "": 2.0}, 4, "C")


def test_the_wide_metrics_of_a_study_stay_readable_after_a_collector_names_a_metric_empty(tmp_path):
    """Accepted, the name '' made the wide metrics SQL say ``AS ""``: every run's metrics unreadable."""
    study = line_study(tmp_path / "line", collect="empty_name")
    failure(study)
    wide = desim.open(study.folder).metrics().to_pydict()
    assert "" not in wide and wide["step"] == [0, 1, 2]


# --- 3. what observe_batch returns ----------------------------------------------------------------------------
def test_observe_batch_returning_none_is_refused_naming_the_step_round_and_method(tmp_path):
    """Was ``TypeError: object of type 'NoneType' has no len()``, with no step, round or method."""
    assert failure(line_study(tmp_path / "line", observe="observe_none")).endswith(
        f"RunError: step {FAULT_STEP} round 0: observe_batch returned NoneType, not a list of observations")
    for bad in (None, (), "abc", {"a": 1}):
        with pytest.raises(RunError, match=f"step 2 round 1: observe_batch returned {type(bad).__name__}, not a list"):
            checked_observations(bad, 3, 2, 1)


def test_an_observation_for_an_unknown_agent_blames_observe_batch_not_the_decision_model(tmp_path):
    """Was ``action for unknown agent 'zz'``: the decision model acted for the agent its observation named."""
    assert failure(line_study(tmp_path / "line", observe="observe_unknown")).endswith(
        f"RunError: step {FAULT_STEP} round 0: observe_batch returned an observation for unknown agent 'zz'")


def test_observations_are_blamed_only_when_they_are_wrong():
    ids, known = ["a", "b", "c"], {"a": 0, "b": 1, "c": 2, "d": 3}
    seen = [Observation(agent_id=a, step=2) for a in ("a", "a", "c")]
    acts = [Action(agent_id=a, step=2, kind="move") for a in ("a", "a", "c")]
    with pytest.raises(RunError, match="step 2 round 1: observe_batch returned an observation for agent 'a' twice"):
        checked_actions(acts, ids, 2, 1, known, observations=seen)
    seen = [Observation(agent_id=a, step=2) for a in ("a", "d", "c")]
    with pytest.raises(RunError, match="observation for agent 'd', which did not take part in this round"):
        checked_actions([Action(agent_id=a, step=2, kind="move") for a in ("a", "d", "c")], ids, 2, 1, known,
                        observations=seen)
    # the observations are right: the decision model's own mistake is its own
    seen = [Observation(agent_id=a, step=2) for a in ids]
    with pytest.raises(RunError, match="step 2 round 1: action for unknown agent 'zz'"):
        checked_actions([Action(agent_id=a, step=2, kind="move") for a in ("a", "zz", "c")], ids, 2, 1, known,
                        observations=seen)


# --- 4. a collector that returns no dict ------------------------------------------------------------------
@pytest.mark.parametrize("fault, said", [("list", "list []"), ("zero", "int 0"), ("text", "str ''")])
def test_a_collector_returning_no_dict_is_refused_not_dropped(tmp_path, fault, said):
    """``raw or {}`` took ``[]``, ``0`` and ``""`` for no metrics: that step's figures silently missing."""
    assert failure(line_study(tmp_path / "line", collect=fault)).endswith(
        f"RunError: step {FAULT_STEP}: Mean.collect returned {said}, not a dict of metric name to number")


def test_a_collector_returning_none_reports_no_figures_that_step(tmp_path):
    """``None`` (a ``collect`` without ``return``) is no figures, as it was; only other non-dicts are refused."""
    study = line_study(tmp_path / "line", collect="none")
    assert desim.run_study(study).status == "completed"
    assert sql(study.folder, "SELECT DISTINCT step FROM metrics ORDER BY step") == [(0,), (1,), (2,), (4,), (5,)]


# --- 5. a KeyboardInterrupt raised by study code ------------------------------------------------------------
def test_a_keyboard_interrupt_raised_by_study_code_is_not_said_to_be_a_second_ctrl_c(tmp_path, capsys):
    from desim.cli import main
    study = line_study(tmp_path / "line", decide="keyboard_interrupt")
    study.save(study.folder)
    assert main(["run", str(study.folder), "--quiet"]) == 130
    (run_id, status, last), = sql(study.folder, "SELECT run_id, status, last_step FROM runs")
    assert (status, last) == ("interrupted", 2)
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "Ctrl-C stopped" not in err and "second" not in err
    assert err == (f"desim: interrupted: a KeyboardInterrupt (study code raised it: no Ctrl-C came) stopped run "
                   f"{run_id} inside step 3: steps 1..2 are kept, step 3 is lost; desim run {study.folder} --resume "
                   f"{run_id} continues it")


def test_a_misspelt_allow_nonfinite_name_is_said_when_the_run_ends(tmp_path):
    """``panel.allow_nonfinite: ["nosuch"]`` was taken silently: the field meant goes on refusing NaN and the
    name does nothing. The names no state or payload field has are said (the fields are known at the end)."""
    import json

    from walk_study import write_walk_study
    root = write_walk_study(tmp_path / "walk", n_steps=3)
    path = root / "simulation" / "simulation.json"
    data = json.loads(path.read_text())
    data["panel"] = {"allow_nonfinite": ["nosuch", "x"]}
    path.write_text(json.dumps(data))
    result = desim.run_study(desim.load_study(root))
    said = [w for w in result.warnings if "allow_nonfinite" in w]
    assert len(said) == 1 and "'nosuch'" in said[0] and "'x'" not in said[0] and "its fields: x" in said[0]
    data["panel"] = {"allow_nonfinite": ["x"]}
    path.write_text(json.dumps(data))
    assert not [w for w in desim.run_study(desim.load_study(root)).warnings if "allow_nonfinite" in w]
