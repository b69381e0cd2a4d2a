"""rumor_network: a rumour on a Watts-Strogatz small-world network, in one of two transmission modes.

States: ``ignorant``, ``spreader``, ``stifler``. A week (one step) has three
rounds, so the rumour can travel several hops a week. ``transmission`` picks
how it travels.

``contagion`` (the default): the rumour spreads like an epidemic, with a
Maki-Thompson stopping rule. Per round ``r``:

* every spreader posts the rumour to all its neighbours (an action of kind
  ``post``, routed to the message bus by ``NeighborFeed.ingest`` in ``apply``);
* every agent reads the posts its neighbours made in the round before
  (``NeighborFeed.local_for``; the bus carries the previous step, so round 0
  reads the previous week's last round): an ignorant who reads posts from
  ``n`` spreading neighbours believes with probability
  ``1 - (1 - p_believe)^n`` and starts spreading (its first ``post``), or
  just notes that it has heard (kind ``hear``);
* a spreader addresses one neighbour at random; if that neighbour already
  knows the rumour, the spreader stops with probability ``p_stop`` (kind
  ``stop``). Only the spreader changes, as in Maki-Thompson; Daley-Kendall's
  rule (two spreaders meeting both stop) is not used.

``maki_thompson``: Maki & Thompson's (1973) process, one contact per spreader
per round. Each spreader picks one random neighbour and tells it (kind
``tell``, payload ``to``); the tells of a round are resolved one at a time in
a random order (``turn``), each against the states as the tells before it
left them: a told ignorant believes with probability ``p_believe`` and
becomes a spreader (it tells from the next round on), or has only heard it;
a spreader who tells a spreader or a stifler becomes a stifler with
probability ``p_stop``. With ``p_believe = p_stop = 1`` this is the classic
model: on a complete graph, where the outcome of a contact depends only on
the counts, a random sequence of single contacts is exactly its jump chain,
and about 0.203 of the population never hears the rumour.

In both modes, from the step of the ``official_correction`` broadcast on,
spreaders also stop with probability ``correction_stop`` per round and
ignorants believe with ``p_believe * (1 - correction_doubt)``.

In both modes an agent who hears the rumour and does not believe it stays
``ignorant`` (its ``heard`` state and ``reach`` record the hearing): the state
means "not convinced", not Maki-Thompson's "never heard" (``1 - reach``); the
two agree when ``p_believe = 1``. The probabilities are checked to lie in
[0, 1], ``n_agents`` and ``n_seeds`` to be at least 1 (``n_seeds`` at most
``n_agents``), each refusal naming the parameter in simulation.json.

The state changes only through ``apply``, and every draw comes from
``ctx.rng`` (per step and round), so a branch that replays stored rounds
reproduces the parent exactly up to its fork.
"""
from __future__ import annotations

from desim import (Action, DecisionModel, EnvironmentProvider, InMemoryMessageBus, Message, MetricCollector,
                   NeighborFeed, Observation, Persona, PopulationProvider, check_parameters, neighbors_fn)

IGNORANT, SPREADER, STIFLER = "ignorant", "spreader", "stifler"
CORRECTION_CHANNEL = "official"
TRANSMISSIONS = ("contagion", "maki_thompson")


def check_transmission(transmission: str) -> str:
    check_parameters("rumor_network", [("transmission", transmission in TRANSMISSIONS,
             f"must be one of {', '.join(TRANSMISSIONS)} (got '{transmission}')")])
    return transmission


def probability(name: str, value: float) -> tuple[str, bool, str]:
    return name, 0.0 <= value <= 1.0, f"a probability, must be in [0, 1] (got {value:g})"


class Population(PopulationProvider):
    def __init__(self, n: int = 1000):
        self.n = int(n)
        check_parameters("rumor_network", [("n_agents", self.n >= 1, f"must be at least 1 (got {self.n})")])

    def personas(self, rng):
        width = len(str(self.n - 1))
        return [Persona(agent_id=f"p{i:0{width}d}") for i in range(self.n)]


