"""``action_rationale`` says "none given" one way: null. A per-agent ``Action`` without a rationale was stored as
``''`` while the columnar path (no rationales) stored null, so ``WHERE action_rationale IS NULL`` counted the
same model differently on its two paths."""
from __future__ import annotations

import numpy as np

import desim
from desim import Action, ActionColumns, DecisionModel, EnvironmentProvider, Observation


class Env(EnvironmentProvider):
    def reset(self, seed):
        self.x = np.zeros(len(self.ctx.agent_ids))

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.x[self.ctx.index[a.agent_id]] += 1

    def agent_state(self, agent_id):
        return {"x": float(self.x[self.ctx.index[agent_id]])}


class Some(DecisionModel):
    """Agent a0 says why, a1 does not, a2 does not act."""

    def decide_batch(self, observations, memories):
        out = []
        for o in observations:
            if o.agent_id == "a0":
                out.append(Action(agent_id="a0", step=o.step, kind="step", rationale="because"))
            elif o.agent_id == "a1":
                out.append(Action(agent_id="a1", step=o.step, kind="step"))
        return out


def test_an_action_without_a_rationale_is_stored_null_as_on_the_columnar_path():
    result = desim.run_study(desim.Study(environment=Env, decision=Some, population=3, steps=2, record_rounds=True,
                                         interaction_rounds=2))
    rows = {(r["step"], r["agent_id"]): r["action_rationale"] for r in result.panel().to_pylist()}
    assert rows == {(1, "a0"): "because", (1, "a1"): None, (1, "a2"): None,
                    (2, "a0"): "because", (2, "a1"): None, (2, "a2"): None}
    rounds = desim.open(result.store_path.parent.parent).sql(
        "SELECT agent_id, count(*) FILTER (WHERE action_rationale IS NULL) AS none FROM round_actions "
        "GROUP BY 1 ORDER BY 1").to_pylist()
    assert rounds == [{"agent_id": "a0", "none": 0}, {"agent_id": "a1", "none": 4}]
