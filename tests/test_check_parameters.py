"""``desim.check_parameters`` and ``desim.bad_parameter``: a model refusing parameters it cannot use names
each one where the user sets it, all of them at once, and a run of the study writes nothing."""
from __future__ import annotations

import pytest

import desim
from desim import Action, DecisionModel, EnvironmentProvider, Observation


def test_every_failed_check_is_named_in_one_error_and_passing_ones_are_not():
    with pytest.raises(desim.StudyConfigError) as info:
        desim.check_parameters("mystudy", [("rate", False, "must be in [0, 1] (got 2)"),
                                           ("n_agents", True, "never shown"),
                                           ("rule", False, "must be one of a, b (got 'c')")])
    assert str(info.value).splitlines() == [
        "simulation/simulation.json: parameters.rate: mystudy: must be in [0, 1] (got 2)",
        "simulation/simulation.json: parameters.rule: mystudy: must be one of a, b (got 'c')"]
    assert desim.check_parameters("mystudy", [("rate", True, "fine")]) is None


class Rate(EnvironmentProvider):
    def __init__(self, rate: float = 0.5):
        self.rate = rate
        if not 0 <= rate <= 1:
            raise desim.bad_parameter("ratestudy", "rate", f"must be in [0, 1] (got {rate:g})")

    def reset(self, seed):
        pass

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t) for a in ids]

    def apply(self, actions):
        pass

    def agent_state(self, agent_id):
        return {}


class Idle(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="idle") for o in observations]


def test_a_study_whose_model_refuses_a_parameter_fails_before_anything_is_run(tmp_path):
    folder = tmp_path / "ratestudy"
    with pytest.raises(desim.StudyConfigError, match=r"parameters\.rate: ratestudy: must be in \[0, 1\] \(got 3\)"):
        desim.run_study(desim.Study(environment={"ref": Rate, "args": {"rate": 3}}, decision=Idle, population=2,
                                    steps=2, folder=folder))
    assert not (folder / "runs").exists()        # no store, no run row: nothing was written
