"""A study for sweep tests whose runs crash on purpose (a raise, or a SIGKILL of the worker) until a
file 'healed' appears beside it, and a sweep's rows keyed by slot for comparing two sweeps."""
from __future__ import annotations

import json
from pathlib import Path

from storeq import sql


CRASHY_MODEL = '''
import os
import signal
from pathlib import Path

from desim import Action, DecisionModel, EnvironmentProvider, MetricCollector, Observation

HEALED = Path(__file__).with_name("healed")


class Line(EnvironmentProvider):
    def reset(self, seed):
        self.x = {a: 0.0 for a in self.ctx.agent_ids}

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, local_physical={"x": self.x[a]}) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.x[a.agent_id] = a.payload["x"]

    def agent_state(self, agent_id):
        return {"x": self.x[agent_id]}


class Walk(DecisionModel):
    """A random walk; until the file 'healed' exists, mood 2 raises and mood 3 kills its own process."""

    def __init__(self, mood):
        self.mood = mood

    def decide_batch(self, observations, memories):
        if observations[0].step == 2 and not HEALED.exists():
            if self.mood == 3:
                os.kill(os.getpid(), signal.SIGKILL)
            if self.mood == 2:
                raise ValueError("mood 2 refuses step 2")
        rng = self.ctx.rng("walk")
        return [Action(agent_id=o.agent_id, step=o.step, kind="move",
                       payload={"x": o.local_physical["x"] + float(rng.normal())}) for o in observations]


class Mean(MetricCollector):
    def collect(self, t, environment, actions):
        return {"mean_x": sum(environment.x.values()) / len(environment.x)}
'''


def write_crashy_study(root: Path) -> Path:
    files = {
        "study.json": {"id": "crashy", "display_metrics": ["mean_x"]},
        "simulation/simulation.json": {"n_steps": 3, "seed": 5, "parameters": {"mood": 1},
                                       "decision": {"ref": "model:Walk", "args": {"mood": "$mood"}},
                                       "collector": {"ref": "model:Mean"}},
        "population/population.json": {"personas": [{"agent_id": f"a{i}"} for i in range(3)]},
        "environment/environment.json": {"provider": {"ref": "model:Line"}},
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(json.dumps(data))
    (root / "model.py").write_text(CRASHY_MODEL)
    return root



def panels_by_slot(root: Path, sweep_id: str, table: str = "panel") -> list[tuple]:
    """A sweep's rows with the run id reduced to its slot (combination-replicate), sorted."""
    cols = {"panel": "step, agent_id, CAST(state AS VARCHAR), action_kind, CAST(payload AS VARCHAR), "
                     "action_source",
            "metrics": "step, name, value",
            "initial_states": "agent_id, CAST(state AS VARCHAR)"}[table]
    return sql(root, f"SELECT substr(run_id, {len(sweep_id) + 2}) AS slot, {cols} FROM {table} "
                       f"WHERE run_id LIKE ? ORDER BY ALL", [f"{sweep_id}-%"])
