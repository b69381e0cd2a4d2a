"""opinion_diffusion in Mesa 3.5.1 or 3.3.1, for the per-agent benchmark (runs in benchmarks/.venv-mesa-* only).

Mesa is a benchmark-only dependency: this file is never imported by desim.
It is the rule of ``studies/opinion_diffusion`` written the way a Mesa 3 user
would write it, in two variants:

* ``network``: agents are ``FixedAgent``s on the cells of a
  ``mesa.discrete_space.Network`` built from the exported edges, and read
  their neighbours through ``cell.neighborhood.agents``;
* ``lists``: plain ``mesa.Agent``s, each holding a list of its neighbour agents.

The rule, as the study has it: every step each agent reads the opinions its
neighbours posted the step before (everyone posted its initial opinion at
step 0), moves by ``mu`` towards the mean of the ones within ``epsilon`` of
its own, and, while the campaign is on air (``campaign_week`` for ``ttl``
steps), towards the campaign's position by ``campaign_weight * media_trust``
if that position is within ``1.5 * epsilon``; the result is clipped to
[0, 1]; then everyone posts. The arithmetic is the study's, statement for
statement (one loop summing the close opinions, two comparisons to clip), so
the two sides differ only in how agents and neighbours are held and stepped.
Reading last step's posts makes the update synchronous, so it is two passes over the agents
(``update``, then ``post``), as Mesa's staged activation would do it.

The population (initial opinions, media trust, the network) comes from a
JSON file exported from a desim run, so both sides start from the same agents.
Each agent's neighbours are listed in the order desim's feed reads them: the
mean of the close opinions is a float sum whose last bit depends on the order,
so only the same order gives the same run bit for bit.

The same code runs on Mesa 3.5.1 and 3.3.1. Two things differ by version:

* Mesa 3.5's ``Network`` computes a layout of the whole graph when built
  (``layout=nx.spring_layout`` by default), node positions for drawing that
  this rule never reads, which took 691 s at 20,000 nodes (0.06 s with
  ``layout=None``) on the 2-core benchmark machine; the model
  passes ``layout=None`` (a purely topological network), where ``Network``
  has that parameter (3.3.1's has none and computes no layout), so the whole
  run times the same work on both versions;
* the model is seeded with ``rng=`` (3.5 deprecates ``seed=``; on both an
  integer ``rng`` seeds exactly as ``seed`` did). Nothing in the rule draws a
  random number, so the run does not depend on it.

Mesa 3.5.1 runs on Python 3.12, whose ``sum`` of floats is compensated: the
final metrics add their floats left to right (``float_sum``), as ``sum`` does
on Python 3.11 in the study's own metrics, so they compare bit for bit.

Usage: ``python mesa_opinion.py POPULATION.json network|lists``; prints one
JSON line with the timing, the final metrics and the Mesa and Python versions.
"""
from __future__ import annotations

import inspect
import json
import platform
import sys
import time

import mesa
import networkx as nx
from mesa.discrete_space import FixedAgent, Network

# Mesa 3.5's Network builds a spring layout of the whole graph unless told layout=None (691 s at
# 20,000 nodes on the benchmark machine, positions the rule never uses); Mesa 3.3.1's Network has no layout parameter.
NETWORK_OPTIONS = {"layout": None} if "layout" in inspect.signature(Network).parameters else {}


class Citizen:
    """The bounded-confidence rule, shared by both variants (they differ in how neighbours are found)."""

    def setup(self, opinion: float, media_trust: float) -> None:
        self.opinion = opinion
        self.posted = opinion           # everyone states their opinion at step 0
        self.media_trust = media_trust

    def neighbours(self):
        raise NotImplementedError

    def update(self) -> None:
        m = self.model
        x = self.opinion
        eps, total, k = m.epsilon, 0.0, 0
        for n in self.neighbours():
            y = n.posted
            if -eps < y - x < eps:
                total += y
                k += 1
        new = x + m.mu * (total / k - x) if k else x
        if m.on_air:
            target = m.campaign_position
            if abs(target - new) < 1.5 * m.epsilon:
                new += m.campaign_weight * self.media_trust * (target - new)
        self.opinion = 0.0 if new < 0.0 else 1.0 if new > 1.0 else new

    def post(self) -> None:
        self.posted = self.opinion


