"""A small study written into a temporary folder, whose code records every
call the engine makes, so tests can check the order of a step exactly."""
from __future__ import annotations

import json
from pathlib import Path

MODEL = '''
import os
from pathlib import Path

import simpy
from desim import (Action, DecisionModel, EnvironmentProvider, MetricCollector, Observation)
from desim.study.contract import StopRun

MARKER = Path(__file__).parent / "once.marker"

LOG = []


class Env(EnvironmentProvider):
    def __init__(self, tick_every=None, busy_agent=None, busy_from_step=None, hold_until=None):
        self.tick_every, self.busy_agent = tick_every, busy_agent
        self.busy_from_step, self.hold_until = busy_from_step, hold_until

    def reset(self, seed):
        LOG.clear()
        self.value = {a: 0.0 for a in self.ctx.agent_ids}
        self.counter = 0
        sim = self.ctx.sim
        if self.tick_every:
            sim.process(self._ticker())
        if self.busy_agent:
            self.counter_desk = simpy.Resource(sim, capacity=1)
            sim.process(self._hog())

    def _ticker(self):
        while True:
            yield self.ctx.sim.timeout(self.tick_every)
            self.counter += 1
            LOG.append(("tick", self.ctx.sim.now, self.counter))

    def _hog(self):
        with self.counter_desk.request() as req:
            yield req
            yield self.ctx.sim.timeout(self.hold_until)

    def _errand(self, agent_id):
        LOG.append(("queue", agent_id, self.ctx.sim.now))
        with self.counter_desk.request() as req:
            yield req
            yield self.ctx.sim.timeout(0.1)
        LOG.append(("served", agent_id, self.ctx.sim.now))

    def advance_to(self, t):
        LOG.append(("advance", t, self.ctx.sim.now))
        return super().advance_to(t)

    def observe_batch(self, ids, t, round_idx):
        LOG.append(("observe", t, round_idx, tuple(ids)))
        return [Observation(agent_id=a, step=t, round_idx=round_idx,
                            macro_physical={"counter": self.counter, "level": self.ctx.interventions.value("level")})
                for a in ids]

    def apply(self, actions):
        LOG.append(("apply", self.ctx.step, self.ctx.round_idx, len(actions)))
        for a in actions:
            self.value[a.agent_id] = a.payload["v"]
        if self.busy_agent and self.ctx.step == self.busy_from_step and self.ctx.round_idx == self.ctx.rounds - 1:
            self.ctx.occupy(self.busy_agent, self._errand(self.busy_agent))

    def agent_state(self, agent_id):
        return {"value": self.value[agent_id]}


class Decide(DecisionModel):
    def __init__(self, mode="ok", fail_step=None):
        self.mode, self.fail_step = mode, fail_step

    def _once(self):
        """True the first time only (a marker file beside model.py remembers)."""
        if MARKER.exists():
            return False
        MARKER.write_text("done")
        return True

    def decide_batch(self, observations, memories):
        t, r = observations[0].step, observations[0].round_idx
        LOG.append(("decide", t, r, [len(m) for m in memories],
                    [o.macro_physical["counter"] for o in observations][:1]))
        if t == self.fail_step:
            if self.mode == "sigkill_once" and self._once():
                os.kill(os.getpid(), 9)
            elif self.mode == "stop_once" and self._once():
                raise StopRun("budget spent")
            elif self.mode == "ok":
                raise ValueError("the model broke at step %d" % t)
        rng = self.ctx.rng("decide")
        out = [Action(agent_id=o.agent_id, step=t, kind="set",
                      payload={"v": round(float(rng.random()) * o.macro_physical["level"], 9), "round": r,
                               "counter": o.macro_physical["counter"]})
               for o in observations]
        if self.mode == "unknown_agent" and t == 2:
            out.append(Action(agent_id="ghost", step=t, kind="set", payload={"v": 1.0}))
        if self.mode == "duplicate" and t == 2:
            out.append(out[0])
        if self.mode == "skip_first":
            out = out[1:]
        if self.mode == "garbage" and t == 2:
            out[0] = {"agent": "nonsense"}
        if self.mode == "reversed":
            out.reverse()
        if self.mode == "duplicate_in_place" and t == 2:
            out[1] = Action(agent_id=out[0].agent_id, step=t, kind="set", payload={"v": 1.0})
        if self.mode == "absent_agent":
            here = {o.agent_id for o in observations}
            away = [a for a in self.ctx.agent_ids if a not in here]
            if away:
                out[0] = Action(agent_id=away[0], step=t, kind="set", payload={"v": 1.0})
        return out


class Metrics(MetricCollector):
    def collect(self, t, environment, actions):
        vals = list(environment.value.values())
        return {"mean_value": sum(vals) / len(vals), "acted": len(actions or [])}
'''


def write_probe_study(root: Path, *, n_agents: int = 5, n_steps: int = 6, rounds: int = 1, seed: int = 7,
                      env_args: dict | None = None, decision_args: dict | None = None,
                      events: list | None = None, broadcasts: list | None = None,
                      record_rounds: bool = False, agent_processes: bool = True) -> Path:
    (root / "simulation").mkdir(parents=True, exist_ok=True)
    (root / "population").mkdir(exist_ok=True)
    (root / "environment").mkdir(exist_ok=True)
    (root / "study.json").write_text(json.dumps({"id": root.name, "title": "probe"}))
    (root / "simulation" / "simulation.json").write_text(json.dumps({
        "n_steps": n_steps, "time_unit": "day", "interaction_rounds": rounds, "seed": seed,
        "decision": {"ref": "model:Decide", "args": decision_args or {}},
        "collector": {"ref": "model:Metrics"}, "memory_window": 100, "record_rounds": record_rounds,
        "agent_processes": agent_processes}))
    (root / "population" / "population.json").write_text(json.dumps({
        "personas": [{"agent_id": f"p{i}", "attributes": {"group": "a" if i % 2 else "b"}}
                     for i in range(n_agents)],
        "interaction": {"kind": "ring", "k": 2}}))
    (root / "environment" / "environment.json").write_text(json.dumps({
        "provider": {"ref": "model:Env", "args": env_args or {}},
        "layers": {"level": 1.0},
        "scheduled_events": events or [], "broadcasts": broadcasts or []}))
    (root / "model.py").write_text(MODEL)
    return root


def log_of(root: Path) -> list:
    from desim.study.refs import study_module
    return study_module(root).LOG
