"""opinion_diffusion: bounded-confidence opinions on a small-world network, with a media campaign.

Opinions lie in [0, 1]. The ``rule`` parameter chooses the bounded-confidence model:

``hegselmann_krause`` (the default): Hegselmann & Krause's (2002) rule on the
network. Each week (one step) an agent reads the opinions its neighbours
posted the week before (a ``NeighborFeed`` over an ``InMemoryMessageBus``
with ``carry_previous_step=True``: a deliberate one-step-delayed channel,
since the study runs one round per step), moves by ``mu`` towards the mean of
those within ``epsilon`` of its own, and posts its new opinion. Everyone
updates at once, from last week's opinions (``mu = 1`` is the original HK
update; smaller ``mu`` damps it). Each neighbour counts once, with its latest
opinion (``feed.latest``): run with several rounds a week, an agent updates
once a round from its neighbours' opinions of the round before, as HK's
synchronous update does, rather than from every opinion they stated.

``deffuant``: Deffuant, Neau, Amblard & Weisbuch's (2000) pairwise rule.
Each week ``round(encounters * n / 2)`` encounters happen one after another
(``encounters`` is the number of meetings an agent has a week on average):
a random agent meets a random neighbour and, when their opinions differ by
less than ``epsilon``, both move by ``mu`` towards each other
(``x += mu (y - x)``, ``y += mu (x - y)``). Under complete mixing
(``interaction: complete``) the opinions settle in about ``1 / (2 epsilon)``
major clusters.

In both rules, while the TV campaign is on air (weeks 2-3), agents also move
towards the campaign's position in proportion to their trust in media, if
that position is within their confidence bound widened by half.
"""
from __future__ import annotations

from desim import (Action, EnvironmentProvider, InMemoryMessageBus, MetricCollector, NeighborFeed,
                   Observation, Persona, PopulationProvider, DecisionModel, bad_parameter, check_parameters, neighbors_fn)


RULES = ("hegselmann_krause", "deffuant")


class Population(PopulationProvider):
    def __init__(self, n: int = 500):
        self.n = int(n)
        if self.n < 1:
            raise bad_parameter("opinion_diffusion", "n_agents", f"must be at least 1 (got {self.n})")

    def personas(self, rng):
        width = len(str(self.n - 1))
        opinions = rng.uniform(0.0, 1.0, self.n).tolist()
        trust = rng.uniform(0.0, 1.0, self.n).tolist()
        return [Persona(agent_id=f"a{i:0{width}d}", attributes={"opinion": round(x, 6), "media_trust": round(m, 6)})
                for i, (x, m) in enumerate(zip(opinions, trust))]


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
        # the campaign is the same for everyone: where it stands, and whether it is on air
        campaign = {"campaign_position": iv.value("campaign_position"), "broadcasts": iv.active_broadcasts()}
        # every agent's neighbours, each once with the latest opinion it posted
        heard = self.feed.latest(ids, t, round_idx, "opinion")
        observations = []
        for agent, neighbour_opinions in zip(ids, heard):
            observations.append(Observation(
                agent_id=agent, step=t, round_idx=round_idx,
                local_physical={"opinion": self.opinion[agent], "media_trust": iv.attribute(agent, "media_trust")},
                macro_information=campaign,
                local_information={"neighbour_opinions": neighbour_opinions}))
        return observations

    def apply(self, actions):
        for action in actions:
            self.opinion[action.agent_id] = action.payload["opinion"]
        self.feed.ingest(actions, self.ctx.step, self.ctx.round_idx)

    def agent_state(self, agent_id):
        return {"opinion": self.opinion[agent_id]}


