"""Schelling in Mesa 3.5.1 or 3.3.1, for the side-by-side benchmark (runs in benchmarks/.venv-mesa-* only).

Mesa is a benchmark-only dependency: this file is never imported by desim.
It is written against Mesa's documented 3.x API (``Model(rng=...)``,
``OrthogonalMooreGrid``, ``CellAgent``, ``AgentSet.shuffle_do``), the same
code for both versions, with the update order of ``studies/schelling`` (rule
``classic``): every agent's happiness is evaluated at the start of the step,
then the unhappy agents, in a random order, each move to a random empty cell;
an agent with no neighbour is unhappy.

The model is seeded with ``rng=seed``: Mesa 3.5 deprecates ``seed=`` (a
FutureWarning) for ``rng=``, and on both versions an integer ``rng`` seeds
``model.random`` and ``model.rng`` exactly as ``seed`` did.
Both versions' ``select_random_empty_cell`` draw cells with
``random.choice`` until one is empty (3.5.1 falls back to a list of the empty
cells after 50 misses, which at density 0.8 almost never happens), so a seed
gives the same run on both; the mean same-type share may differ in its last
digits only, as Python 3.12's ``sum`` of floats is compensated and 3.11's is not.

Usage: ``python mesa_models.py WIDTH HEIGHT DENSITY MINORITY HOMOPHILY STEPS SEED TORUS [panel]``;
prints one JSON line with the timing, the outcome and the Mesa and Python versions. With ``panel``, a
``DataCollector`` also records every agent's x, y, type and happiness at every
step (in memory), the nearest Mesa gets to desim's panel.
"""
from __future__ import annotations

import json
import platform
import sys
import time

import mesa
from mesa.discrete_space import CellAgent, OrthogonalMooreGrid


class Resident(CellAgent):
    def __init__(self, model: "Segregation", cell, kind: int):
        super().__init__(model)
        self.cell = cell
        self.kind = kind
        self.happy = False

    def counts(self) -> tuple[int, int]:
        """(same-type neighbours, occupied neighbour cells) in the Moore neighbourhood."""
        neighbours = list(self.cell.neighborhood.agents)
        return sum(1 for n in neighbours if n.kind == self.kind), len(neighbours)

    def evaluate(self) -> None:
        same, occupied = self.counts()
        self.happy = occupied > 0 and same >= self.model.homophily * occupied - 1e-9

    def relocate(self) -> None:
        if not self.happy:
            self.cell = self.model.grid.select_random_empty_cell()


class Segregation(mesa.Model):
    def __init__(self, width: int, height: int, density: float, minority: float, homophily: float,
                 seed: int, torus: bool, panel: bool = False):
        super().__init__(rng=seed)     # ``seed=`` is deprecated in Mesa 3.5; an int rng is the same seeding
        self.homophily = homophily
        self.panel = mesa.DataCollector(agent_reporters={
            "x": lambda a: a.cell.coordinate[0], "y": lambda a: a.cell.coordinate[1],
            "type": "kind", "happy": "happy"}) if panel else None
        self.grid = OrthogonalMooreGrid((width, height), torus=torus, capacity=1, random=self.random)
        for cell in self.grid.all_cells:
            if self.random.random() < density:
                Resident(self, cell, 1 if self.random.random() < minority else 0)

    def step(self) -> None:
        self.agents.do("evaluate")
        self.agents.shuffle_do("relocate")
        if self.panel is not None:
            self.panel.collect(self)

    def mean_same_share(self) -> float:
        shares = [s / o for s, o in (a.counts() for a in self.agents) if o > 0]
        return sum(shares) / len(shares)

    def share_happy(self) -> float:
        self.agents.do("evaluate")
        return sum(a.happy for a in self.agents) / len(self.agents)


def main(argv: list[str]) -> None:
    width, height = int(argv[0]), int(argv[1])
    density, minority, homophily = float(argv[2]), float(argv[3]), float(argv[4])
    steps, seed, torus = int(argv[5]), int(argv[6]), argv[7] == "1"
    panel = argv[8:] == ["panel"]
    started = time.perf_counter()
    model = Segregation(width, height, density, minority, homophily, seed, torus, panel)
    built, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        model.step()
    done, cpu1 = time.perf_counter(), time.process_time()
    print(json.dumps({"mesa_version": mesa.__version__, "python": platform.python_version(),
                      "agents": len(model.agents), "steps": steps, "panel": panel,
                      "setup_s": built - started, "steps_s": done - built, "steps_cpu_s": cpu1 - cpu0,
                      "mean_same_share": model.mean_same_share(), "share_happy": model.share_happy()}))


if __name__ == "__main__":
    main(sys.argv[1:])
