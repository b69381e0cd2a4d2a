"""starter: a template study to edit (``desim new <id>`` copies it).

Each day (one step) every agent speaks twice (``interaction_rounds: 2``):

* round 0: it says its support level; nobody has heard anything yet;
* round 1: it hears what its two ring neighbours said in round 0 and moves
  ``openness`` of the way towards their mean, then says the new level.

``end_step`` closes the day: fatigue pulls every agent back towards 0.5, and
the day's news (the ``news_pull`` layer, set by the ``news_item`` event on
day 3) pushes towards 1. The panel row of the day is taken after that.

What to change first: the rule in ``Listen.decide_batch``, the state in
``Neighbourhood.agent_state`` (every key becomes a panel column you can
query as ``state.support``, a DOUBLE), and the figures in ``Support.collect``.
"""
from __future__ import annotations

from desim import (
    Action,
    DecisionModel,
    EnvironmentProvider,
    InMemoryMessageBus,
    MetricCollector,
    NeighborFeed,
    Observation,
    Persona,
    PopulationProvider,
    neighbors_fn,
)


class Neighbours(PopulationProvider):
    """``n`` agents with a random starting support level."""

    def __init__(self, n: int = 20):
        self.n = int(n)

    def personas(self, rng):
        levels = rng.uniform(0.0, 1.0, self.n)
        return [Persona(agent_id=f"n{i:03d}", attributes={"support": round(float(levels[i]), 6)})
                for i in range(self.n)]


class Neighbourhood(EnvironmentProvider):
    """The agents' support levels, and a message bus for what they say to each other."""

    def __init__(self, fatigue: float = 0.05):
        self.fatigue = float(fatigue)

    def reset(self, seed):
        self.support = {p.agent_id: p.attributes["support"] for p in self.ctx.personas}
        self.bus = InMemoryMessageBus()
        self.feed = NeighborFeed(neighbors_fn(self.ctx.graph), self.bus)

    def observe_batch(self, ids, t, round_idx):
        broadcasts = self.ctx.interventions.active_broadcasts
        return [Observation(agent_id=a, step=t, round_idx=round_idx,
                            local_physical={"support": self.support[a]},
                            # what reaches this agent: everyone's broadcasts and those whose selector matches it
                            macro_information={"news": [b["content"] for b in broadcasts(a)]},
                            local_information={"heard": [m.content["support"]
                                                         for m in self.feed.local_for(a, t, round_idx)]})
                for a in ids]

    def apply(self, actions):
        for a in actions:
            self.support[a.agent_id] = a.payload["support"]
        self.feed.ingest(actions, self.ctx.step, self.ctx.round_idx)

    def end_step(self, t):
        pull = self.ctx.interventions.value("news_pull")
        for a, x in self.support.items():
            x += self.fatigue * (0.5 - x) + pull * (1.0 - x)
            self.support[a] = round(min(1.0, max(0.0, x)), 9)

    def agent_state(self, agent_id):
        return {"support": self.support[agent_id]}


class Listen(DecisionModel):
    """Move ``openness`` of the way towards the mean of what was heard, then say it."""

    def __init__(self, openness: float = 0.5):
        self.openness = float(openness)

    def decide_batch(self, observations, memories):
        actions = []
        for obs in observations:
            x, heard = obs.local_physical["support"], obs.local_information["heard"]
            if heard:
                x += self.openness * (sum(heard) / len(heard) - x)
            actions.append(Action(agent_id=obs.agent_id, step=obs.step, kind="post",
                                  payload={"support": round(x, 9)},
                                  rationale=f"heard {len(heard)} neighbours"))
        return actions


class Support(MetricCollector):
    def collect(self, t, environment, actions):
        xs = list(environment.support.values())
        return {"mean_support": sum(xs) / len(xs), "support_share": sum(x > 0.5 for x in xs) / len(xs)}