class NetworkCitizen(Citizen, FixedAgent):
    def __init__(self, model: "OpinionModel", cell, opinion: float, media_trust: float):
        super().__init__(model)
        self.cell = cell
        self.setup(opinion, media_trust)

    def neighbours(self):
        return self.cell.neighborhood.agents


class ListCitizen(Citizen, mesa.Agent):
    def __init__(self, model: "OpinionModel", opinion: float, media_trust: float):
        super().__init__(model)
        self.linked: list[ListCitizen] = []
        self.setup(opinion, media_trust)

    def neighbours(self):
        return self.linked


def who_reads_whom(neighbours: list[list[int]]) -> nx.DiGraph:
    """The network as a graph whose ``neighbors(i)`` lists ``neighbours[i]`` in that order.

    The exported network is undirected, but an undirected ``nx.Graph`` orders
    each node's neighbours by when its edges were added, which cannot follow
    every agent's given order at once; a directed graph with both directions of
    every tie can, and ``Network`` connects each cell to ``G.neighbors`` of it.
    """
    graph = nx.DiGraph()
    graph.add_nodes_from(range(len(neighbours)))
    graph.add_edges_from((i, j) for i, nbrs in enumerate(neighbours) for j in nbrs)
    return graph


def float_sum(values) -> float:
    """Floats added left to right, as ``sum`` does on Python 3.11, where desim and its study's metrics run.
    Python 3.12's ``sum`` of floats is compensated, so on Mesa 3.5.1's Python 3.12 ``sum`` would change
    the last bit of ``opinion_sd`` and hide whether the two sides' agents ended the same bit for bit."""
    total = 0.0
    for v in values:
        total += v
    return total


class OpinionModel(mesa.Model):
    def __init__(self, population: dict, variant: str, seed: int = 42):
        super().__init__(rng=seed)     # ``seed=`` is deprecated in Mesa 3.5; an int rng is the same seeding
        p = population["parameters"]
        self.epsilon, self.mu, self.campaign_weight = p["epsilon"], p["mu"], p["campaign_weight"]
        c = population["campaign"]
        self.campaign_position, self.campaign_week, self.campaign_ttl = c["position_before"], c["week"], c["ttl"]
        self.campaign_target = c["position"]
        self.on_air = False
        opinions, trust, neighbours = population["opinion"], population["media_trust"], population["neighbours"]
        if variant == "network":
            self.network = Network(who_reads_whom(neighbours), random=self.random, **NETWORK_OPTIONS)
            for i, (x, m) in enumerate(zip(opinions, trust)):
                NetworkCitizen(self, self.network[i], x, m)
        elif variant == "lists":
            agents = [ListCitizen(self, x, m) for x, m in zip(opinions, trust)]
            for agent, nbrs in zip(agents, neighbours):
                agent.linked = [agents[j] for j in nbrs]
        else:
            raise SystemExit(f"variant must be 'network' or 'lists', not {variant!r}")

    def step(self) -> None:
        if self.steps == self.campaign_week:            # the scheduled event
            self.campaign_position = self.campaign_target
        self.on_air = self.campaign_week <= self.steps < self.campaign_week + self.campaign_ttl
        self.agents.do("update")
        self.agents.do("post")

    def metrics(self) -> dict[str, float]:
        xs = self.agents.get("opinion")
        n = len(xs)
        mean = float_sum(xs) / n
        sd = (float_sum((x - mean) ** 2 for x in xs) / n) ** 0.5
        return {"mean_opinion": mean, "opinion_sd": sd,
                "support_share": sum(1 for x in xs if x > 0.5) / n,
                "extreme_share": sum(1 for x in xs if x < 0.1 or x > 0.9) / n}


def main(argv: list[str]) -> None:
    with open(argv[0], encoding="utf-8") as fh:
        population = json.load(fh)
    variant = argv[1]
    steps = population["n_steps"]
    started, cpu_start = time.perf_counter(), time.process_time()
    model = OpinionModel(population, variant)
    built, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        model.step()
    done, cpu1 = time.perf_counter(), time.process_time()
    print(json.dumps({"mesa_version": mesa.__version__, "python": platform.python_version(), "variant": variant,
                      "agents": len(model.agents), "steps": steps, "setup_s": built - started, "steps_s": done - built,
                      "setup_cpu_s": cpu0 - cpu_start, "steps_cpu_s": cpu1 - cpu0,
                      "whole_s": done - started, "whole_cpu_s": cpu1 - cpu_start, "metrics": model.metrics()}))


if __name__ == "__main__":
    main(sys.argv[1:])