class RumorEnvironment(EnvironmentProvider):
    """Who knows the rumour, who heard it, and the feed the rumour travels on."""

    def __init__(self, n_seeds: int = 5, transmission: str = "contagion"):
        self.n_seeds = int(n_seeds)
        self.transmission = check_transmission(transmission)
        check_parameters("rumor_network", [("n_seeds", self.n_seeds >= 1, f"must be at least 1 (got {self.n_seeds})")])

    def reset(self, seed):
        ctx = self.ctx
        check_parameters("rumor_network", [("n_seeds", self.n_seeds <= len(ctx.agent_ids),
                 f"must be at most the number of agents, {len(ctx.agent_ids)} (got {self.n_seeds})")])
        self.neighbors = neighbors_fn(ctx.graph)
        self.state = {a: IGNORANT for a in ctx.agent_ids}
        self.heard: set[str] = set()
        self.new_spreaders = 0
        self.bus = InMemoryMessageBus(carry_previous_step=True)
        self.feed = NeighborFeed(self.neighbors, self.bus)
        picks = ctx.streams.numpy("seeds").choice(len(ctx.agent_ids), size=min(self.n_seeds, len(ctx.agent_ids)),
                                                  replace=False)
        seeds = [ctx.agent_ids[i] for i in sorted(picks)]
        for a in seeds:
            self.state[a] = SPREADER
            self.heard.add(a)
        # the seed spreaders' first posts, read in round 0 of week 1 (under contagion; Maki-Thompson spreaders
        # tell from round 0 on)
        if self.transmission == "contagion":
            self.feed.ingest([Action(agent_id=a, step=0, kind="post", payload={"rumor": True}) for a in seeds],
                             step=0, round_idx=ctx.rounds - 1)

    def advance_to(self, t):
        self.new_spreaders = 0
        return super().advance_to(t)

    def correction_on_air(self) -> bool:
        return any(b["channel"] == CORRECTION_CHANNEL for b in self.ctx.interventions.active_broadcasts())

    def observe_batch(self, ids, t, round_idx):
        on_air = {"correction": self.correction_on_air()}
        observations = []
        if self.transmission == "maki_thompson":
            # a spreader needs its neighbours, to pick the one it tells
            for a in ids:
                spreading = self.state[a] == SPREADER
                observations.append(Observation(
                    agent_id=a, step=t, round_idx=round_idx, local_physical={"rumor_state": self.state[a]},
                    macro_information=on_air, local_information={"neighbours": self.neighbors(a) if spreading else []}))
            return observations
        # contagion: who posted in the round before (this step's previous round, or last step's final
        # round), and how many neighbours already know
        src_step, src_round = (t, round_idx - 1) if round_idx > 0 else (t - 1, self.ctx.rounds - 1)
        for a in ids:
            posters = sorted({m.author_id for m in self.feed.local_for(a, t, round_idx)
                              if m.step == src_step and m.round == src_round})
            neighbours = self.neighbors(a)
            informed = sum(1 for b in neighbours if self.state[b] != IGNORANT)
            observations.append(Observation(
                agent_id=a, step=t, round_idx=round_idx,
                local_physical={"rumor_state": self.state[a], "degree": len(neighbours),
                                "informed_neighbours": informed},
                macro_information=on_air, local_information={"posts_from": posters}))
        return observations

    def apply(self, actions):
        tells = []
        for a in actions:
            who = a.agent_id
            if a.kind == "post":
                if self.state[who] == IGNORANT:
                    self.state[who] = SPREADER
                    self.new_spreaders += 1
                self.heard.add(who)
            elif a.kind == "hear":
                self.heard.add(who)
            elif a.kind == "stop":
                self.state[who] = STIFLER
            elif a.kind == "tell":
                tells.append(a)
        self.feed.ingest(actions, self.ctx.step, self.ctx.round_idx)
        self._resolve_tells(tells)

    def _resolve_tells(self, tells: list[Action]) -> None:
        """Maki-Thompson contacts, one at a time in turn order, each on the states the ones before left."""
        for a in sorted(tells, key=lambda a: (a.payload["turn"], a.agent_id)):
            who, to = a.agent_id, a.payload["to"]
            if self.state[who] != SPREADER:
                raise ValueError(f"rumor_network: agent {who} tells the rumour but is {self.state[who]}")
            if to not in self.neighbors(who):
                raise ValueError(f"rumor_network: agent {who} tells {to!r}, who is not its neighbour")
            self.bus.post(Message(author_id=who, step=self.ctx.step, round=self.ctx.round_idx,
                                  content={"rumor": True}, channel="feed", kind="tell", audience=to))
            if self.state[to] == IGNORANT:
                self.heard.add(to)
                if a.payload["believe"]:
                    self.state[to] = SPREADER
                    self.new_spreaders += 1
            elif a.payload["stop"]:
                self.state[who] = STIFLER

    def agent_state(self, agent_id):
        return {"rumor_state": self.state[agent_id], "heard": agent_id in self.heard}


