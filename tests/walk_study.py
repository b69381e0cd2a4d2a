"""A small random-walk study for counterfactual tests: a layer ``drift`` that an
intervention at ``$lockdown_day`` changes, an optional pause per step (so a real
signal can land mid-run) and an optional ``sys.exit`` in study code."""
from __future__ import annotations

import json
from pathlib import Path

MODEL = '''
import sys
import time

from desim import Action, DecisionModel, EnvironmentProvider, MetricCollector, Observation


class Line(EnvironmentProvider):
    def reset(self, seed):
        self.x = {a: 0.0 for a in self.ctx.agent_ids}

    def observe_batch(self, ids, t, round_idx):
        drift = self.ctx.interventions.value("drift")
        return [Observation(agent_id=a, step=t, local_physical={"x": self.x[a], "drift": drift}) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.x[a.agent_id] = a.payload["x"]

    def agent_state(self, agent_id):
        return {"x": self.x[agent_id]}


class Walk(DecisionModel):
    def __init__(self, pause=0.0, exit_step=0):
        self.pause, self.exit_step = float(pause), int(exit_step)

    def decide_batch(self, observations, memories):
        t = observations[0].step
        if t == self.exit_step:
            sys.exit(3)
        if self.pause:
            time.sleep(self.pause)
        rng = self.ctx.rng("walk")
        return [Action(agent_id=o.agent_id, step=t, kind="move",
                       payload={"x": o.local_physical["x"] + o.local_physical["drift"] + float(rng.normal())})
                for o in observations]


class Mean(MetricCollector):
    def collect(self, t, environment, actions):
        xs = list(environment.x.values())
        return {"mean_x": sum(xs) / len(xs), "top_x": max(xs)}
'''


def write_walk_study(root: Path, *, n_agents: int = 6, n_steps: int = 10, pause: float = 0.0,
                     lockdown_day: int = 6) -> Path:
    files = {
        "study.json": {"id": root.name, "title": "walk", "display_metrics": ["mean_x"], "display_states": ["x"]},
        "simulation/simulation.json": {
            "n_steps": n_steps, "seed": 5,
            "parameters": {"pause": pause, "exit_step": 0, "lockdown_day": lockdown_day, "base_drift": 0.0,
                           "lockdown_drift": -1.0},
            "decision": {"ref": "model:Walk", "args": {"pause": "$pause", "exit_step": "$exit_step"}},
            "collector": {"ref": "model:Mean"}},
        "population/population.json": {"personas": [{"agent_id": f"a{i}"} for i in range(n_agents)],
                                       "interaction": {"kind": "ring", "k": 2}},
        "environment/environment.json": {
            "provider": {"ref": "model:Line"}, "layers": {"drift": "$base_drift"},
            "scheduled_events": [{"at_step": "$lockdown_day", "name": "lockdown", "target": "drift", "op": "set",
                                  "value": "$lockdown_drift"}]},
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(json.dumps(data))
    (root / "model.py").write_text(MODEL)
    return root
