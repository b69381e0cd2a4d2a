"""sugarscape: Epstein & Axtell's growback G1 and movement M, on the columnar path.

The landscape is a 50x50 torus with two sugar peaks (capacities 0-4, built by
:func:`two_peaks`: concentric bands around the peaks at (35, 15) and
(15, 35)); every cell starts full. One step:

1. the living agents take turns in a random order (``ctx.rng("move")``);
   at its turn an agent looks from its cell along the four lattice
   directions, up to ``vision`` cells, on the torus; among its own cell and
   the free cells it sees, it picks those with the most sugar, then the
   nearest of them, then one at random; it moves there, harvests all of the
   sugar, pays its ``metabolism`` and dies when its sugar is zero or below
   (its cell is free for the agents after it);
2. every cell grows back one unit, up to its capacity (G1, ``growback``).

Dead agents stay in the population: the panel keeps exactly one row per
agent per step, and a dead agent's rows say ``alive: false`` (with its last
cell and sugar); the row of the step it died in holds the move it died
after, the later rows no action.

The columnar split: ``Landscape.observe_columns`` hands each agent its traits
and position plus the shared sugar and occupancy grids;
``MovementM.decide_columns`` plays the turns on its own copy of the grids
(each agent sees the world as the agents before it left it) and returns
every living agent's destination and turn; ``Landscape.apply_columns``
replays the turns on the real grids and refuses a destination already taken.
"""
from __future__ import annotations

import numpy as np

from desim import (ActionColumns, DecisionModel, EnvironmentProvider, MetricCollector, Persona, PopulationProvider,
                   StudyConfigError)

SIZE = 50
PEAKS = ((35, 15), (15, 35))
# distance from the nearest peak below which capacity is 4, 3, 2, 1. Epstein & Axtell ship their map
# as a picture; these radii were chosen so that this generated map carries the population the book
# reports (about 224-230 agents under G1 + M), with about 4,600 units of capacity in all.
BANDS = (6.25, 11.25, 16.25, 21.25)


def two_peaks(size: int = SIZE) -> np.ndarray:
    """Sugar capacity per cell ``[y, x]``: 4 near a peak, falling by one per band, 0 far away."""
    y, x = np.mgrid[0:size, 0:size]
    dist = np.min([np.hypot(x - px, y - py) for px, py in PEAKS], axis=0)
    capacity = np.zeros((size, size), np.int64)
    for level, radius in zip((4, 3, 2, 1), BANDS):
        capacity[(capacity == 0) & (dist < radius)] = level
    return capacity


class Turns:
    """The bookkeeping of one agent's turn, shared by the decision (on a copy) and the environment.

    ``free`` and ``sugar`` are flat Python lists over the cells (fast to
    index one cell at a time).
    """

    def __init__(self, free: list[bool], sugar: list[int]):
        self.free, self.sugar = free, sugar

    def take(self, src: int, dest: int, wealth: int, metabolism: int) -> int:
        """Move from ``src`` to ``dest``, harvest, pay; a dead agent leaves its cell free. Returns the new wealth."""
        self.free[src] = True
        wealth += self.sugar[dest] - metabolism
        self.sugar[dest] = 0
        self.free[dest] = wealth <= 0
        return wealth


