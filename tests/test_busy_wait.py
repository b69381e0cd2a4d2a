"""A study process that waits by yielding ``timeout(0)`` in a loop: a step and each round open once the other
events of their instant are done, so such a process held the run at one instant for ever (SIGTERM did not
stop it either). It is refused, naming the time and what to do instead, and the steps before are kept."""
from __future__ import annotations

import pytest

import desim
from desim import DecisionModel, EnvironmentProvider, Observation
from desim.run.assemble import RunClock


class Polling(EnvironmentProvider):
    def reset(self, seed):
        self.waited = 0

    def _until_round_2(self):
        while self.ctx.round_idx < 2:
            self.waited += 1
            yield self.ctx.sim.timeout(0)

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t) for a in ids]

    def apply(self, actions):
        if self.ctx.step == 2 and self.ctx.round_idx == 0:
            self.ctx.sim.process(self._until_round_2())

    def agent_state(self, agent_id):
        return {"waited": self.waited}


class Idle(DecisionModel):
    def decide_batch(self, observations, memories):
        return []


def test_a_busy_wait_on_timeout_0_fails_the_run_naming_the_instant(monkeypatch):
    monkeypatch.setattr(RunClock, "same_instant_limit", 20_000)
    with pytest.raises(desim.RunFailed) as failed:
        desim.run_study(desim.Study(environment=Polling, decision=Idle, population=2, steps=3, interaction_rounds=3))
    assert "more than 20,000 events at t=2 without the clock moving" in str(failed.value)
    assert "wait on timeout(0) in a loop?" in str(failed.value)
    assert sorted({r["step"] for r in desim.open(failed.value.db_path.parent.parent).panel().to_pylist()}) == [1]


def test_many_agents_set_up_at_one_instant_are_not_taken_for_a_busy_wait(monkeypatch):
    """Each agent process starts at t=0 (an event each): the limit grows with the population."""
    monkeypatch.setattr(RunClock, "same_instant_limit", 1_000)
    result = desim.run_study(desim.Study(environment=Polling, decision=Idle, population=2_000, steps=1))
    assert result.status == "completed"
