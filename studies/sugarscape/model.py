"""sugarscape: Epstein & Axtell's growback G1 and movement M, on the columnar path.

The landscape is Epstein & Axtell's sugar map (``sugar-map.txt`` in this
folder: 50x50 capacities 0-4 with two off-centre plateaus, the file NetLogo's
and Mesa's Sugarscape models read), on a torus; every cell starts full. The
``map`` parameter names another whitespace-separated grid of capacities (any
width and height), or ``two_peaks`` for a generated map (:func:`two_peaks`).
Row ``r`` of the file is ``y = r``, column ``c`` is ``x = c``. One step:

1. the living agents take turns in a random order (``ctx.rng("move")``);
   at its turn an agent looks from its cell along the four lattice
   directions, up to ``vision`` cells, on the torus; among its own cell and
   the free cells it sees, it picks those with the most sugar, then the
   nearest of them, then one at random; it moves there, harvests all of the
   sugar, pays its ``metabolism`` and dies when its sugar is zero or below
   (its cell is free for the agents after it);
2. every cell grows back ``growback`` units, up to its capacity (G1).

Dead agents stay in the population: the panel keeps exactly one row per
agent per step, and a dead agent's rows say ``alive: false`` (with its last
cell and sugar); the row of the step it died in holds the move it died
after, the later rows no action. The sugar left on every cell is not a panel
column, but it follows from the panel: :meth:`Landscape.grid_layer` replays
the harvests (the cells the living agents stood on after each step) on the
map, which is how ``desim viz grid`` and the report draw it.

The columnar split: ``Landscape.observe_columns`` hands each agent its traits
and position plus the shared sugar and occupancy grids;
``MovementM.decide_columns`` plays the turns on its own copy of the grids
(each agent sees the world as the agents before it left it) and returns
every living agent's destination and turn; ``Landscape.apply_columns``
replays the turns on the real grids and refuses a destination already taken.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from desim import (ActionColumns, DecisionModel, EnvironmentProvider, MetricCollector, Persona, PopulationProvider,
                   bad_parameter, check_parameters)

HERE = Path(__file__).resolve().parent
CANONICAL_MAP = "sugar-map.txt"
GENERATED_MAP = "two_peaks"


def two_peaks(size: int = 50) -> np.ndarray:
    """A generated capacity map ``[y, x]``: two peaks of 4 at (0.7, 0.3) and (0.3, 0.7) of the side,
    one unit less every ``size / 10`` cells of distance from the nearer peak, 0 beyond.

    Round numbers, not fitted to any figure: a stand-in for trying a landscape
    of a different size or shape, never the reference (that is ``sugar-map.txt``).
    """
    y, x = np.mgrid[0:size, 0:size]
    peaks = ((0.7 * size, 0.3 * size), (0.3 * size, 0.7 * size))
    dist = np.min([np.hypot(x - px, y - py) for px, py in peaks], axis=0)
    return np.clip(4 - np.floor(dist / (size / 10)), 0, 4).astype(np.int64)


def load_map(name: str) -> np.ndarray:
    """The capacity grid ``[y, x]`` named by the ``map`` parameter: a file (relative to this study's
    folder, or absolute) of non-negative integers separated by spaces, one row per line, or
    ``two_peaks``."""
    name = str(name)
    if name == GENERATED_MAP:
        return two_peaks()
    path = Path(name) if Path(name).is_absolute() else HERE / name
    if not path.is_file():
        raise bad_parameter("sugarscape", "map", f"no map file {path} (give a file in the study folder, or '{GENERATED_MAP}')")
    try:
        capacity = np.loadtxt(path, dtype=np.float64, ndmin=2)
    except ValueError as e:
        raise bad_parameter("sugarscape", "map", f"{path}: not a grid of numbers ({e})") from None
    if capacity.size == 0 or (capacity < 0).any() or (capacity != np.round(capacity)).any():
        raise bad_parameter("sugarscape", "map", f"{path}: capacities must be non-negative integers")
    return capacity.astype(np.int64)


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
    """``n`` agents on distinct random cells of the map with vision U{min_vision..max_vision},
    metabolism U{min_metabolism..max_metabolism} and initial sugar U{min_sugar..max_sugar}."""

    def __init__(self, n: int = 400, map: str = CANONICAL_MAP, min_vision: int = 1, max_vision: int = 6,
                 min_metabolism: int = 1, max_metabolism: int = 4, min_sugar: int = 5, max_sugar: int = 25):
        self.n = int(n)
        self.height, self.width = load_map(map).shape
        self.vision = (int(min_vision), int(max_vision))
        self.metabolism = (int(min_metabolism), int(max_metabolism))
        self.sugar = (int(min_sugar), int(max_sugar))
        cells = self.width * self.height
        checks = [("n_agents", 0 < self.n <= cells, f"must be in 1..{cells}, the cells of the map (got {self.n})"),
                  ("min_vision", 1 <= self.vision[0] <= self.vision[1],
                   f"need 1 <= min_vision <= max_vision (got {self.vision[0]}, {self.vision[1]})"),
                  ("min_metabolism", 0 <= self.metabolism[0] <= self.metabolism[1],
                   f"need 0 <= min_metabolism <= max_metabolism (got {self.metabolism[0]}, {self.metabolism[1]})"),
                  ("min_sugar", 0 < self.sugar[0] <= self.sugar[1],
                   f"need 0 < min_sugar <= max_sugar (got {self.sugar[0]}, {self.sugar[1]})")]
        check_parameters("sugarscape", checks)

    def personas(self, rng):
        cells = rng.choice(self.width * self.height, self.n, replace=False)
        vision = rng.integers(self.vision[0], self.vision[1] + 1, self.n)
        metabolism = rng.integers(self.metabolism[0], self.metabolism[1] + 1, self.n)
        sugar = rng.integers(self.sugar[0], self.sugar[1] + 1, self.n)
        digits = len(str(self.n - 1))
        return [Persona(agent_id=f"f{i:0{digits}d}",
                        attributes={"x": int(c % self.width), "y": int(c // self.width), "vision": int(v),
                                    "metabolism": int(m), "sugar": int(s)})
                for i, (c, v, m, s) in enumerate(zip(cells, vision, metabolism, sugar))]


class Landscape(EnvironmentProvider):
    """Sugar and capacity per cell, and the agents' positions, traits, sugar and life, as numpy arrays."""

    def __init__(self, map: str = CANONICAL_MAP, growback: int = 1):
        self.capacity = load_map(map)
        self.growback = int(growback)
        if self.growback < 0:
            raise bad_parameter("sugarscape", "growback", f"must be 0 or more (got {self.growback})")

    def reset(self, seed):
        attrs = [p.attributes for p in self.ctx.personas]
        col = {k: np.array([a[k] for a in attrs], np.int64) for k in ("x", "y", "vision", "metabolism", "sugar")}
        self.x, self.y, self.vision, self.metabolism = col["x"], col["y"], col["vision"], col["metabolism"]
        self.wealth = col["sugar"]
        self.alive = np.ones(len(attrs), bool)
        self.height, self.width = self.capacity.shape
        self.sugar = self.capacity.copy()
        self.occupant = np.full(self.capacity.shape, -1, np.int64)
        self.occupant[self.y, self.x] = np.arange(len(attrs))

    def observe_columns(self, idx, t, round_idx):
        return {"x": self.x[idx], "y": self.y[idx], "vision": self.vision[idx],
                "metabolism": self.metabolism[idx], "wealth": self.wealth[idx], "alive": self.alive[idx],
                "sugar": self.sugar, "occupant": self.occupant}

    def apply_columns(self, idx, actions):
        w = self.width
        acted = np.ones(len(idx), bool) if actions.acted is None else np.asarray(actions.acted, bool)
        turn = np.asarray(actions.payload["turn"])
        to = np.asarray(actions.payload["to_y"]) * w + np.asarray(actions.payload["to_x"])
        turns = Turns((self.occupant.ravel() < 0).tolist(), self.sugar.ravel().tolist())
        for k in np.flatnonzero(acted)[np.argsort(turn[acted], kind="stable")].tolist():
            a, dest = int(idx[k]), int(to[k])
            src = int(self.y[a] * w + self.x[a])
            if not self.alive[a]:
                raise ValueError(f"sugarscape: dead agent {self.ctx.agent_ids[a]} was given a move")
            if dest != src and not turns.free[dest]:
                raise ValueError(f"sugarscape: agent {self.ctx.agent_ids[a]} moves to taken cell "
                                 f"x={dest % w}, y={dest // w}")
            self.wealth[a] = turns.take(src, dest, int(self.wealth[a]), int(self.metabolism[a]))
            self.x[a], self.y[a] = dest % w, dest // w
            self.alive[a] = self.wealth[a] > 0
        sugar = np.array(turns.sugar, np.int64).reshape(self.capacity.shape)
        self.sugar = np.minimum(sugar + self.growback, self.capacity)
        self.occupant = np.full(self.capacity.shape, -1, np.int64)
        living = np.flatnonzero(self.alive)
        self.occupant[self.y[living], self.x[living]] = living

    def state_columns(self):
        return {"x": self.x, "y": self.y, "sugar": self.wealth, "alive": self.alive,
                "vision": self.vision, "metabolism": self.metabolism}

    @staticmethod
    def grid_layer(read, parameters: dict) -> tuple[str, list[int], np.ndarray]:
        """The sugar left on every cell after every stored step, replayed from the panel.

        ``read(field)`` returns ``(steps, values)`` with one row per step (step
        0 the initial state) and one column per agent. Every agent alive after
        step ``s - 1`` harvested the cell it stands on after step ``s`` (moving
        or staying, dying or not), then every cell grew back: exactly
        ``apply_columns``. Returns ``("sugar left", steps, sugar[step, y, x])``
        on the run's map (a ``desim viz grid`` and report layer).
        """
        capacity = load_map(parameters.get("map", CANONICAL_MAP))
        growback = int(parameters.get("growback", 1))
        steps, x = read("x")
        _, y = read("y")
        _, alive = read("alive")
        x, y, alive = np.asarray(x, np.int64), np.asarray(y, np.int64), np.asarray(alive, bool)
        out = np.empty((len(steps),) + capacity.shape, np.int64)
        sugar = capacity.copy()
        out[0] = sugar
        for k in range(1, len(steps)):
            harvest = alive[k - 1]
            sugar[y[k, harvest], x[k, harvest]] = 0
            sugar = np.minimum(sugar + growback, capacity)
            out[k] = sugar
        return "sugar left", list(steps), out