class Foragers(PopulationProvider):
    """``n`` agents on distinct random cells with vision U{1..max_vision}, metabolism U{1..max_metabolism}
    and initial sugar U{min_sugar..max_sugar}."""

    def __init__(self, n: int = 400, max_vision: int = 6, max_metabolism: int = 4, min_sugar: int = 5,
                 max_sugar: int = 25):
        self.n = int(n)
        self.max_vision, self.max_metabolism = int(max_vision), int(max_metabolism)
        self.min_sugar, self.max_sugar = int(min_sugar), int(max_sugar)
        problems = [(name, message) for name, ok, message in [
            ("n_agents", 0 < self.n <= SIZE * SIZE, f"must be in 1..{SIZE * SIZE} (got {self.n})"),
            ("max_vision", self.max_vision >= 1, f"must be at least 1 (got {self.max_vision})"),
            ("max_metabolism", self.max_metabolism >= 1, f"must be at least 1 (got {self.max_metabolism})"),
            ("min_sugar", 0 < self.min_sugar <= self.max_sugar,
             f"need 0 < min_sugar <= max_sugar (got {self.min_sugar}, {self.max_sugar})")] if not ok]
        if problems:
            raise StudyConfigError("simulation/simulation.json",
                                   [(f"parameters.{name}", f"sugarscape: {message}") for name, message in problems])

    def personas(self, rng):
        cells = rng.choice(SIZE * SIZE, self.n, replace=False)
        vision = rng.integers(1, self.max_vision + 1, self.n)
        metabolism = rng.integers(1, self.max_metabolism + 1, self.n)
        sugar = rng.integers(self.min_sugar, self.max_sugar + 1, self.n)
        digits = len(str(self.n - 1))
        return [Persona(agent_id=f"f{i:0{digits}d}",
                        attributes={"x": int(c % SIZE), "y": int(c // SIZE), "vision": int(v),
                                    "metabolism": int(m), "sugar": int(s)})
                for i, (c, v, m, s) in enumerate(zip(cells, vision, metabolism, sugar))]


class Landscape(EnvironmentProvider):
    """Sugar and capacity per cell, and the agents' positions, traits, sugar and life, as numpy arrays."""

    def __init__(self, growback: int = 1):
        self.growback = int(growback)

    def reset(self, seed):
        attrs = [p.attributes for p in self.ctx.personas]
        col = {k: np.array([a[k] for a in attrs], np.int64) for k in ("x", "y", "vision", "metabolism", "sugar")}
        self.x, self.y, self.vision, self.metabolism = col["x"], col["y"], col["vision"], col["metabolism"]
        self.wealth = col["sugar"]
        self.alive = np.ones(len(attrs), bool)
        self.capacity = two_peaks()
        self.sugar = self.capacity.copy()
        self.occupant = np.full((SIZE, SIZE), -1, np.int64)
        self.occupant[self.y, self.x] = np.arange(len(attrs))

    def observe_columns(self, idx, t, round_idx):
        return {"x": self.x[idx], "y": self.y[idx], "vision": self.vision[idx],
                "metabolism": self.metabolism[idx], "wealth": self.wealth[idx], "alive": self.alive[idx],
                "sugar": self.sugar, "occupant": self.occupant}

    def apply_columns(self, idx, actions):
        acted = np.ones(len(idx), bool) if actions.acted is None else np.asarray(actions.acted, bool)
        turn = np.asarray(actions.payload["turn"])
        to = np.asarray(actions.payload["to_y"]) * SIZE + np.asarray(actions.payload["to_x"])
        turns = Turns((self.occupant.ravel() < 0).tolist(), self.sugar.ravel().tolist())
        for k in np.flatnonzero(acted)[np.argsort(turn[acted], kind="stable")].tolist():
            a, dest = int(idx[k]), int(to[k])
            src = int(self.y[a] * SIZE + self.x[a])
            if not self.alive[a]:
                raise ValueError(f"sugarscape: dead agent {self.ctx.agent_ids[a]} was given a move")
            if dest != src and not turns.free[dest]:
                raise ValueError(f"sugarscape: agent {self.ctx.agent_ids[a]} moves to taken cell "
                                 f"x={dest % SIZE}, y={dest // SIZE}")
            self.wealth[a] = turns.take(src, dest, int(self.wealth[a]), int(self.metabolism[a]))
            self.x[a], self.y[a] = dest % SIZE, dest // SIZE
            self.alive[a] = self.wealth[a] > 0
        sugar = np.array(turns.sugar, np.int64).reshape(SIZE, SIZE)
        self.sugar = np.minimum(sugar + self.growback, self.capacity)
        self.occupant = np.full((SIZE, SIZE), -1, np.int64)
        living = np.flatnonzero(self.alive)
        self.occupant[self.y[living], self.x[living]] = living

    def state_columns(self):
        return {"x": self.x, "y": self.y, "sugar": self.wealth, "alive": self.alive,
                "vision": self.vision, "metabolism": self.metabolism}


class MovementM(DecisionModel):
    """Rule M, played turn by turn so each agent sees the cells the agents before it took or emptied."""

    def decide_columns(self, obs, idx, t, round_idx):
        rng = self.ctx.rng("move")
        living = np.flatnonzero(obs["alive"])
        order = rng.permutation(living).tolist()
        tie = rng.random(len(order)).tolist()
        x, y = obs["x"].tolist(), obs["y"].tolist()
        vision, metabolism, wealth = obs["vision"].tolist(), obs["metabolism"].tolist(), obs["wealth"].tolist()
        turns = Turns((obs["occupant"].ravel() < 0).tolist(), obs["sugar"].ravel().tolist())
        to_x, to_y, turn = list(x), list(y), [-1] * len(x)
        for k, i in enumerate(order):
            src = y[i] * SIZE + x[i]
            dest = self._look(x[i], y[i], vision[i], turns, tie[k])
            turns.take(src, dest, wealth[i], metabolism[i])
            to_x[i], to_y[i], turn[i] = dest % SIZE, dest // SIZE, k
        moved = (np.array(to_x) != obs["x"]) | (np.array(to_y) != obs["y"])
        return ActionColumns(kind=np.where(moved, "move", "stay"), acted=np.asarray(obs["alive"], bool),
                             payload={"to_x": np.array(to_x, np.int64), "to_y": np.array(to_y, np.int64),
                                      "turn": np.array(turn, np.int64)})

    @staticmethod
    def _look(x: int, y: int, vision: int, turns: Turns, u: float) -> int:
        """The cell rule M picks: most sugar, then nearest, then the ``u``-th of the ties."""
        sugar, free = turns.sugar, turns.free
        here = y * SIZE + x
        best, best_d, ties = sugar[here], 0, [here]
        for d in range(1, vision + 1):
            for cell in (((y + d) % SIZE) * SIZE + x, ((y - d) % SIZE) * SIZE + x,
                         y * SIZE + (x + d) % SIZE, y * SIZE + (x - d) % SIZE):
                if not free[cell]:
                    continue
                s = sugar[cell]
                if s > best:
                    best, best_d, ties = s, d, [cell]
                elif s == best and d == best_d:
                    ties.append(cell)
        return ties[int(u * len(ties))]


class SugarMetrics(MetricCollector):
    """Population, the survivors' mean vision and metabolism, and the Gini coefficient of their sugar."""

    def collect(self, t, environment, actions):
        alive = environment.alive
        wealth = np.sort(environment.wealth[alive]).astype(np.float64)
        n = len(wealth)
        gini = (2.0 * np.sum(np.arange(1, n + 1) * wealth) / (n * wealth.sum()) - (n + 1) / n
                if n and wealth.sum() > 0 else 0.0)
        return {"population": float(n),
                "mean_vision": float(environment.vision[alive].mean()) if n else 0.0,
                "mean_metabolism": float(environment.metabolism[alive].mean()) if n else 0.0,
                "gini": float(gini)}
