"""dorm_deliberation: students in dorms of six talk over where to eat each month.

A step is a month. Each month runs three rounds of dorm discussion through a
message bus (``interaction_rounds: 3``):

* round 0: every student posts an opening lean (canteen, delivery or cook)
  with a reason; nobody has spoken yet this month, so there is nothing to
  read;
* round 1: each reads the dorm-mates' round-0 posts and may be persuaded,
  then posts the (possibly revised) lean;
* round 2 (final): each reads rounds 0 and 1 and settles the month's choice,
  a ``choose_meal`` action that is not a post and carries its reason. Only
  this settled choice is the month's panel action.

The canteen is a SimPy ``Resource`` with a few servers and random service
times. After the month's choice the students who chose it are sent on an
errand (``ctx.occupy``): on each lunch day of the month they arrive in the
lunch window and queue. The mean measured wait is what everyone sees when
deciding the next month, so a busy canteen pushes students away.

The pieces are separate classes so that other studies can reuse them (the
LLM variant imports this module with ``desim.study.refs.study_module``):
``Students`` (population), ``DormEnvironment`` (world, bus, canteen),
``RuleDeliberation`` (the seeded rule decision model), ``DormMetrics``; and
``render_prompt`` / ``meal_action`` / ``read_option`` are the contract any
decision model follows (the round-0 prompt asks for an opening position, later
ones show the peers' posts and invite revision).
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import simpy

from desim import (Action, DecisionModel, EnvironmentProvider, InMemoryMessageBus, MetricCollector,
                   NeighborFeed, Observation, Persona, PopulationProvider, check_parameters, neighbors_fn)

OPTIONS = ("canteen", "delivery", "cook")
DAYS_PER_MONTH = 30


# --- population ------------------------------------------------------------------
class Students(PopulationProvider):
    """``n`` students in dorms of ``dorm_size``, with a budget, cooking skill,
    conformity, the value they put on a minute of queueing, and last term's habit."""

    def __init__(self, n: int = 150, dorm_size: int = 6):
        self.n, self.dorm_size = int(n), int(dorm_size)
        check_parameters("dorm_deliberation", [("n_students", self.n >= 1, f"must be at least 1 (got {self.n})"),
                ("dorm_size", self.dorm_size >= 1, f"must be at least 1 (got {self.dorm_size})")])

    def personas(self, rng):
        n = self.n
        budget = rng.uniform(180.0, 480.0, n)
        skill = rng.beta(2.0, 2.0, n)
        conformity = rng.beta(2.0, 2.0, n)
        time_value = rng.uniform(0.05, 0.2, n)
        habit = rng.choice(len(OPTIONS), size=n, p=[0.5, 0.2, 0.3])
        width = len(str(n - 1))
        dorms = (n + self.dorm_size - 1) // self.dorm_size
        dwidth = len(str(dorms))
        return [Persona(agent_id=f"s{i:0{width}d}", attributes={
            "dorm": f"D{i // self.dorm_size + 1:0{dwidth}d}",
            "budget": round(float(budget[i]), 2),
            "cooking_skill": round(float(skill[i]), 4),
            "conformity": round(float(conformity[i]), 4),
            "time_value": round(float(time_value[i]), 4),
            "habit": OPTIONS[int(habit[i])]},
            description="a student sharing a dorm kitchen with five others")
            for i in range(n)]


# --- the contract between the environment and any decision model -----------------
def read_option(action: Action) -> tuple[str, str]:
    """The (option, reason) an action states: a post's lean or a settled choice."""
    if action.kind == "post":
        content = action.payload.get("content") or {}
        option, reason = content.get("lean"), content.get("reason", "")
    elif action.kind == "choose_meal":
        option, reason = action.payload.get("choice"), action.payload.get("reason", "")
    else:
        raise ValueError(f"agent {action.agent_id}: action kind '{action.kind}' is neither "
                         "'post' (a lean) nor 'choose_meal' (the settled choice)")
    if option not in OPTIONS:
        raise ValueError(f"agent {action.agent_id}, step {action.step}: option {option!r} is not one of {OPTIONS}")
    return option, str(reason)


