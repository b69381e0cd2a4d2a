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
                   Observation, Persona, PopulationProvider, DecisionModel, StudyConfigError, neighbors_fn)


RULES = ("hegselmann_krause", "deffuant")
REACH = tuple(f"{k} neighbours within reach" for k in range(64))   # the rationales, made once


class Population(PopulationProvider):
    def __init__(self, n: int = 500):
        self.n = int(n)

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
        # written for speed, as the README recommends for per-agent studies: the round's neighbour
        # opinions read in one call (feed.latest: each neighbour's current opinion, once), names bound
        # once, each source read in a pass of its own (a quarter quicker at 100,000 agents than every
        # look-up inside one loop), the macro quadrant shared by every observation of the round
        iv = self.ctx.interventions
        macro = {"campaign_position": iv.value("campaign_position"), "broadcasts": iv.active_broadcasts()}
        heard = self.feed.latest(ids, t, round_idx, "opinion")
        opinion, attributes = self.opinion, iv.attributes
        opinions = [opinion[a] for a in ids]
        trust = [attributes[a]["media_trust"] for a in ids]
        # positional, in field order: agent_id, step, round_idx, macro_physical, local_physical,
        # macro_information, local_information (twice as quick as keywords)
        physical = {}       # nothing physical for everyone: one empty quadrant, shared
        return [Observation(a, t, round_idx, physical, {"opinion": x, "media_trust": m}, macro,
                            {"neighbour_opinions": neighbours})
                for a, x, m, neighbours in zip(ids, opinions, trust, heard)]

    def apply(self, actions):
        for a in actions:
            self.opinion[a.agent_id] = a.payload["opinion"]
        self.feed.ingest(actions, self.ctx.step, self.ctx.round_idx)

    def agent_state(self, agent_id):
        return {"opinion": self.opinion[agent_id]}

    def state_columns(self):
        # the panel's state of every agent at once, in population order: one list a step instead of
        # an agent_state call and a dict per agent (the README's speed tips); the same panel
        opinion = self.opinion
        return {"opinion": [opinion[a] for a in self.ctx.agent_ids]}


class BoundedConfidence(DecisionModel):
    """Bounded confidence by ``rule``: Hegselmann-Krause on the network, or Deffuant's pairwise encounters."""

    def __init__(self, epsilon: float = 0.3, mu: float = 0.5, campaign_weight: float = 0.4,
                 rule: str = "hegselmann_krause", encounters: float = 1.0):
        self.epsilon, self.mu, self.campaign_weight = float(epsilon), float(mu), float(campaign_weight)
        self.rule, self.encounters = str(rule), float(encounters)
        problems = [(f"parameters.{name}", f"opinion_diffusion: {message}") for name, ok, message in [
            ("rule", self.rule in RULES, f"must be one of {', '.join(RULES)} (got '{self.rule}')"),
            ("encounters", self.encounters >= 0, f"must be 0 or more (got {self.encounters})")] if not ok]
        if problems:
            raise StudyConfigError("simulation/simulation.json", problems)

    def decide_batch(self, observations, memories):
        # one loop, names bound once, no call per agent but the Action: the way to write a fast rule
        deffuant = self.rule == "deffuant"
        if deffuant:
            moved, whys = self._encounters(observations)
        eps, mu, pull, reach = self.epsilon, self.mu, self.campaign_weight, 1.5 * self.epsilon
        actions = []
        add = actions.append
        for obs in observations:
            me = obs.local_physical
            x = me["opinion"]
            if deffuant:
                x, why = moved[obs.agent_id], whys[obs.agent_id]
            else:                                   # Hegselmann-Krause: the mean of the close ones
                total, k = 0.0, 0
                for y in obs.local_information["neighbour_opinions"]:
                    if -eps < y - x < eps:
                        total += y
                        k += 1
                if k:
                    x = x + mu * (total / k - x)
                why = REACH[k] if k < len(REACH) else f"{k} neighbours within reach"
            macro = obs.macro_information           # the campaign's pull while it is on air
            if macro["broadcasts"]:
                target = macro["campaign_position"]
                if abs(target - x) < reach:
                    x += pull * me["media_trust"] * (target - x)
            x = 0.0 if x < 0.0 else 1.0 if x > 1.0 else x      # clipped to [0, 1] by comparisons, not calls
            # positional, in field order: agent_id, step, kind, payload, rationale (source: "rule")
            add(Action(obs.agent_id, obs.step, "post", {"opinion": x}, why))
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
