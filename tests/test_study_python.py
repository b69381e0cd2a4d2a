"""``desim.Study``: a study built in Python from classes and instances runs, is read back, and is the
same study as the folder it writes (same panel for the same seed), so branches work on it too."""
from __future__ import annotations

import pytest

import desim
from desim import Action, DecisionModel, EnvironmentProvider, MetricCollector, Observation


class Line(EnvironmentProvider):
    def reset(self, seed):
        self.x = {a: float(i) for i, a in enumerate(self.ctx.agent_ids)}

    def observe_batch(self, ids, t, round_idx):
        level = self.ctx.interventions.value("pull")
        return [Observation(agent_id=a, step=t, local_physical={"x": self.x[a]}, macro_physical={"pull": level})
                for a in ids]

    def apply(self, actions):
        for a in actions:
            self.x[a.agent_id] = a.payload["x"]

    def agent_state(self, agent_id):
        return {"x": self.x[agent_id]}


class Walk(DecisionModel):
    """A random walk pulled towards ``pull`` at rate ``rate``."""

    def __init__(self, rate: float = 0.1, noise: float = 1.0):
        self.rate, self.noise = rate, noise

    def decide_batch(self, observations, memories):
        rng = self.ctx.rng("walk")
        return [Action(agent_id=o.agent_id, step=o.step, kind="move",
                       payload={"x": o.local_physical["x"] + self.rate * (o.macro_physical["pull"] - o.local_physical["x"])
                                + self.noise * float(rng.normal())})
                for o in observations]


class Mean(MetricCollector):
    def collect(self, t, environment, actions):
        return {"mean_x": sum(environment.x.values()) / len(environment.x)}


def walk_study(**extra) -> desim.Study:
    return desim.Study(environment=Line, decision=Walk(rate=0.3, noise=0.5), collector=Mean, population=8, steps=6,
                       seed=4, layers={"pull": 0.0},
                       scheduled_events=[{"at_step": 3, "name": "pull_up", "target": "pull", "value": 10.0}],
                       display_metrics=["mean_x"], **extra)


def panel(result):
    return result.panel().drop(["run_id"]).to_pylist()


def test_a_study_built_in_python_runs_and_reads_back():
    study = walk_study()
    result = desim.run_study(study)
    assert result.status == "completed" and result.steps_done == 6
    rows = result.panel()
    assert rows.num_rows == 8 * 6 and set(rows.column_names) >= {"step", "agent_id", "x", "action_kind"}
    wide = result.metrics().to_pydict()
    assert wide["step"] == list(range(7))
    # the event at step 3 pulls everyone up: the mean moves towards 10 from then on, not before
    assert abs(wide["mean_x"][2] - 3.5) < 3 and wide["mean_x"][6] > wide["mean_x"][3] > wide["mean_x"][2]
    assert study.folder is not None and (study.folder / "simulation" / "simulation.json").is_file()


def test_the_python_study_is_the_study_its_folder_describes(tmp_path):
    """The files a Study writes give the same panel, bit for bit, as the Study itself."""
    study = walk_study(folder=tmp_path / "walk")
    from_python = desim.run_study(study)
    folder_copy = study.save(tmp_path / "copy")
    from_files = desim.run_study(desim.load_study(folder_copy))
    assert panel(from_python) == panel(from_files)
    # the instance's arguments were recorded from its attributes
    decision = desim.load_study(folder_copy).simulation.decision
    assert decision.ref.endswith(":Walk") and decision.args == {"rate": 0.3, "noise": 0.5}


def test_a_branch_of_a_python_study_replays_its_parent_exactly():
    study = walk_study()
    parent = desim.run_study(study)
    child = desim.branch(study.folder, parent.run_id, 4)
    assert child.status == "completed"
    before = [r for r in panel(child) if r["step"] < 4]
    assert {r.pop("action_source") for r in before} == {"replay"}
    assert before == [{k: v for k, v in r.items() if k != "action_source"} for r in panel(parent) if r["step"] < 4]
    after = [r for r in panel(child) if r["step"] == 4]
    assert {r["action_source"] for r in after} == {"rule"}      # decided anew from the fork


def test_overrides_apply_as_to_a_folder():
    study = walk_study()
    short = desim.run_study(study.spec(steps=2, seed=9))
    assert short.steps_done == 2 and short.panel().num_rows == 16


def test_a_class_that_cannot_be_named_is_refused_clearly():
    class Hidden(Line):
        pass

    with pytest.raises(TypeError, match="not defined at the top of its module"):
        desim.Study(environment=Hidden, decision=Walk, population=3).files()
    with pytest.raises(TypeError, match="run_study needs a desim.Study"):
        desim.run_study("studies/x")