def meal_action(obs: Observation, option: str, reason: str, source: str = "rule") -> Action:
    """The action for ``option``: a post in rounds before the last, the settled choice in the last.

    Both carry the reason, so the panel's final action still says why.
    """
    if obs.macro_information["final_round"]:
        kind, payload = "choose_meal", {"choice": option, "reason": reason}
    else:
        kind, payload = "post", {"content": {"lean": option, "reason": reason}}
    return Action(agent_id=obs.agent_id, step=obs.step, kind=kind, payload=payload, rationale=reason, source=source)


def render_prompt(obs: Observation) -> str:
    """The text a language model would read. Round 0 asks for an opening
    position (there is nothing to react to yet); later rounds show the
    dorm-mates' posts and invite revision; the last round asks to settle."""
    mp, mi, lp = obs.macro_physical, obs.macro_information, obs.local_physical
    lines = [
        f"You are a student in dorm {lp['dorm']} with a monthly food budget of {lp['budget']:.0f}, "
        f"cooking skill {lp['cooking_skill']:.2f} (0-1). It is month {obs.step}.",
        f"A canteen lunch costs {mp['canteen_price']:.2f}, a delivered meal {mp['delivery_price']:.2f}, "
        f"cooking costs about {mp['grocery_cost']:.2f} in groceries.",
        f"Last month the canteen queue averaged {mi['canteen_wait_min']:.1f} minutes. "
        f"Last month you chose: {lp['last_choice']}.",
    ]
    for b in mi.get("broadcasts", []):
        lines.append(f"Notice ({b['channel']}): {b['content']}")
    posts = obs.local_information.get("peer_posts", [])
    if obs.round_idx == 0:
        lines.append("Nobody in your dorm has spoken yet this month. Say what you are leaning towards "
                     "(canteen, delivery or cook) and why, in one sentence.")
        lines.append('Reply as JSON: {"lean": "...", "reason": "..."}')
        return "\n".join(lines)
    lines.append("Your dorm-mates said:")
    lines += [f"- {p['author']} (round {p['round']}): {p['lean']} - \"{p['reason']}\"" for p in posts] or ["- (nothing)"]
    lines.append(f"You said you lean towards {lp['my_lean']}: \"{lp['my_reason']}\".")
    if mi["final_round"]:
        lines.append("Settle this month's choice (canteen, delivery or cook) and give your reason.")
        lines.append('Reply as JSON: {"choice": "...", "reason": "..."}')
    else:
        lines.append("Does anything they said change your mind? State your current lean and why.")
        lines.append('Reply as JSON: {"lean": "...", "reason": "..."}')
    return "\n".join(lines)


