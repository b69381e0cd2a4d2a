"""Bounded confidence on a ring, on the columnar path: each round an agent moves
towards the mean of its two ring neighbours' opinions that lie within epsilon.
Used by benchmarks/bench_engine.py to measure the engine and the store, not
the decision rule."""
import numpy as np

from desim import ActionColumns, DecisionModel, EnvironmentProvider, MetricCollector, Persona, PopulationProvider


class Population(PopulationProvider):
    def __init__(self, n):
        self.n = int(n)

    def personas(self, rng):
        return [Persona(agent_id=f"b{i:07d}") for i in range(self.n)]


class Ring(EnvironmentProvider):
    def reset(self, seed):
        self.x = self.ctx.streams.numpy("opinions").uniform(0, 1, len(self.ctx.agent_ids))

    def observe_columns(self, idx, t, round_idx):
        n = len(self.x)
        return {"x": self.x[idx], "left": self.x[(idx - 1) % n], "right": self.x[(idx + 1) % n]}

    def apply_columns(self, idx, actions):
        self.x[idx] = actions.payload["opinion"]

    def state_columns(self):
        return {"opinion": self.x}


class Deffuant(DecisionModel):
    def __init__(self, epsilon, mu):
        self.epsilon, self.mu = epsilon, mu

    def decide_columns(self, obs, idx, t, round_idx):
        x = obs["x"]
        total, count = np.zeros_like(x), np.zeros_like(x)
        for y in (obs["left"], obs["right"]):
            close = np.abs(y - x) < self.epsilon
            total += np.where(close, y, 0.0)
            count += close
        target = np.where(count > 0, total / np.maximum(count, 1), x)
        return ActionColumns(kind="post", payload={"opinion": x + self.mu * (target - x)})


class Metrics(MetricCollector):
    def collect(self, t, environment, actions):
        return {"mean_opinion": float(environment.x.mean()), "opinion_sd": float(environment.x.std())}
