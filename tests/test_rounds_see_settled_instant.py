"""The seed: ``advance_to(t)`` fires the step's exogenous input once, before round 0, and intermediate rounds
see no new exogenous input. A study's own SimPy process woken by what ``advance_to`` did may hand it on
through zero-time hops (a ``simpy.Store``, a ``timeout(0)``); every hop must be over before round 0 opens,
on both paths (standing agent processes or not), or the news would reach the agents one round per hop."""
from __future__ import annotations

import pytest
import simpy

import desim
from desim import Action, DecisionModel, EnvironmentProvider, MetricCollector, Observation


class Newsroom(EnvironmentProvider):
    """``advance_to(2)`` hands a headline to the study's newsroom, which takes ``hops`` zero-time hops
    (an editor, a sub-editor, ...) before the headline is in the world; each agent's state counts the
    rounds of the step in which it had the news."""

    def __init__(self, hops: int = 2):
        self.hops = hops

    def reset(self, seed):
        self.headline, self.rounds_knew = None, {}
        self.wire = simpy.Store(self.ctx.sim)
        self.ctx.sim.process(self._newsroom())

    def _newsroom(self):
        while True:
            item = yield self.wire.get()
            for _ in range(self.hops):
                yield self.ctx.sim.timeout(0)
            self.headline = item

    def advance_to(self, t):
        self.rounds_knew = {a: 0 for a in self.ctx.agent_ids}
        if t == 2:
            self.wire.put("breaking")
        return []

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, macro_information={"headline": self.headline}) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.rounds_knew[a.agent_id] += a.payload["knew"]

    def agent_state(self, agent_id):
        return {"headline": self.headline or "", "rounds_knew": self.rounds_knew.get(agent_id, 0)}


class Read(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="read",
                       payload={"knew": o.macro_information["headline"] is not None}) for o in observations]


class Knew(MetricCollector):
    def collect(self, t, environment, actions):
        return {"knew": float(sum(a.payload["knew"] for a in actions)) if actions else 0.0}


@pytest.mark.parametrize("agent_processes", [False, True])
@pytest.mark.parametrize("hops", [1, 3])
def test_a_zero_time_chain_started_by_advance_to_is_over_before_round_0(agent_processes, hops):
    env = Newsroom(hops=hops)
    result = desim.run_study(desim.Study(environment=env, decision=Read, collector=Knew, population=3, steps=3,
                                         interaction_rounds=3, agent_processes=agent_processes))
    assert result.status == "completed"
    panel = result.panel().to_pylist()
    assert {(r["headline"], r["rounds_knew"]) for r in panel if r["step"] == 1} == {("", 0)}
    # every round of step 2 had the news, round 0 too
    assert {(r["headline"], r["rounds_knew"]) for r in panel if r["step"] == 2} == {("breaking", 3)}
