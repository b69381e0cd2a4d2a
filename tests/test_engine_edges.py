"""Engine edge cases: an errand sent from reset(), a message posted between steps,
and the end_step hook."""
from __future__ import annotations

import json


from desim import load_study, run_study
from storeq import sql

MODEL = '''
from desim import Action, DecisionModel, EnvironmentProvider, InMemoryMessageBus, Message, Observation

LOG = []


class Env(EnvironmentProvider):
    def reset(self, seed):
        LOG.clear()
        self.x = {a: 0 for a in self.ctx.agent_ids}
        self.bus = InMemoryMessageBus()
        self.ctx.occupy("a1", self.errand())
        self.ctx.sim.process(self.late_post())

    def errand(self):
        yield self.ctx.sim.timeout(1.5)         # away for step 1, back for step 2

    def late_post(self):
        yield self.ctx.sim.timeout(1.5)
        self.bus.post(Message(author_id="a0", step=self.ctx.step, round=0, content={"late": True}))

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, round_idx=round_idx) for a in ids]

    def apply(self, actions):
        LOG.append(("apply", self.ctx.step, self.ctx.round_idx))
        for a in actions:
            self.x[a.agent_id] += 1

    def end_step(self, t):
        LOG.append(("end_step", t))
        for a in self.x:
            self.x[a] *= 10

    def agent_state(self, agent_id):
        if agent_id == "a0":
            LOG.append(("state", self.ctx.step))
        return {"x": self.x[agent_id]}


class Decide(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="move") for o in observations]
'''


def study(root, agent_processes=True):
    for sub in ("simulation", "population", "environment"):
        (root / sub).mkdir(parents=True)
    (root / "model.py").write_text(MODEL)
    (root / "study.json").write_text(json.dumps({"id": root.name}))
    (root / "simulation" / "simulation.json").write_text(json.dumps({
        "n_steps": 3, "interaction_rounds": 2, "decision": {"ref": "model:Decide"},
        "agent_processes": agent_processes}))
    (root / "population" / "population.json").write_text(json.dumps({
        "personas": [{"agent_id": f"a{i}"} for i in range(3)]}))
    (root / "environment" / "environment.json").write_text(json.dumps({"provider": {"ref": "model:Env"}}))
    return root


def panel(root):
    return sql(root, "SELECT step, agent_id, state, action_kind FROM panel ORDER BY step, agent_id")


def test_an_errand_from_reset_is_honoured_with_and_without_agent_processes(tmp_path):
    on, off = study(tmp_path / "on"), study(tmp_path / "off", agent_processes=False)
    run_study(load_study(on)), run_study(load_study(off))
    assert panel(on) == panel(off)
    away = [(step, kind) for step, agent, _, kind in panel(on) if agent == "a1"]
    assert away == [(1, None), (2, "move"), (3, "move")]


def test_a_message_posted_between_steps_keeps_its_own_step(tmp_path):
    root = study(tmp_path / "late")
    run_study(load_study(root))
    assert sql(root, "SELECT step, round, author_id, content::VARCHAR FROM messages") == [
        (1, 0, "a0", '{"late":true}')]


def test_end_step_runs_after_the_final_round_and_before_the_panel_row(tmp_path):
    from desim.study.refs import study_module
    root = study(tmp_path / "hook")
    run_study(load_study(root))
    log = study_module(root).LOG
    assert log[log.index(("state", 0)) + 1:][:5] == [("apply", 1, 0), ("apply", 1, 1), ("end_step", 1),
                                                      ("state", 1), ("apply", 2, 0)]
    states = {(step, agent): s["x"] for step, agent, s, _ in panel(root)}
    assert states[(1, "a0")] == 20 and states[(2, "a0")] == (20 + 2) * 10
    assert states[(1, "a1")] == 0                       # away: no apply, end_step of 0




ROUNDS_MODEL = '''
from desim import Action, DecisionModel, EnvironmentProvider, Observation

SEEN = []


class Env(EnvironmentProvider):
    def reset(self, seed):
        SEEN.clear()

    def errand(self, then=None):
        yield self.ctx.sim.timeout(0)           # back at the same instant
        if then:
            self.ctx.occupy(then, self.errand())

    def observe_batch(self, ids, t, round_idx):
        SEEN.append((t, round_idx, tuple(ids)))
        return [Observation(agent_id=a, step=t, round_idx=round_idx) for a in ids]

    def apply(self, actions):
        if (self.ctx.step, self.ctx.round_idx) == (1, 0):
            self.ctx.occupy("a1", self.errand(then="a2"))

    def agent_state(self, agent_id):
        return {}


class Decide(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="move") for o in observations]
'''


