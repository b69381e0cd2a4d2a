"""SocioVerse2 0.2.0 side of benchmarks/bench_socioverse.py: the same two models
desim is benchmarked on, written against SocioVerse2's own interfaces.

Runs only inside the benchmark venv (``benchmarks/.venv-socioverse``), where
``socioverse`` is installed; desim is not importable there. Components are
registered under string keys, which is how SocioVerse2 wires a from-scratch
study (``socioverse.engine.builder.build_simulator`` resolves the bundles' refs).

* ``bench.ring`` -- bounded confidence on a ring: each round every agent moves
  by ``mu`` towards the mean of its two ring neighbours' opinions that lie
  within ``epsilon`` (the rule of benchmarks/studies/ring_bc, same arithmetic
  in the same order, so equal starting opinions give equal results).
* ``bench.feed`` -- every agent posts every round on a given network; an agent
  reads its neighbours' earlier posts of the step through SocioVerse2's
  ``NeighborFeed`` over its ``InMemoryMessageBus`` (the objects path of
  benchmarks/bench_messaging.py), and the time spent reading is measured.
"""
from __future__ import annotations

import json
import time

import numpy as np
from socioverse.abc import DecisionModel, EnvironmentProvider, MetricCollector, PopulationProvider
from socioverse.engine.messaging import InMemoryMessageBus
from socioverse.engine.registry import register
from socioverse.env_layers.neighbor_feed import NeighborFeed
from socioverse.schemas.population import Persona
from socioverse.schemas.runtime import Action, Observation


def agent_ids(n: int, prefix: str) -> list[str]:
    """Persistent ids in ring/graph order, spelled like desim's benchmark studies."""
    width = 7 if prefix == "b" else len(str(n - 1))
    return [f"{prefix}{i:0{width}d}" for i in range(n)]


@register("population", "bench.crowd")
class Crowd(PopulationProvider):
    """N personas with no attributes; ``prefix`` picks the id spelling."""

    def __init__(self, bundle):
        self.bundle = bundle
        self.ids = agent_ids(int(bundle.provider_args["n"]), bundle.provider_args["prefix"])

    def build(self, seed):
        return [Persona(agent_id=a) for a in self.ids]


# --- ring bounded confidence -------------------------------------------------------------

@register("environment", "bench.ring")
class RingOpinions(EnvironmentProvider):
    """Opinions on a ring; an agent observes its own and its two ring neighbours'.

    ``initial`` (optional) is a JSON file of starting opinions in ring order, used
    to check that both libraries compute the same trajectory from the same start.
    """

    def __init__(self, bundle):
        self.bundle = bundle
        self.n = int(bundle.provider_args["n"])
        self.initial = bundle.provider_args.get("initial")

    def reset(self, seed):
        self.ids = agent_ids(self.n, "b")
        self.index = {a: i for i, a in enumerate(self.ids)}
        if self.initial:
            with open(self.initial) as fh:
                self.x = [float(v) for v in json.load(fh)]
        else:
            self.x = np.random.default_rng(seed).uniform(0.0, 1.0, self.n).tolist()

    def advance_to(self, t):
        return []

    def observe_batch(self, ids, t, round_idx=0):
        x, n, index = self.x, self.n, self.index
        out = []
        for a in ids:
            i = index[a]
            out.append(Observation(agent_id=a, step=t, local_physical={"opinion": x[i]},
                                   local_information={"neighbour_opinions": [x[i - 1], x[(i + 1) % n]]}))
        return out

    def apply(self, actions):
        for a in actions:
            self.x[self.index[a.agent_id]] = a.payload["opinion"]

    def agent_state(self, agent_id):
        return {"opinion": self.x[self.index[agent_id]]}


@register("decision", "bench.bounded_confidence")
class BoundedConfidence(DecisionModel):
    def __init__(self, epsilon, mu):
        self.epsilon, self.mu = float(epsilon), float(mu)

    def decide_batch(self, obs, memories):
        actions = []
        for o in obs:
            x = o.local_physical["opinion"]
            total, count = 0.0, 0
            for y in o.local_information["neighbour_opinions"]:
                if abs(y - x) < self.epsilon:
                    total += y
                    count += 1
            target = total / count if count else x
            actions.append(Action(agent_id=o.agent_id, step=o.step, kind="post",
                                  payload={"opinion": x + self.mu * (target - x)}, source="rule"))
        return actions