class RumorRule(DecisionModel):
    """Believe, spread or stop: by reading posts (``contagion``) or by one contact a round (``maki_thompson``)."""

    def __init__(self, p_believe: float = 0.1, p_stop: float = 0.2, correction_stop: float = 0.25,
                 correction_doubt: float = 0.5, transmission: str = "contagion"):
        self.p_believe, self.p_stop = float(p_believe), float(p_stop)
        self.correction_stop, self.correction_doubt = float(correction_stop), float(correction_doubt)
        self.transmission = check_transmission(transmission)
        check_parameters("rumor_network", [probability("p_believe", self.p_believe), probability("p_stop", self.p_stop),
                probability("correction_stop", self.correction_stop),
                probability("correction_doubt", self.correction_doubt)])

    def decide_batch(self, observations, memories):
        if self.transmission == "maki_thompson":
            return self._maki_thompson(observations)
        rng = self.ctx.rng("decisions")
        draws = rng.random((len(observations), 4))  # the same four draws for every agent, whatever its state
        actions = []
        for obs, (u_believe, u_contact, u_stop, u_correction) in zip(observations, draws):
            state = obs.local_physical["rumor_state"]
            correction = obs.macro_information["correction"]
            kind = None
            if state == IGNORANT:
                n = len(obs.local_information["posts_from"])
                if n:
                    p = self.p_believe * ((1 - self.correction_doubt) if correction else 1.0)
                    if u_believe < 1 - (1 - p) ** n:
                        kind, payload, why = "post", {"rumor": True}, f"believed it from {n} neighbour(s)"
                    else:
                        kind, payload, why = "hear", {}, f"heard it from {n} neighbour(s), not convinced"
            elif state == SPREADER:
                degree = obs.local_physical["degree"]
                share = obs.local_physical["informed_neighbours"] / degree if degree else 1.0
                if correction and u_correction < self.correction_stop:
                    kind, payload, why = "stop", {}, "the official correction"
                elif u_contact < share and u_stop < self.p_stop:
                    kind, payload, why = "stop", {}, "told someone who already knew"
                else:
                    kind, payload, why = "post", {"rumor": True}, "passing it on"
            if kind is not None:
                actions.append(Action(agent_id=obs.agent_id, step=obs.step, kind=kind, payload=payload,
                                      rationale=why))
        return actions

    def _maki_thompson(self, observations):
        """Each spreader tells one random neighbour; the coins for the outcome are drawn here, the
        outcome is settled by the environment in turn order."""
        rng = self.ctx.rng("decisions")
        draws = rng.random((len(observations), 5))
        actions = []
        for obs, (u_contact, u_turn, u_believe, u_stop, u_correction) in zip(observations, draws):
            if obs.local_physical["rumor_state"] != SPREADER:
                continue
            correction = obs.macro_information["correction"]
            nbrs = obs.local_information["neighbours"]
            if correction and u_correction < self.correction_stop:
                kind, payload, why = "stop", {}, "the official correction"
            elif nbrs:
                to = nbrs[int(u_contact * len(nbrs))]
                p = self.p_believe * ((1 - self.correction_doubt) if correction else 1.0)
                kind, why = "tell", f"told {to}"
                payload = {"to": to, "turn": float(u_turn), "believe": bool(u_believe < p),
                           "stop": bool(u_stop < self.p_stop)}
            else:
                continue
            actions.append(Action(agent_id=obs.agent_id, step=obs.step, kind=kind, payload=payload, rationale=why))
        return actions


class RumorMetrics(MetricCollector):
    def collect(self, t, environment, actions):
        states = list(environment.state.values())
        n = len(states) or 1
        return {"share_ignorant": states.count(IGNORANT) / n, "share_spreader": states.count(SPREADER) / n,
                "share_stifler": states.count(STIFLER) / n, "reach": len(environment.heard) / n,
                "new_spreaders": float(environment.new_spreaders)}
