"""schelling: residential segregation from mild preferences (Schelling 1971), on the columnar path.

The world is a ``width`` x ``height`` grid, bounded by default (as Mesa's example)
or a torus with ``torus``,
with at most one agent per cell. An agent's neighbourhood is the Moore
neighbourhood (the 8 surrounding cells). An agent is *happy* when at least
``homophily`` of its occupied neighbour cells hold its own type.

Update order of one step (rule ``classic``, the rule set of Mesa's Schelling
example and of most textbook replications):

1. every agent's happiness is evaluated on the grid as it stands at the start
   of the step (an agent with no neighbours at all is unhappy: it has no
   similar neighbour);
2. the unhappy agents move one at a time, in an order drawn from the step's
   ``move`` stream (``ctx.rng("move")``), each to a uniformly random cell
   among those empty at its turn (cells vacated earlier in the step count,
   its own cell does not);
3. happiness is evaluated again for the panel and the metrics.

Rule ``netlogo`` follows NetLogo's Segregation model instead: the same
unhappy-at-the-start set and random order, but each mover turns to a random
heading and walks a random distance in ``[0, max_jump)``, again and again
from where it stands until it lands on a free cell (or back on its own), on
the torus; an agent with no neighbours counts as happy (``0 >= 0``).

The columnar split: ``Grid.observe_columns`` hands each agent its position
and neighbour counts plus the shared grid; ``Relocation.decide_columns``
applies the rule, walking the movers in their turn order on its own copy of
the free cells, and returns the movers' destinations (kind ``move``; the agents that stay
take no action); ``Grid.apply_columns``
commits the moves and refuses any two agents ending on one cell.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from desim import (ActionColumns, DecisionModel, EnvironmentProvider, MetricCollector, Persona, PopulationProvider,
                   bad_parameter, check_parameters)

RULES = ("classic", "netlogo")
EMPTY = -1


def of_kind(numbers_: dict | None = None, whole: dict | None = None, flags: dict | None = None) -> None:
    """Refuse, naming each parameter, a value of the wrong kind before it is converted: ``float("0.3")`` and
    ``bool("false")`` would run (the second as true) with what the user did not write, and
    ``int(50.5)`` would cut a grid side short. ``numbers_`` must be numbers, ``whole`` whole numbers, ``flags``
    true or false; JSON numbers and booleans pass as before."""
    def number(v):
        return isinstance(v, numbers.Real) and not isinstance(v, bool)
    check_parameters("schelling", [
        *[(name, number(v), f"must be a number (got {type(v).__name__} {v!r})") for name, v in (numbers_ or {}).items()],
        *[(name, number(v) and float(v).is_integer(), f"must be a whole number (got {type(v).__name__} {v!r})")
          for name, v in (whole or {}).items()],
        *[(name, isinstance(v, bool), f"must be true or false (got {type(v).__name__} {v!r})")
          for name, v in (flags or {}).items()]])


def is_happy(same: np.ndarray, occupied: np.ndarray, homophily: float, rule: str) -> np.ndarray:
    """Happy when ``same / occupied >= homophily``; agents with no neighbour per ``rule``.

    Compared as ``same >= homophily * occupied`` with a tiny slack, so that
    3 similar of 10 satisfies ``homophily = 0.3`` despite binary floats.
    """
    ok = same >= homophily * occupied - 1e-9
    if rule == "classic":
        ok &= occupied > 0
    return ok


def neighbour_counts(grid: np.ndarray, torus: bool) -> tuple[np.ndarray, np.ndarray]:
    """For every cell: how many of its 8 neighbours are occupied, and how many hold type 1."""
    occupied = (grid >= 0).astype(np.int8)
    ones = (grid == 1).astype(np.int8)
    mode = {"mode": "wrap"} if torus else {"mode": "constant", "constant_values": 0}
    po, p1 = np.pad(occupied, 1, **mode), np.pad(ones, 1, **mode)
    h, w = grid.shape
    n_occ = np.zeros((h, w), np.int8)
    n_one = np.zeros((h, w), np.int8)
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            if dy == 1 and dx == 1:
                continue
            n_occ += po[dy:dy + h, dx:dx + w]
            n_one += p1[dy:dy + h, dx:dx + w]
    return n_occ, n_one


class Residents(PopulationProvider):
    """``round(density * cells)`` agents on distinct random cells; ``round(minority_share * n)`` of type 1."""

    def __init__(self, width: int = 50, height: int = 50, density: float = 0.8, minority_share: float = 0.5):
        of_kind({"density": density, "minority_share": minority_share}, {"width": width, "height": height})
        self.width, self.height = int(width), int(height)
        self.density, self.minority_share = float(density), float(minority_share)
        cells = self.width * self.height
        if self.width < 3 or self.height < 3:
            raise bad_parameter("schelling", "width", f"the grid must be at least 3x3 (got {self.width}x{self.height})")
        if not 0 < round(self.density * cells) < cells:
            raise bad_parameter("schelling", "density", f"density {self.density} leaves no agent or no empty cell "
                                           f"on a {self.width}x{self.height} grid")
        if not 0.0 <= self.minority_share <= 1.0:
            raise bad_parameter("schelling", "minority_share", f"must be in [0, 1] (got {self.minority_share})")

    def personas(self, rng):
        cells = self.width * self.height
        n = round(self.density * cells)
        where = rng.choice(cells, n, replace=False)
        kind = np.zeros(n, np.int64)
        kind[rng.choice(n, round(self.minority_share * n), replace=False)] = 1
        xs, ys = (where % self.width).tolist(), (where // self.width).tolist()
        digits = max(6, len(str(n - 1)))
        return [Persona(agent_id=f"s{i:0{digits}d}", attributes={"type": k, "x": x, "y": y})
                for i, (k, x, y) in enumerate(zip(kind.tolist(), xs, ys))]


class Grid(EnvironmentProvider):
    """The grid (``EMPTY`` or the occupant's type per cell) and the agents' positions, as numpy arrays."""

    def __init__(self, width: int = 50, height: int = 50, torus: bool = False, homophily: float = 0.4,
                 rule: str = "classic"):
        of_kind({"homophily": homophily}, {"width": width, "height": height}, {"torus": torus})
        self.width, self.height, self.torus = int(width), int(height), bool(torus)
        self.homophily, self.rule = float(homophily), str(rule)
        if self.rule not in RULES:
            raise bad_parameter("schelling", "rule", f"rule must be one of {RULES} (got '{self.rule}')")
        if self.rule == "netlogo" and not self.torus:
            raise bad_parameter("schelling", "torus", "rule 'netlogo' walks on a torus; set torus=true")

    def reset(self, seed):
        attrs = [p.attributes for p in self.ctx.personas]
        self.x = np.fromiter((a["x"] for a in attrs), np.int32, len(attrs))
        self.y = np.fromiter((a["y"] for a in attrs), np.int32, len(attrs))
        self.type = np.fromiter((a["type"] for a in attrs), np.int8, len(attrs))
        self.moves = 0
        self._rebuild()

    def _rebuild(self) -> None:
        """Place everyone on a fresh grid and recount neighbours; two agents on one cell is an error."""
        flat = self.y.astype(np.int64) * self.width + self.x
        counts = np.bincount(flat, minlength=self.width * self.height)
        if counts.max(initial=0) > 1:
            cell = int(np.flatnonzero(counts > 1)[0])
            who = [self.ctx.agent_ids[i] for i in np.flatnonzero(flat == cell)]
            raise ValueError(f"schelling: agents {who} share cell x={cell % self.width}, y={cell // self.width}")
        grid = np.full(self.width * self.height, EMPTY, np.int8)
        grid[flat] = self.type
        self.grid = grid.reshape(self.height, self.width)
        n_occ, n_one = neighbour_counts(self.grid, self.torus)
        self.occupied = n_occ[self.y, self.x]
        ones = n_one[self.y, self.x]
        self.same = np.where(self.type == 1, ones, self.occupied - ones)

    def happy(self) -> np.ndarray:
        return is_happy(self.same, self.occupied, self.homophily, self.rule)

    def observe_columns(self, idx, t, round_idx):
        return {"x": self.x[idx], "y": self.y[idx], "same": self.same[idx],
                "occupied": self.occupied[idx], "grid": self.grid}

    def apply_columns(self, idx, actions):
        moving = np.ones(len(idx), bool) if actions.acted is None else np.asarray(actions.acted, bool)
        who = idx[moving]
        to_x = np.asarray(actions.payload["to_x"])[moving]
        to_y = np.asarray(actions.payload["to_y"])[moving]
        outside = (to_x < 0) | (to_x >= self.width) | (to_y < 0) | (to_y >= self.height)
        if outside.any():
            k = int(np.flatnonzero(outside)[0])
            raise ValueError(f"schelling: agent {self.ctx.agent_ids[who[k]]} moves off the grid "
                             f"to x={to_x[k]}, y={to_y[k]}")
        self.x[who], self.y[who] = to_x, to_y
        self.moves = int(len(who))
        self._rebuild()

    def state_columns(self):
        return {"x": self.x, "y": self.y, "type": self.type, "happy": self.happy()}


class Relocation(DecisionModel):
    """Schelling's rule: the unhappy move, one at a time in a seeded random order."""

    def __init__(self, homophily: float = 0.4, rule: str = "classic", max_jump: float = 10.0):
        of_kind({"homophily": homophily, "max_jump": max_jump})
        self.homophily, self.rule, self.max_jump = float(homophily), str(rule), float(max_jump)
        if not 0.0 <= self.homophily <= 1.0:
            raise bad_parameter("schelling", "homophily", f"must be in [0, 1] (got {self.homophily})")
        if self.rule not in RULES:
            raise bad_parameter("schelling", "rule", f"rule must be one of {RULES} (got '{self.rule}')")
        if not 0.0 < self.max_jump < math.inf:   # a jump is drawn from [0, max_jump)
            raise bad_parameter("schelling", "max_jump", f"must be a number above 0 (got {self.max_jump:g})")

    def decide_columns(self, obs, idx, t, round_idx):
        grid = obs["grid"]
        height, width = grid.shape
        x, y = obs["x"].astype(np.int64), obs["y"].astype(np.int64)
        unhappy = np.flatnonzero(~is_happy(obs["same"], obs["occupied"], self.homophily, self.rule))
        rng = self.ctx.rng("move")
        order = rng.permutation(unhappy)
        src = (y * width + x)[order].tolist()
        if self.rule == "classic":
            dest = self._random_empty(grid, src, rng)
        else:
            dest = self._local_jumps(grid, src, rng)
        to = y * width + x
        to[order] = dest
        to_x, to_y = to % width, to // width
        # only movers act: a panel row of an agent that stayed carries no action, which keeps the
        # step's JSON small once the grid has settled
        moved = (to_x != x) | (to_y != y)
        return ActionColumns(kind="move", acted=moved,
                             payload={"to_x": to_x.astype(np.int32), "to_y": to_y.astype(np.int32)})

    @staticmethod
    def _random_empty(grid: np.ndarray, src: list[int], rng) -> list[int]:
        """Each mover in turn takes a uniformly random free cell; its own cell becomes free.

        The number of free cells never changes, so every turn's draw is known
        up front: turn k takes ``pool[floor(u_k * free)]`` and leaves its old
        cell in that slot.
        """
        pool = np.flatnonzero(grid.ravel() == EMPTY).tolist()
        picks = (rng.random(len(src)) * len(pool)).astype(np.int64).tolist()
        dest = []
        for s, j in zip(src, picks):
            dest.append(pool[j])
            pool[j] = s
        return dest

    def _local_jumps(self, grid: np.ndarray, src: list[int], rng) -> list[int]:
        """NetLogo's ``find-new-spot``: turn a random heading, walk ``[0, max_jump)``, repeat until free."""
        height, width = grid.shape
        free = bytearray((grid.ravel() == EMPTY).tobytes())
        dest = []
        for s in src:
            px, py = float(s % width), float(s // width)
            while True:
                u_heading, u_dist = rng.random(2).tolist()
                heading, dist = u_heading * 2 * math.pi, u_dist * self.max_jump
                px, py = px + dist * math.sin(heading), py + dist * math.cos(heading)
                cell = (math.floor(py + 0.5) % height) * width + math.floor(px + 0.5) % width
                if cell == s or free[cell]:
                    break
            free[s], free[cell] = 1, 0
            dest.append(cell)
        return dest


class SegregationMetrics(MetricCollector):
    """Per step: share happy, mean same-type share, NetLogo's %-similar, share fully segregated, moves.

    ``mean_same_share`` averages ``same / occupied`` over the agents with at
    least one neighbour; ``pct_similar`` is NetLogo's ratio of sums
    ``100 * sum(same) / sum(occupied)``; ``share_fully_segregated`` is the
    share of agents with at least one neighbour whose neighbours are all of
    their own type.
    """

    def collect(self, t, environment, actions):
        same, occ = environment.same.astype(np.float64), environment.occupied.astype(np.float64)
        has = occ > 0
        return {"share_happy": float(environment.happy().mean()),
                "mean_same_share": float((same[has] / occ[has]).mean()) if has.any() else 0.0,
                "pct_similar": 100.0 * float(same.sum() / occ.sum()) if occ.sum() else 0.0,
                "share_fully_segregated": float((same[has] == occ[has]).mean()) if has.any() else 0.0,
                "moves": environment.moves if actions is not None else 0}