@register("collector", "bench.opinion_moments")
class OpinionMoments(MetricCollector):
    def collect(self, env, actions, t):
        x = np.asarray(env.x)
        return {"mean_opinion": float(x.mean()), "opinion_sd": float(x.std())}


# --- every agent posts every round ---------------------------------------------------------

@register("environment", "bench.feed")
class FeedEnvironment(EnvironmentProvider):
    """Values on a network, exchanged as posts on SocioVerse2's bus (no carry-over
    from the previous step). ``edges`` is a JSON file of [a, b] id pairs.

    ``apply`` receives no round index in SocioVerse2, so the round observed last
    is remembered to label the posts.
    """

    def __init__(self, bundle):
        self.bundle = bundle
        self.n = int(bundle.provider_args["n"])
        self.edges = bundle.provider_args["edges"]
        self.feed_seconds = 0.0
        self.observe_seconds = 0.0
        self.agent_rounds = 0

    def reset(self, seed):
        ids = agent_ids(self.n, "a")
        self.neighbours = {a: [] for a in ids}
        with open(self.edges) as fh:
            for a, b in json.load(fh):
                self.neighbours[a].append(b)
                self.neighbours[b].append(a)
        self.value = dict(zip(ids, np.random.default_rng(seed).random(self.n).tolist()))
        self.feed = NeighborFeed(self.neighbours.__getitem__, InMemoryMessageBus(carry_previous_step=False))
        self.round_idx = 0

    def advance_to(self, t):
        return []

    def observe_batch(self, ids, t, round_idx=0):
        start = time.perf_counter()
        self.round_idx = round_idx
        local_for, value, out, feed_time = self.feed.local_for, self.value, [], 0.0
        for a in ids:
            f0 = time.perf_counter()
            seen = local_for(a, t, round_idx).get("feed", [])
            feed_time += time.perf_counter() - f0
            mean = sum(m["content"] for m in seen) / len(seen) if seen else None
            out.append(Observation.model_construct(agent_id=a, step=t, macro_physical={}, macro_information={},
                                                   local_physical={"v": value[a]},
                                                   local_information={"seen_mean": mean}, rendered=None))
        self.observe_seconds += time.perf_counter() - start
        self.feed_seconds += feed_time
        self.agent_rounds += len(ids)
        return out

    def apply(self, actions):
        for a in actions:
            self.value[a.agent_id] = a.payload["content"]
        if actions:
            self.feed.ingest(actions, actions[0].step, self.round_idx)

    def agent_state(self, agent_id):
        return {"v": self.value[agent_id]}


@register("decision", "bench.half_way")
class HalfWay(DecisionModel):
    """Move half-way to the mean of what was read, plus a little noise, and post it."""

    def __init__(self, seed=1):
        self.rng = np.random.default_rng(seed)

    def decide_batch(self, obs, memories):
        noise = self.rng.normal(0.0, 0.01, len(obs)).tolist()
        out = []
        for o, e in zip(obs, noise):
            v, seen = o.local_physical["v"], o.local_information["seen_mean"]
            new = (v if seen is None else 0.5 * v + 0.5 * seen) + e
            out.append(Action.model_construct(agent_id=o.agent_id, step=o.step, kind="post",
                                              payload={"content": new}, rationale=[], source="rule"))
        return out


@register("collector", "bench.message_log")
class MessageLog(MetricCollector):
    """Persists the step's drained posts: SocioVerse2's loop never calls
    ``record_messages`` itself, so the runner hands this collector the store."""

    store = None

    def collect(self, env, actions, t):
        drained = env.feed.bus.drain()
        if self.store is not None:
            self.store.record_messages(drained)
        v = np.fromiter(env.value.values(), dtype=float)
        return {"mean_v": float(v.mean()), "messages": len(drained)}