# --- the environment ----------------------------------------------------------------
class DormEnvironment(EnvironmentProvider):
    """Prices (layers), the dorm message bus, and the canteen queue."""

    def __init__(self, lunch_days: int = 10, lunch_window_minutes: float = 40.0):
        self.lunch_days = int(lunch_days)
        self.lunch_window = float(lunch_window_minutes)
        check_parameters("dorm_deliberation", [("lunch_days", 1 <= self.lunch_days <= 28, f"must be in 1..28 (got {self.lunch_days})")])

    def reset(self, seed):
        ctx = self.ctx
        iv = ctx.interventions
        self.bus = InMemoryMessageBus(carry_previous_step=False)
        self.feed = NeighborFeed(neighbors_fn(ctx.graph), self.bus)
        self.dorm = {a: iv.attribute(a, "dorm") for a in ctx.agent_ids}
        self.choice = {a: iv.attribute(a, "habit") for a in ctx.agent_ids}
        self.opening: dict[str, str] = {}
        self.lean: dict[str, str] = {}
        self.reason: dict[str, str] = {}
        self.leans_by_round: list[dict[str, str]] = []
        self.wait_seen = float(iv.value("expected_wait_min", 0.0))
        self.own_wait: dict[str, float | None] = {a: None for a in ctx.agent_ids}
        self._month_waits: dict[str, list[float]] = {}
        self.canteen: simpy.Resource | None = None
        # the canteen's layers as the study sets them (from the parameters of the same names), checked before
        # the first month rather than when the first diners queue
        servers, service = iv.value("canteen_servers"), float(iv.value("service_minutes"))
        check_parameters("dorm_deliberation", [("canteen_servers", servers >= 1,
                 f"the canteen's servers (layer canteen_servers), must be at least 1 (got {servers:g})"),
                ("service_minutes", 0.0 <= service < math.inf,
                 f"the mean service time (layer service_minutes), must be 0 or more (got {service:g})")])

    def advance_to(self, t):
        fired = super().advance_to(t)
        if t >= 2:
            self._close_month()
        self.leans_by_round = []
        self.opening, self.lean, self.reason = {}, {}, {}
        return fired

    def _close_month(self) -> None:
        """The queue measured during the month that just ended becomes what students see
        (before month 1 they go by the layer ``expected_wait_min``; a month nobody ate
        at the canteen measured no queue)."""
        waits = [w for ws in self._month_waits.values() for w in ws]
        self.wait_seen = float(np.mean(waits)) if waits else 0.0
        self.own_wait = {a: (float(np.mean(self._month_waits[a])) if self._month_waits.get(a) else None)
                         for a in self.ctx.agent_ids}
        self._month_waits = {}

    def observe_batch(self, ids, t, round_idx):
        ctx, iv = self.ctx, self.ctx.interventions
        final = round_idx == ctx.rounds - 1
        macro_physical = {k: float(iv.value(k)) for k in ("canteen_price", "delivery_price", "grocery_cost")}
        macro_information = {"canteen_wait_min": self.wait_seen, "round": round_idx, "rounds": ctx.rounds,
                             "final_round": final, "broadcasts": iv.active_broadcasts()}
        out = []
        for a in ids:
            attrs = iv.attributes[a]
            posts = [{"author": m.author_id, "round": m.round, "lean": m.content["lean"],
                      "reason": m.content["reason"]} for m in self.feed.local_for(a, t, round_idx)]
            obs = Observation(
                agent_id=a, step=t, round_idx=round_idx, macro_physical=macro_physical,
                macro_information=macro_information,
                local_physical={"dorm": attrs["dorm"], "budget": attrs["budget"],
                                "cooking_skill": attrs["cooking_skill"], "conformity": attrs["conformity"],
                                "time_value": attrs["time_value"], "last_choice": self.choice[a],
                                "my_wait_min": self.own_wait[a], "my_lean": self.lean.get(a),
                                "my_reason": self.reason.get(a)},
                local_information={"peer_posts": posts})
            obs.text = render_prompt(obs)
            out.append(obs)
        return out

    def apply(self, actions):
        ctx = self.ctx
        r = ctx.round_idx
        leans = {}
        for a in actions:
            option, reason = read_option(a)
            leans[a.agent_id] = option
            self.lean[a.agent_id], self.reason[a.agent_id] = option, reason
            if r == 0:
                self.opening[a.agent_id] = option
        self.leans_by_round.append(leans)
        self.feed.ingest(actions, ctx.step, r)
        if r == ctx.rounds - 1:
            self.choice.update(leans)
            self._send_to_lunch(ctx.step)

    # --- the canteen --------------------------------------------------------
    def _send_to_lunch(self, t: int) -> None:
        """Start this month's lunches: every canteen diner queues on each lunch day."""
        ctx, iv = self.ctx, self.ctx.interventions
        servers = int(iv.value("canteen_servers"))
        if servers < 1:
            raise ValueError(f"environment layer canteen_servers must be at least 1, got {servers}")
        self.canteen = simpy.Resource(ctx.sim, capacity=servers)
        diners = [a for a in ctx.agent_ids if self.choice[a] == "canteen"]
        rng = ctx.streams.numpy(f"canteen/{t}")
        arrivals = rng.uniform(0.0, self.lunch_window, (len(diners), self.lunch_days))
        services = rng.exponential(float(iv.value("service_minutes")), (len(diners), self.lunch_days))
        self._month_waits = {a: [] for a in diners}
        for i, a in enumerate(diners):
            ctx.occupy(a, self._lunches(a, t, arrivals[i], services[i]))

    def _lunches(self, agent_id: str, t: int, arrivals, services):
        """One student's canteen lunches in month ``t``, as a SimPy process."""
        sim, clock = self.ctx.sim, self.ctx.clock
        spacing = DAYS_PER_MONTH / self.lunch_days
        for d in range(self.lunch_days):
            arrive = t + clock.days(d * spacing + 0.5) + clock.minutes(float(arrivals[d]))
            yield sim.timeout(arrive - sim.now)
            with self.canteen.request() as turn:
                yield turn
                self._month_waits[agent_id].append((sim.now - arrive) / clock.minutes(1))
                yield sim.timeout(clock.minutes(float(services[d])))

    def agent_state(self, agent_id):
        opening = self.opening.get(agent_id)
        return {"dorm": self.dorm[agent_id], "choice": self.choice[agent_id], "opening_lean": opening,
                "changed_mind": None if opening is None else opening != self.choice[agent_id],
                "wait_min": None if self.own_wait[agent_id] is None else round(self.own_wait[agent_id], 3)}


