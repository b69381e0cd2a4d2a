"""opinion_diffusion: bounded-confidence opinions on a small-world network.

Each week (one step) an agent reads the opinions its neighbours posted the
week before (a ``NeighborFeed`` over an ``InMemoryMessageBus`` with
``carry_previous_step=True``: a deliberate one-step-delayed channel, since
the study runs one round per step), moves by ``mu`` towards the mean of the
ones within ``epsilon`` of its own (Deffuant et al. 2000, averaged over the
neighbours), and posts its new opinion. While the TV campaign is on air
(weeks 2-3), agents also move towards the campaign's position in proportion
to their trust in media, if that position is within their confidence bound
widened by half.
"""
from __future__ import annotations

from desim import (Action, EnvironmentProvider, InMemoryMessageBus, MetricCollector, NeighborFeed,
                   Observation, Persona, PopulationProvider, DecisionModel, neighbors_fn)


class Population(PopulationProvider):
    def __init__(self, n: int = 12):
        self.n = int(n)

    def personas(self, rng):
        width = len(str(self.n - 1))
        opinions = rng.uniform(0.0, 1.0, self.n)
        trust = rng.uniform(0.0, 1.0, self.n)
        return [Persona(agent_id=f"a{i:0{width}d}",
                        attributes={"opinion": round(float(opinions[i]), 6),
                                    "media_trust": round(float(trust[i]), 6)})
                for i in range(self.n)]


class OpinionEnvironment(EnvironmentProvider):
    def reset(self, seed):
        ctx = self.ctx
        self.opinion = {p.agent_id: p.attributes["opinion"] for p in ctx.personas}
        self.bus = InMemoryMessageBus(carry_previous_step=True)
        self.feed = NeighborFeed(neighbors_fn(ctx.graph), self.bus)
        # everyone states their opinion at step 0, so week 1 has something to read
        self.feed.ingest([Action(agent_id=a, step=0, kind="post", payload={"opinion": x})
                          for a, x in self.opinion.items()], step=0, round_idx=0)

    def observe_batch(self, ids, t, round_idx):
        iv = self.ctx.interventions
        macro = {"campaign_position": iv.value("campaign_position"), "broadcasts": iv.active_broadcasts()}
        out = []
        for a in ids:
            feed = [m.content["opinion"] for m in self.feed.local_for(a, t, round_idx)]
            out.append(Observation(
                agent_id=a, step=t, round_idx=round_idx, macro_physical={}, macro_information=macro,
                local_physical={"opinion": self.opinion[a], "media_trust": iv.attribute(a, "media_trust")},
                local_information={"neighbour_opinions": feed}, text=None))
        return out

    def apply(self, actions):
        for a in actions:
            self.opinion[a.agent_id] = a.payload["opinion"]
        self.feed.ingest(actions, self.ctx.step, self.ctx.round_idx)

    def agent_state(self, agent_id):
        return {"opinion": self.opinion[agent_id]}


class BoundedConfidence(DecisionModel):
    def __init__(self, epsilon: float = 0.3, mu: float = 0.5, campaign_weight: float = 0.4):
        self.epsilon, self.mu, self.campaign_weight = float(epsilon), float(mu), float(campaign_weight)

    def decide_batch(self, observations, memories):
        actions = []
        for obs in observations:
            x = obs.local_physical["opinion"]
            close = [y for y in obs.local_information["neighbour_opinions"] if abs(y - x) < self.epsilon]
            new = x + self.mu * (sum(close) / len(close) - x) if close else x
            if obs.macro_information["broadcasts"]:
                target = obs.macro_information["campaign_position"]
                if abs(target - new) < 1.5 * self.epsilon:
                    new += self.campaign_weight * obs.local_physical["media_trust"] * (target - new)
            new = round(min(1.0, max(0.0, new)), 9)
            actions.append(Action(
                agent_id=obs.agent_id, step=obs.step, kind="post", payload={"opinion": new},
                rationale=f"{len(close)} neighbours within reach", source="rule"))
        return actions


class OpinionMetrics(MetricCollector):
    def collect(self, t, environment, actions):
        xs = list(environment.opinion.values())
        n = len(xs)
        mean = sum(xs) / n
        sd = (sum((x - mean) ** 2 for x in xs) / n) ** 0.5
        return {"mean_opinion": mean, "opinion_sd": sd,
                "support_share": sum(1 for x in xs if x > 0.5) / n,
                "extreme_share": sum(1 for x in xs if x < 0.1 or x > 0.9) / n}