class Crowd(desim.PopulationProvider):
    """A population provider returning what it is given: the run checks it."""

    def __init__(self, made: str = "duplicate"):
        self.made = made

    def personas(self, rng):
        if self.made == "duplicate":
            return [desim.Persona(agent_id="a"), desim.Persona(agent_id="b"), desim.Persona(agent_id="a")]
        if self.made == "int id":       # model_construct validates nothing (README: for providers of many agents)
            return [desim.Persona.model_construct(agent_id=i) for i in range(3)]
        if self.made == "empty id":
            return [desim.Persona(agent_id="a"), desim.Persona.model_construct(agent_id="")]
        if self.made == "list attributes":
            return [desim.Persona.model_construct(agent_id="a", attributes=[1, 2])]
        return [desim.Persona(agent_id="a"), {"agent_id": "b"}]


@pytest.mark.parametrize("made, says", [("duplicate", "duplicate agent_id 'a'"),
                                        ("dict", "item 1 is a dict, not a Persona"),
                                        ("int id", r"item 0: agent_id 0 is int, not text \(str\(0\), say\)"),
                                        ("empty id", "item 1: agent_id is empty"),
                                        ("list attributes", "item 0: attributes is list, not a dict")])
def test_a_population_provider_returning_duplicates_or_non_personas_is_refused_by_name(tmp_path, made, says):
    study = desim.Study(environment=Line, decision=Walk(rate=0.3, noise=0.5), collector=Mean,
                        population=Crowd(made), steps=2, folder=tmp_path / "s")
    with pytest.raises(desim.DesimError, match=says):
        desim.run_study(study)


class ScaledWalk(Walk):
    """Keeps its argument changed (a percentage as a fraction): recording ``rate`` would rebuild another walk."""

    def __init__(self, rate: float = 10.0, noise: float = 1.0):
        super().__init__(rate / 100, noise)


def test_an_instance_its_recorded_arguments_do_not_rebuild_is_refused_when_the_study_is_made():
    with pytest.raises(desim.errors.StudyArgumentError,
                       match=r"keeps 'rate' changed: ScaledWalk\(rate=0.3\) keeps rate=0.003"):
        desim.Study(environment=Line, decision=ScaledWalk(rate=30), population=3)
    # the class with its arguments is how to give it: rebuilt from them every time
    study = desim.Study(environment=Line, decision={"ref": ScaledWalk, "args": {"rate": 30}}, population=3,
                        layers={"pull": 0.0})
    assert desim.run_study(study).status == "completed"


def test_steps_given_twice_is_refused_not_one_of_them_dropped():
    with pytest.raises(desim.errors.StudyArgumentError, match=r"n_steps=4 is simulation.json's name for steps= "
                                                              r"\(given as 3\); give steps= only"):
        desim.Study(environment=Line, decision=Walk, population=3, steps=3, n_steps=4)


def test_an_unknown_argument_is_refused_where_the_study_is_made(tmp_path):
    """step=3 was written into simulation.json and failed only at the run, naming a file never written."""
    with pytest.raises(desim.errors.StudyArgumentError,
                       match=r"unknown argument step=3; did you mean steps=\? \(besides its own arguments it takes "
                             r"simulation.json's memory_window, "):
        desim.Study(environment=Line, decision=Walk, population=3, step=3, folder=tmp_path / "s")
    assert not (tmp_path / "s").exists()                    # nothing written
    with pytest.raises(desim.errors.StudyArgumentError, match=r"unknown argument colour=1 \("):
        desim.Study(environment=Line, decision=Walk, population=3, colour=1)
    # a key of simulation.json is taken as before
    study = desim.Study(environment=Line, decision=Walk, population=3, memory_window=2, layers={"pull": 0.0})
    assert study.files()["simulation/simulation.json"]["memory_window"] == 2


def test_a_python_study_not_yet_run_is_swept_as_it_is(tmp_path):
    """run_sweep(study) of a desim.Study refused it (a path was expected), and its folder had no files until a
    run or save() wrote them: the sweep saves it first."""
    import warnings

    from desim.experiments.sweep import run_sweep
    study = walk_study(folder=tmp_path / "walk")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # RunsInProcessWarning: the classes live in this test module
        result = run_sweep(study, replicates=2, workers=1)
    assert result.completed == 2 and not result.errors
    assert desim.open(tmp_path / "walk").runs().num_rows == 2


def test_a_study_folder_is_taken_as_any_path_like():
    import os

    from desim.experiments.recording import as_root

    class Where(os.PathLike):
        def __fspath__(self):
            return "/tmp/some/study"
    assert str(as_root(Where())) == "/tmp/some/study" and str(as_root("/tmp/x")) == "/tmp/x"


def test_an_attribute_set_after_the_instance_was_made_is_said_not_dropped_silently():
    """Each run builds a component from its recorded arguments; an attribute set on the instance afterwards is
    not in them, and was dropped without a word."""
    walk = Walk(rate=0.3)
    walk.extra = 5
    with pytest.warns(UserWarning, match=r"whose 'extra' is not what its constructor makes of its recorded"):
        desim.Study(environment=Line, decision=walk, collector=Mean, population=4, steps=2, seed=1,
                    layers={"pull": 0.0})