# --- the rule decision model ------------------------------------------------------
def utilities(obs: Observation) -> dict[str, float]:
    """How attractive each option is to this student, before habit and noise.

    Money weighs more on a small budget; the canteen costs queueing time,
    cooking costs effort that skill reduces, delivery buys convenience.
    """
    mp, lp = obs.macro_physical, obs.local_physical
    sensitivity = 300.0 / lp["budget"]
    wait = obs.macro_information["canteen_wait_min"]
    return {"canteen": -sensitivity * mp["canteen_price"] - lp["time_value"] * wait,
            "delivery": -sensitivity * mp["delivery_price"] + 2.5,
            "cook": -sensitivity * mp["grocery_cost"] - 4.0 * (1.0 - lp["cooking_skill"]) - 0.5}


def opening_reason(obs: Observation, option: str) -> str:
    mp, mi, lp = obs.macro_physical, obs.macro_information, obs.local_physical
    if option == "canteen":
        why = f"canteen lunch is {mp['canteen_price']:.2f} and the queue was about {mi['canteen_wait_min']:.0f} min"
    elif option == "delivery":
        why = f"delivery at {mp['delivery_price']:.2f} saves me queueing and cooking"
    else:
        why = f"cooking costs about {mp['grocery_cost']:.2f} a meal against {mp['canteen_price']:.2f} at the canteen"
    return why + (" (as last month)" if option == lp["last_choice"] else "")


