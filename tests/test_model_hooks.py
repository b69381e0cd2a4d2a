"""The methods a run reads back from an LLM decision (``counters``, ``warnings``, ``drain_calls``,
``resume_replays``) are found on the model's class: a rule model keeping its own ``self.counters = {...}``
or ``self.warnings = []`` ran all its steps and then failed with "'dict' object is not callable"."""
from __future__ import annotations

import desim
from desim import Action, DecisionModel, EnvironmentProvider, MetricCollector, Observation
from desim.study.contract import model_hook


class Env(EnvironmentProvider):
    def reset(self, seed):
        self.moves = {a: 0 for a in self.ctx.agent_ids}

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.moves[a.agent_id] += 1

    def agent_state(self, agent_id):
        return {"moves": self.moves[agent_id]}


class Counting(DecisionModel):
    """A rule model with bookkeeping of its own under the hooks' names."""

    def __init__(self):
        self.counters = {"decided": 0}
        self.warnings = []
        self.drain_calls = None

    def decide_batch(self, observations, memories):
        self.counters["decided"] += len(observations)
        return [Action(agent_id=o.agent_id, step=o.step, kind="move") for o in observations]


class Total(MetricCollector):
    def collect(self, t, environment, actions):
        return {"moves": float(sum(environment.moves.values()))}


def test_a_model_s_own_attributes_named_like_the_hooks_are_left_alone():
    result = desim.run_study(desim.Study(environment=Env, decision=Counting, collector=Total, population=3, steps=4))
    assert result.status == "completed" and result.steps_done == 4
    assert "llm" not in result.counters and result.warnings == []
    assert result.metrics().column("moves").to_pylist() == [0.0, 3.0, 6.0, 9.0, 12.0]


def test_model_hook_binds_the_class_s_method_and_ignores_instance_values():
    class Says(DecisionModel):
        def warnings(self):
            return [f"{type(self).__name__} says so"]

    model = Says()
    model.counters = {"x": 1}
    assert model_hook(model, "warnings")() == ["Says says so"]
    assert model_hook(model, "counters") is None and model_hook(Counting(), "warnings") is None
