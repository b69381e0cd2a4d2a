"""``load_study(params=...)`` from Python types each value by the rule ``desim run --set`` follows
(``desim.study.params.typed_value``): what ``runs.parameters`` records is what the model ran with, and
``desim run`` says a configuration's warnings once."""
from __future__ import annotations

import json

import numpy as np
import pytest

import desim
from desim.cli import main
from desim.errors import StudyConfigError
from walk_study import write_walk_study


@pytest.fixture
def walk(tmp_path):
    return write_walk_study(tmp_path / "walk", n_steps=3, lockdown_day=2)


@pytest.mark.parametrize("value, shown", [
    (2.5, "2.5 is a float, not an int"),
    (2.0, "2.0 is a float, not an int: give 2 if that is meant"),
    (True, "True is a bool, not an int"),
])
def test_a_python_value_of_another_kind_is_refused_naming_the_parameter(walk, value, shown):
    with pytest.raises(StudyConfigError) as caught:
        desim.load_study(walk, params={"lockdown_day": value})
    assert str(caught.value) == (f"{walk / 'simulation' / 'simulation.json'}: parameters.lockdown_day: value "
                                 f"{shown} (declared as 2)")


def test_numpy_values_run_and_are_recorded_as_the_declared_python_values(walk):
    spec = desim.load_study(walk, params={"lockdown_day": np.int64(3), "base_drift": np.float32(0.5),
                                          "lockdown_drift": 2})
    assert [(v, type(v)) for v in (spec.simulation.parameters[k] for k in ("lockdown_day", "base_drift",
                                                                           "lockdown_drift"))] == \
        [(3, int), (0.5, float), (2.0, float)]
    result = desim.run_study(spec)
    recorded = json.loads(desim.open(walk).run_rows([result.run_id])[0]["parameters"])
    assert (recorded["lockdown_day"], recorded["base_drift"], recorded["lockdown_drift"]) == (3, 0.5, 2.0)
    assert type(recorded["lockdown_day"]) is int and type(recorded["lockdown_drift"]) is float
    assert desim.open(walk).events(result.run_id).column("step").to_pylist() == [3]


def test_desim_run_says_a_never_firing_intervention_once(walk, capsys):
    assert main(["run", str(walk), "--set", "lockdown_day=5"]) == 0
    err = capsys.readouterr().err
    assert err.count("it never fires") == 1