class RuleDeliberation(DecisionModel):
    """The seeded rule: an opening lean from prices, queue, habit and taste
    noise; later rounds move towards a clear dorm majority with a probability
    given by the student's conformity.

    A majority is clear when more dorm-mates lean to it than to the student's
    own option counting the student too (so a 3-3 split stays put instead of
    swapping sides). Each round draws the same number of random numbers per
    agent from ``ctx.rng``, so a run is reproducible from its seed.
    """

    def __init__(self, habit: float = 0.6, noise: float = 1.0):
        self.habit, self.noise = float(habit), float(noise)
        check_parameters("dorm_deliberation", [("habit", math.isfinite(self.habit), f"must be a finite number (got {self.habit:g})"),
                ("noise", 0.0 <= self.noise < math.inf,
                 f"the scale of the taste shocks, must be 0 or more (got {self.noise:g})")])

    def decide_batch(self, observations, memories):
        if not observations:
            return []
        r = observations[0].round_idx
        if r == 0:
            rng = self.ctx.rng("opening")
            shocks = rng.gumbel(0.0, self.noise, (len(observations), len(OPTIONS)))
            return [meal_action(obs, *self.opening(obs, shocks[i])) for i, obs in enumerate(observations)]
        rng = self.ctx.rng("persuasion")
        draws = rng.random(len(observations))
        return [meal_action(obs, *self.revise(obs, draws[i])) for i, obs in enumerate(observations)]

    def opening(self, obs: Observation, shocks) -> tuple[str, str]:
        u = utilities(obs)
        u[obs.local_physical["last_choice"]] += self.habit
        scores = [u[o] + shocks[i] for i, o in enumerate(OPTIONS)]
        option = OPTIONS[int(np.argmax(scores))]
        return option, opening_reason(obs, option)

    def revise(self, obs: Observation, draw: float) -> tuple[str, str]:
        lp = obs.local_physical
        mine = lp["my_lean"] or lp["last_choice"]
        latest: dict[str, dict] = {}
        for p in obs.local_information["peer_posts"]:
            if p["author"] not in latest or p["round"] > latest[p["author"]]["round"]:
                latest[p["author"]] = p
        if not latest:
            return mine, lp["my_reason"] or opening_reason(obs, mine)
        counts = Counter(p["lean"] for p in latest.values())
        top = max(OPTIONS, key=lambda o: counts[o])
        if top != mine and counts[top] > counts[mine] + 1 and draw < lp["conformity"] * counts[top] / len(latest):
            voice = next(p for p in sorted(latest.values(), key=lambda p: p["author"]) if p["lean"] == top)
            return top, f"{counts[top]} of my {len(latest)} dorm-mates lean to {top} ({voice['reason']})"
        return mine, lp["my_reason"] or opening_reason(obs, mine)


# --- metrics ------------------------------------------------------------------------
def within_group_disagreement(leans: dict[str, str], group: dict[str, str]) -> float:
    """Mean over groups of the share of member pairs whose options differ (0: everyone agrees)."""
    members: dict[str, list[str]] = {}
    for a, option in leans.items():
        members.setdefault(group[a], []).append(option)
    shares = []
    for options in members.values():
        n = len(options)
        if n < 2:
            continue
        pairs = n * (n - 1) / 2
        same = sum(c * (c - 1) / 2 for c in Counter(options).values())
        shares.append(1.0 - same / pairs)
    return float(np.mean(shares)) if shares else 0.0


class DormMetrics(MetricCollector):
    """Shares of each option, the canteen wait students saw, and how much dorms disagreed per round.

    ``canteen_wait_min`` at step t is the mean wait measured during month t-1
    (what the students saw when deciding month t). ``disagreement_r<k>`` is
    the within-dorm disagreement of round k's leans, ``disagreement_final``
    that of the settled choices, ``consensus_share`` the share of dorms whose
    settled choice is unanimous.
    """

    def collect(self, t, environment, actions):
        env = environment
        n = len(env.choice)
        counts = Counter(env.choice.values())
        out = {f"{o}_share": counts[o] / n for o in OPTIONS}
        out["canteen_wait_min"] = env.wait_seen
        by_dorm: dict[str, set[str]] = {}
        for a, option in env.choice.items():
            by_dorm.setdefault(env.dorm[a], set()).add(option)
        out["consensus_share"] = sum(1 for s in by_dorm.values() if len(s) == 1) / len(by_dorm)
        if env.leans_by_round:
            for r, leans in enumerate(env.leans_by_round):
                out[f"disagreement_r{r}"] = within_group_disagreement(leans, env.dorm)
            out["disagreement_final"] = out[f"disagreement_r{len(env.leans_by_round) - 1}"]
            changed = [a for a, o in env.opening.items() if env.choice[a] != o]
            out["changed_mind_share"] = len(changed) / max(1, len(env.opening))
        return out
