"""``model.py`` texts that several tests' tiny studies share (written with ``tiny_study.write_tiny_study``,
or run as a notebook cell): plain strings, so nothing here keeps state between tests."""
from __future__ import annotations

BIAS_COPY = '''
from desim import Action, DecisionModel, EnvironmentProvider, Observation


class Env(EnvironmentProvider):
    def reset(self, seed):
        self.x = {a: 0.0 for a in self.ctx.agent_ids}

    def observe_batch(self, ids, t, r):
        return [Observation(agent_id=a, step=t, round_idx=r,
                            local_physical={"b": self.ctx.interventions.value("bias")}) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.x[a.agent_id] = a.payload["x"]

    def agent_state(self, a):
        return {"x": self.x[a]}


class Copy(DecisionModel):
    """Every agent takes the value of the layer 'bias': no randomness, so every value is worked out by hand
    and a difference between runs is the intervention's."""

    def decide_batch(self, obs, mem):
        return [Action(agent_id=o.agent_id, step=o.step, kind="set", payload={"x": o.local_physical["b"]})
                for o in obs]
'''
"""An ``Env`` with the layer 'bias' (the study gives it) and a ``Copy`` rule: each agent's ``x`` is the
layer's value at the step."""


def stay_model(state: str) -> str:
    """A ``model.py`` whose agents do nothing (``Decide``: kind "stay") and whose ``Env`` reports ``state``,
    a Python expression of the agent's state (e.g. ``'{"level": LEVEL}'``, LEVEL set above the text)."""
    return '''
from desim import Action, DecisionModel, EnvironmentProvider, Observation


class Env(EnvironmentProvider):
    def reset(self, seed):
        pass

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, round_idx=round_idx) for a in ids]

    def apply(self, actions):
        pass

    def agent_state(self, agent_id):
        return ''' + state + '''


class Decide(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="stay") for o in observations]
'''