def test_who_takes_part_in_each_round_around_errands_of_no_time(tmp_path):
    """An errand given in a round starts before the next round, which the agent misses; back at the
    same instant, it waits for the round after, as does an agent it sends away as it comes back: the
    whole chain of that instant runs out before the next round opens, so both miss round 1 only."""
    from desim.study.refs import study_module
    root = study(tmp_path / "rounds")
    (root / "model.py").write_text(ROUNDS_MODEL)
    sim = json.loads((root / "simulation" / "simulation.json").read_text())
    (root / "simulation" / "simulation.json").write_text(json.dumps({**sim, "n_steps": 2, "interaction_rounds": 4}))
    run_study(load_study(root))
    seen = study_module(root).SEEN
    assert seen == [(1, 0, ("a0", "a1", "a2")), (1, 1, ("a0",)), (1, 2, ("a0", "a1", "a2")), (1, 3, ("a0", "a1", "a2")),
                    (2, 0, ("a0", "a1", "a2")), (2, 1, ("a0", "a1", "a2")), (2, 2, ("a0", "a1", "a2")),
                    (2, 3, ("a0", "a1", "a2"))]


QUEUE_MODEL = '''
import simpy

from desim import Action, DecisionModel, EnvironmentProvider, Observation

SEEN = []


class Env(EnvironmentProvider):
    """An agent who feels worse goes to the clinic: it counts the visit as it leaves, then queues 0.4 of a
    step for one desk. What the others see of the count in the later rounds is what the test compares."""

    def reset(self, seed):
        SEEN.clear()
        self.visits = 0
        self.desk = simpy.Resource(self.ctx.sim, capacity=1)

    def errand(self):
        self.visits += 1                        # as it leaves: at this instant, before the next round
        with self.desk.request() as turn:
            yield turn
            yield self.ctx.sim.timeout(0.4)

    def observe_batch(self, ids, t, round_idx):
        SEEN.append((t, round_idx, self.visits))
        return [Observation(agent_id=a, step=t, round_idx=round_idx, local_physical={"visits": self.visits})
                for a in ids]

    def apply(self, actions):
        for a in actions:
            if a.kind == "visit":
                self.ctx.occupy(a.agent_id, self.errand())

    def agent_state(self, agent_id):
        return {"visits_seen": self.visits}


class Decide(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step,
                       kind="visit" if (o.agent_id, o.step, o.round_idx) in (("a0", 2, 0), ("a1", 2, 0)) else "wait")
                for o in observations]
'''


def test_an_errand_with_a_queue_gives_one_panel_with_and_without_agent_processes(tmp_path):
    """The errand's first part (counting the visit) runs before the next round on both paths: the agents
    left in rounds 1 and 2 of step 2 see both visits, with agent processes or without."""
    from desim.study.refs import study_module
    seen, panels = {}, {}
    for processes in (True, False):
        root = study(tmp_path / f"queue_{processes}", agent_processes=processes)
        (root / "model.py").write_text(QUEUE_MODEL)
        sim = json.loads((root / "simulation" / "simulation.json").read_text())
        (root / "simulation" / "simulation.json").write_text(json.dumps({**sim, "interaction_rounds": 3}))
        run_study(load_study(root))
        seen[processes], panels[processes] = list(study_module(root).SEEN), panel(root)
    assert seen[True] == seen[False] and panels[True] == panels[False]
    assert [v for t, r, v in seen[True] if t == 2] == [0, 2, 2]


def test_an_errand_for_an_agent_nobody_has_names_it(tmp_path):
    import pytest
    from desim import RunFailed
    for processes in (True, False):
        root = study(tmp_path / f"zz_{processes}", agent_processes=processes)
        (root / "model.py").write_text(QUEUE_MODEL.replace('self.ctx.occupy(a.agent_id,', 'self.ctx.occupy("zz",'))
        with pytest.raises(RunFailed, match=r"step 2 round 0: Env\.apply.*ctx\.occupy: no agent 'zz' in the "
                                            r"population \(t=2"):
            run_study(load_study(root))