class BoundedConfidence(DecisionModel):
    """Bounded confidence by ``rule``: Hegselmann-Krause on the network, or Deffuant's pairwise encounters."""

    def __init__(self, epsilon: float = 0.3, mu: float = 0.5, campaign_weight: float = 0.4,
                 rule: str = "hegselmann_krause", encounters: float = 1.0):
        self.epsilon, self.mu, self.campaign_weight = float(epsilon), float(mu), float(campaign_weight)
        self.rule, self.encounters = str(rule), float(encounters)
        check_parameters("opinion_diffusion", [
            ("rule", self.rule in RULES, f"must be one of {', '.join(RULES)} (got '{self.rule}')"),
            ("encounters", self.encounters >= 0, f"must be 0 or more (got {self.encounters})"),
            ("epsilon", self.epsilon >= 0, f"must be 0 or more (got {self.epsilon})"),
            # a step of mu (or campaign_weight * trust) towards another opinion in [0, 1] stays in [0, 1]
            ("mu", 0 <= self.mu <= 1, f"must be between 0 and 1 (got {self.mu})"),
            ("campaign_weight", 0 <= self.campaign_weight <= 1,
             f"must be between 0 and 1 (got {self.campaign_weight})")])

    def decide_batch(self, observations, memories):
        if self.rule == "deffuant":
            moved, reasons = self._encounters(observations)
        actions = []
        for obs in observations:
            me = obs.local_physical
            if self.rule == "deffuant":
                x, why = moved[obs.agent_id], reasons[obs.agent_id]
            else:
                # Hegselmann-Krause: move by mu towards the mean of the neighbours within epsilon. The sum
                # is a loop in neighbour order, not sum(), whose rounding changed in Python 3.12.
                x = me["opinion"]
                total, close = 0.0, 0
                for y in obs.local_information["neighbour_opinions"]:
                    if abs(y - x) < self.epsilon:
                        total += y
                        close += 1
                if close:
                    x += self.mu * (total / close - x)
                why = f"{close} neighbours within reach"
            # while the campaign is on air, a pull towards its position if it is within reach
            campaign = obs.macro_information
            if campaign["broadcasts"]:
                target = campaign["campaign_position"]
                if abs(target - x) < 1.5 * self.epsilon:
                    x += self.campaign_weight * me["media_trust"] * (target - x)
            actions.append(Action(agent_id=obs.agent_id, step=obs.step, kind="post",
                                  payload={"opinion": min(max(x, 0.0), 1.0)}, rationale=why))
        return actions

    def _encounters(self, observations) -> tuple[dict[str, float], dict[str, str]]:
        """Deffuant's pairs, one after another on the opinions as the pairs before left them."""
        opinion = {obs.agent_id: obs.local_physical["opinion"] for obs in observations}
        ids = list(opinion)
        met = dict.fromkeys(ids, 0)
        moved = dict.fromkeys(ids, 0)
        n_pairs = round(self.encounters * len(ids) / 2)
        rng = self.ctx.rng("encounters")
        picks, partners = rng.integers(0, len(ids), n_pairs).tolist(), rng.random(n_pairs).tolist()
        neighbours: dict[str, list[str]] = {}
        for k, u in zip(picks, partners):
            a = ids[k]
            if a not in neighbours:
                neighbours[a] = [b for b in self.ctx.neighbors(a) if b in opinion]
            if not neighbours[a]:
                continue
            b = neighbours[a][int(u * len(neighbours[a]))]
            x, y = opinion[a], opinion[b]
            met[a] += 1
            met[b] += 1
            if abs(x - y) < self.epsilon:
                opinion[a], opinion[b] = x + self.mu * (y - x), y + self.mu * (x - y)
                moved[a] += 1
                moved[b] += 1
        return opinion, {a: f"met {met[a]} neighbour(s), {moved[a]} within reach" for a in ids}


class OpinionMetrics(MetricCollector):
    def collect(self, t, environment, actions):
        xs = list(environment.opinion.values())
        n = len(xs)
        mean = sum(xs) / n
        sd = (sum((x - mean) ** 2 for x in xs) / n) ** 0.5
        return {"mean_opinion": mean, "opinion_sd": sd,
                "support_share": sum(1 for x in xs if x > 0.5) / n,
                "extreme_share": sum(1 for x in xs if x < 0.1 or x > 0.9) / n}