class MovementM(DecisionModel):
    """Rule M, played turn by turn so each agent sees the cells the agents before it took or emptied."""

    def decide_columns(self, obs, idx, t, round_idx):
        rng = self.ctx.rng("move")
        height, width = obs["sugar"].shape
        living = np.flatnonzero(obs["alive"])
        order = rng.permutation(living).tolist()
        tie = rng.random(len(order)).tolist()
        x, y = obs["x"].tolist(), obs["y"].tolist()
        vision, metabolism, wealth = obs["vision"].tolist(), obs["metabolism"].tolist(), obs["wealth"].tolist()
        turns = Turns((obs["occupant"].ravel() < 0).tolist(), obs["sugar"].ravel().tolist())
        to_x, to_y, turn = list(x), list(y), [-1] * len(x)
        for k, i in enumerate(order):
            src = y[i] * width + x[i]
            dest = self._look(x[i], y[i], vision[i], width, height, turns, tie[k])
            turns.take(src, dest, wealth[i], metabolism[i])
            to_x[i], to_y[i], turn[i] = dest % width, dest // width, k
        moved = (np.array(to_x) != obs["x"]) | (np.array(to_y) != obs["y"])
        return ActionColumns(kind=np.where(moved, "move", "stay"), acted=np.asarray(obs["alive"], bool),
                             payload={"to_x": np.array(to_x, np.int64), "to_y": np.array(to_y, np.int64),
                                      "turn": np.array(turn, np.int64)})

    @staticmethod
    def _look(x: int, y: int, vision: int, width: int, height: int, turns: Turns, u: float) -> int:
        """The cell rule M picks: most sugar, then nearest, then the ``u``-th of the ties.

        A vision as long as the torus sees a cell twice; it counts once among the ties.
        """
        sugar, free = turns.sugar, turns.free
        here = y * width + x
        best, best_d, ties = sugar[here], 0, [here]
        for d in range(1, vision + 1):
            for cell in (((y + d) % height) * width + x, ((y - d) % height) * width + x,
                         y * width + (x + d) % width, y * width + (x - d) % width):
                if not free[cell]:
                    continue
                s = sugar[cell]
                if s > best:
                    best, best_d, ties = s, d, [cell]
                elif s == best and d == best_d and cell not in ties:
                    ties.append(cell)
        return ties[int(u * len(ties))]


class SugarMetrics(MetricCollector):
    """Population, sugar left on the landscape, the survivors' mean vision and metabolism, and the Gini
    coefficient of their sugar."""

    def collect(self, t, environment, actions):
        alive = environment.alive
        wealth = np.sort(environment.wealth[alive]).astype(np.float64)
        n = len(wealth)
        gini = (2.0 * np.sum(np.arange(1, n + 1) * wealth) / (n * wealth.sum()) - (n + 1) / n
                if n and wealth.sum() > 0 else 0.0)
        return {"population": float(n), "sugar_left": float(environment.sugar.sum()),
                "mean_vision": float(environment.vision[alive].mean()) if n else 0.0,
                "mean_metabolism": float(environment.metabolism[alive].mean()) if n else 0.0,
                "gini": float(gini)}
