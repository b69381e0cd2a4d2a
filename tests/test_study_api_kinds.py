"""``desim.Study`` given the wrong kind of component refuses it when the study is made, naming the
argument, what was given and the methods expected, instead of an AttributeError from inside a run."""
from __future__ import annotations

import re

import numpy as np
import pytest

import desim
from desim import Action, DecisionModel, MetricCollector
from desim.errors import StudyArgumentError
from line_env import Line


class Up(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="up", payload={"x": o.local_physical["x"] + 1})
                for o in observations]


class Mean(MetricCollector):
    def collect(self, t, environment, actions):
        return {"mean_x": sum(environment.x.values()) / len(environment.x)}


class Plain:
    """A behaviour model that does not subclass DecisionModel but has every method the engine calls."""

    def reset(self, seed):
        pass

    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="up", payload={"x": o.local_physical["x"] + 2})
                for o in observations]

    def decide_columns(self, obs, idx, t, round_idx):
        raise NotImplementedError

    def close(self):
        pass


class Rows(Line):
    """Declares it has no state columns (``state_columns = None``), as contract.study_path allows."""

    state_columns = None


def made(**given):
    args = {"environment": Line, "decision": Up, "collector": Mean, "population": 4, "steps": 2}
    return desim.Study(**{**args, **given})


@pytest.mark.parametrize("given, says", [
    ({"population": 2.5}, [r"population= is 2.5 \(a float\)", "an int", "PopulationProvider implementing personas"]),
    ({"population": None}, [r"population= is None \(a NoneType\)"]),
    ({"population": 0}, ["population=0: a study needs at least one agent"]),
    ({"population": [{"agent_id": "a"}, 7]}, [r"population\[1\] is 7 \(an int\)", "desim.Persona or a dict"]),
    ({"population": Line}, ["population= is the class Line", "not a PopulationProvider", "it has no personas"]),
    ({"decision": Line}, ["decision= is the class Line", "not a DecisionModel", "it has no decide_batch",
                          "implementing decide_batch"]),
    ({"decision": lambda obs, mem: []}, ["decision= is the function <lambda>", "not a DecisionModel"]),
    ({"decision": Mean()}, ["decision= is a Mean instance", "not a DecisionModel"]),
    ({"environment": Up}, ["environment= is the class Up", "not an EnvironmentProvider",
                           "it has no agent_state, apply, observe_batch",
                           "implementing observe_batch, apply, agent_state"]),
    ({"collector": {"m": 1}}, [r"collector= is \{'m': 1\} \(a dict\)", '"ref": Class or "module:Class"']),
    ({"collector": Up}, ["collector= is the class Up", "not a MetricCollector", "it has no collect"]),
    ({"decision": {"ref": Line, "args": {}}}, ["decision= is the class Line", "not a DecisionModel"]),
    ({"decision": {"ref": 3}}, [r"decision\['ref'\] is 3 \(an int\)"]),
])
def test_a_wrong_component_is_refused_by_argument_when_the_study_is_made(given, says):
    with pytest.raises(desim.DesimError) as info:
        made(**given)
    for text in says:
        assert re.search(text, str(info.value)), (text, str(info.value))


def test_a_duck_typed_model_and_a_declared_missing_method_are_accepted_and_run():
    result = desim.run_study(made(environment=Rows, decision=Plain()))
    # agent i starts at i and moves up 2 a step: after 2 steps the mean of 0..3 (1.5) is 5.5
    assert result.metrics().to_pydict()["mean_x"][-1] == 5.5


def test_an_integer_like_population_is_a_number_of_agents():
    result = desim.run_study(made(population=np.int64(3)))
    assert sorted({r["agent_id"] for r in result.panel().to_pylist()}) == ["a0", "a1", "a2"]


MODEL_ELSEWHERE = '''
from desim import Action, DecisionModel, EnvironmentProvider, Observation


class Env(EnvironmentProvider):
    def reset(self, seed):
        self.x = {a: 0 for a in self.ctx.agent_ids}

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, round_idx=round_idx) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.x[a.agent_id] += 1

    def agent_state(self, agent_id):
        return {"x": self.x[agent_id]}


class Rule(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="step") for o in observations]
'''


def test_a_class_from_a_model_py_outside_the_study_folder_is_refused(tmp_path, monkeypatch):
    """``model:Env`` means the study folder's own model.py: a notebook's model.py beside it would not be
    found by the run (or another Env would). Refused by name; the same class with folder= its folder runs."""
    notebook = tmp_path / "notebook"
    notebook.mkdir()
    (notebook / "model.py").write_text(MODEL_ELSEWHERE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(notebook))
    monkeypatch.delitem(__import__("sys").modules, "model", raising=False)
    from model import Env, Rule
    with pytest.raises(StudyArgumentError) as refused:
        desim.Study(environment=Env, decision=Rule, population=3, steps=2)
    assert str(refused.value).startswith(f"desim.Study: environment: Env comes from {notebook / 'model.py'}, "
                                         "a module named 'model'")
    with pytest.raises(StudyArgumentError):
        desim.Study(environment=Env, decision=Rule, population=3, steps=2, folder=tmp_path / "elsewhere")
    result = desim.run_study(desim.Study(environment=Env, decision=Rule, population=3, steps=2, folder=notebook))
    assert result.status == "completed"
    assert result.panel(columns="x").column("x").to_pylist() == [1, 1, 1, 2, 2, 2]
