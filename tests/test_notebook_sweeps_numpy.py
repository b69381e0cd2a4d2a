"""A notebook writes a sweep's grid with numpy (``np.linspace``, ``np.arange``, a list of ``np.int64``): any 1-D
sequence or array is a grid, its numpy scalars the Python values of their kind (JSON records them and derives
the runs' seeds from them); a bare value, a 2-D array, nested lists and a set are refused naming the
parameter, before anything is recorded. An effect's treatment and control take numpy scalars the same way."""
from __future__ import annotations

import json

import numpy as np
import pytest

import desim
from desim.experiments.effects import EffectError
from desim.experiments.sweep import SweepError, make_plan, run_sweep, seed_for
from tiny_models import BIAS_COPY
from tiny_study import write_tiny_study

MODEL = BIAS_COPY

PARAMETERS = {"n": 3, "eps": 0.5, "flag": False, "rule": "a", "week": 2}


@pytest.fixture
def study(tmp_path):
    return write_tiny_study(tmp_path / "s", MODEL, {
        "n_steps": 3, "seed": 7, "parameters": PARAMETERS, "decision": {"ref": "model:Copy"}},
        environment={"layers": {"bias": 0.0}, "scheduled_events": [
            {"at_step": "$week", "name": "e", "target": "bias", "op": "set", "value": 1.0}]})


def _recorded(plan):
    """The plan as the store records it: JSON, which holds only Python values."""
    return json.loads(plan.to_json())


def test_a_linspace_grid_is_its_floats(study):
    plan = make_plan(study, {"eps": np.linspace(0.25, 0.75, 3)}, 1)
    assert plan.grid == {"eps": [0.25, 0.5, 0.75]}
    assert [type(v) for v in plan.grid["eps"]] == [float, float, float]
    assert _recorded(plan)["grid"] == {"eps": [0.25, 0.5, 0.75]}


def test_numpy_scalars_become_python_values_of_their_kind(study):
    plan = make_plan(study, {"n": [np.int64(4), np.int64(5)], "flag": [np.bool_(True)],
                             "rule": [np.str_("b")]}, 1)
    assert plan.grid == {"n": [4, 5], "flag": [True], "rule": ["b"]}
    assert [type(v) for v in plan.grid["n"] + plan.grid["flag"] + plan.grid["rule"]] == [int, int, bool, str]
    # the seeds are those of the same grid written with Python values: the run is the same run
    expected = {**PARAMETERS, "n": 4, "flag": True, "rule": "b"}
    assert plan.runs[0].parameters == expected
    assert plan.runs[0].seed == seed_for(7, expected, 0)


def test_an_arange_and_an_int_array_grid(study):
    plan = make_plan(study, {"n": np.arange(2, 5), "week": np.array([2, 3], dtype=np.int32)}, 1)
    assert plan.grid == {"n": [2, 3, 4], "week": [2, 3]}
    assert {type(v) for v in plan.grid["n"] + plan.grid["week"]} == {int}
    assert len(plan.runs) == 6


def test_a_float_array_for_an_int_parameter_is_refused_by_the_parameter_rule(study):
    with pytest.raises(SweepError, match=r"--set n: 2\.0 is a float, not an int: give 2 if that is meant"):
        make_plan(study, {"n": np.linspace(2, 4, 3)}, 1)


@pytest.mark.parametrize("value, shown", [(0.25, "0.25"), (np.float64(0.25), "0.25"), (np.array(0.25), "0.25"),
                                          ("0.25,0.5", "'0.25,0.5'")])
def test_one_value_is_refused_naming_the_parameter(study, value, shown):
    with pytest.raises(SweepError) as e:
        make_plan(study, {"eps": value}, 1)
    assert str(e.value) == (f"grid['eps']: {shown} is one value, not a list of values: give a list, "
                            f"e.g. [{shown}] for a grid of one value")


def test_a_2d_array_nested_lists_and_a_set_are_refused_naming_the_parameter(study):
    with pytest.raises(SweepError, match=r"^grid\['eps'\]: a 2-D array of shape \(2, 2\): give a 1-D list"):
        make_plan(study, {"eps": np.array([[0.1, 0.2], [0.3, 0.4]])}, 1)
    with pytest.raises(SweepError, match=r"^grid\['eps'\]: the value \[0\.1, 0\.2\] is itself a list"):
        make_plan(study, {"eps": [[0.1, 0.2]]}, 1)
    with pytest.raises(SweepError, match=r"^grid\['eps'\]: a set has no order"):
        make_plan(study, {"eps": {0.1, 0.2}}, 1)


def test_a_grid_that_is_not_a_dict_is_refused(study):
    with pytest.raises(SweepError, match=r"^the grid is a list: give a dict of parameter name to a list of values"):
        make_plan(study, [0.1, 0.2], 1)


def test_run_sweep_with_a_numpy_grid_records_python_values(study):
    result = run_sweep(study, {"n": np.array([2, 3])}, replicates=1, workers=1)
    assert result.completed == 2 and result.failed == []
    runs = desim.open(study).runs().to_pandas().set_index("run_id")
    params = {run_id: json.loads(runs.loc[run_id, "parameters"])["n"] for run_id in result.statuses}
    assert sorted(params.values()) == [2, 3]
    assert {type(v) for v in params.values()} == {int}


def test_a_refused_grid_records_no_sweep(study):
    with pytest.raises(SweepError, match=r"grid\['eps'\]"):
        run_sweep(study, {"eps": 0.3}, replicates=1, workers=1)
    assert not (study / "runs" / "desim.duckdb").exists()


def test_an_effect_takes_numpy_scalars_as_python_values(study):
    eff = desim.effect(study, 2, {"week": np.int64(3)}, replicates=2, control={"eps": np.float64(0.25)},
                       workers=1, steps=3)
    row = desim.effect_table(study, eff.effect_id)["effect"]
    recorded = {k: json.loads(row[k]) if isinstance(row[k], str) else row[k] for k in ("treatment", "control")}
    assert recorded == {"treatment": {"week": 3}, "control": {**PARAMETERS, "eps": 0.25}}
    assert type(recorded["treatment"]["week"]) is int
    # bias is set to 1 at the week: step 2 for the controls, step 3 for the branches; every agent copies it,
    # so treatment - control is 0 at step 1 (shared), -1 at step 2 (0 against 1) and 0 at step 3 (1 and 1)
    x = {r["step"]: r["mean"] for r in desim.effect_rows(study, eff.effect_id, states=["x"]) if r["what"] == "state"}
    assert x == {1: 0.0, 2: -1.0, 3: 0.0}


def test_an_effect_refuses_an_array_for_one_value(study):
    with pytest.raises(EffectError, match=r"^--set week: .*is not an int"):
        desim.effect(study, 2, {"week": np.array([3, 4])}, replicates=2, workers=1)
