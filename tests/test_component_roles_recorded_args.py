"""``desim.Study`` given desim's own diffusion components as instances (they take ``**args``): their
arguments are recorded from ``recorded_args()``, so a branch or a rerun from the study's files rebuilds
the same components and replays the same run."""
from __future__ import annotations

import json

import pytest

import desim
from desim.diffusion import SIR, LinearThreshold, NetworkState, Prevalence
from desim.errors import StudyArgumentError

NETWORK = {"kind": "watts_strogatz", "k": 4, "p": 0.1}


def rows(result, drop=("run_id", "action_source")):
    """The run's panel as sorted rows of every column but those in ``drop``."""
    return sorted(tuple((k, v) for k, v in r.items() if k not in drop) for r in result.panel().to_pylist())


def recorded(folder, rel, field):
    data = json.loads((folder / rel).read_text())
    return data[field]


def test_diffusion_instances_are_recorded_and_a_branch_replays_its_parent(tmp_path):
    folder = tmp_path / "epidemic"
    study = desim.Study(environment=NetworkState(seeds=3), decision=SIR(beta=0.3, gamma=0.2),
                        collector=Prevalence(), population=40, interaction=NETWORK, steps=6, seed=7, folder=folder)
    parent = desim.run_study(study)
    assert parent.status == "completed"
    # the arguments as given, not the defaults NetworkState fills in (seed_nodes=() is no JSON value)
    assert recorded(folder, "simulation/simulation.json", "decision") == {
        "ref": "desim.diffusion.compartmental:SIR", "args": {"beta": 0.3, "gamma": 0.2}}
    assert recorded(folder, "simulation/simulation.json", "collector") == {
        "ref": "desim.diffusion.metrics:Prevalence", "args": {}}
    assert recorded(folder, "environment/environment.json", "provider") == {
        "ref": "desim.diffusion.state:NetworkState", "args": {"seeds": 3}}
    assert parent.metrics().to_pydict()["count_I"][0] == 3          # the three seeds, at step 0

    child = desim.branch(folder, parent.run_id, 3)
    fresh = desim.run_study(desim.load_study(folder))               # no branch, the same seed, from the files
    assert child.status == fresh.status == "completed"
    before = [r for r in rows(child) if dict(r)["step"] < 3]
    assert before == [r for r in rows(parent) if dict(r)["step"] < 3] and len(before) == 2 * 40
    assert rows(child) == rows(fresh) == rows(parent) and len(rows(fresh)) == 6 * 40
    # the branch replays steps 1-2 and decides from its fork on, as its source column says
    sources = {(r["step"] < 3, r["action_source"]) for r in child.panel().to_pylist() if r["action_kind"]}
    assert sources == {(True, "replay"), (False, "rule")}


def test_a_transformed_argument_is_recorded_as_given(tmp_path):
    """LinearThreshold turns threshold="uniform" into 0.1 before its base checks it: the record keeps "uniform"
    (thresholds drawn per node), else a rerun from the files would run a fixed threshold of 0.1."""
    folder = tmp_path / "cascade"
    study = desim.Study(environment=NetworkState(seed_nodes=["a00", "a01"]),
                        decision=LinearThreshold(threshold="uniform"), collector=Prevalence(), population=30,
                        interaction=NETWORK, steps=5, seed=3, folder=folder)
    parent = desim.run_study(study)
    assert recorded(folder, "simulation/simulation.json", "decision")["args"] == {"threshold": "uniform"}
    assert recorded(folder, "environment/environment.json", "provider")["args"] == {"seed_nodes": ["a00", "a01"]}
    assert rows(desim.run_study(desim.load_study(folder))) == rows(parent)


def test_the_recorded_arguments_are_a_copy_of_what_was_given():
    given = {"attribute": "susceptibility", "default": 0.2}
    model = SIR(beta=given, gamma=0.1)
    given["default"] = 0.9                  # changed after the model was made: the record keeps what it was given
    assert model.recorded_args() == {"beta": {"attribute": "susceptibility", "default": 0.2}, "gamma": 0.1}
    assert NetworkState().recorded_args() == {} and Prevalence().recorded_args() == {}


class Tuned(SIR):
    """recorded_args giving a value JSON would hand back as another type (a tuple comes back a list)."""

    def recorded_args(self):
        return {"beta": 0.1, "gamma": (0.1, 0.2)}


class Listed(SIR):
    def recorded_args(self):
        return [("beta", 0.1)]


@pytest.mark.parametrize("decision, says", [
    (Tuned(beta=0.1, gamma=0.1), r"decision= is a Tuned instance, whose recorded_args\(\) gives argument 'gamma' "
                                 r"as \(0.1, 0.2\) \(a tuple\), which a study file cannot hold"),
    (Listed(beta=0.1, gamma=0.1), r"decision= is a Listed instance, whose recorded_args\(\) returned "
                                  r"\[\('beta', 0.1\)\] \(a list\); it must return a dict"),
])
def test_recorded_arguments_a_study_file_cannot_hold_are_refused(decision, says):
    with pytest.raises(StudyArgumentError, match=says):
        desim.Study(environment=NetworkState(seeds=1), decision=decision, population=5)
