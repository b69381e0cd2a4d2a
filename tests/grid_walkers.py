"""A tiny positioned study, 'walkers', whose environment draws a grid layer (``grid_layer``) from a data file
beside its ``model.py`` (``weights.txt``), for the tests that edit the code or the data between runs and check
that each run's layer is drawn with its own version's code and data.

``walkers_model(layer)`` is the ``model.py`` text with its first line ``layer``, a line setting
``LAYER = (name, mirrored, scale)``: a test edits that line to make a new version. Nothing here keeps state.
"""
from __future__ import annotations

from pathlib import Path

from tiny_study import write_tiny_study

WIDTH, HEIGHT = 8, 6
AGENTS = 4


def walkers_model(layer: str) -> str:
    """The ``model.py`` text: agents walking right on the 8 x 6 grid, the layer as ``layer`` says."""
    return '''
from pathlib import Path

import numpy as np

from desim import Action, DecisionModel, EnvironmentProvider, Observation

''' + layer + '''      # the layer's name, whether it is mirrored left to right, its scale


class Env(EnvironmentProvider):
    """Agent i starts on cell (i, i) and walks one cell to the right each step, on a grid 8 cells wide."""

    def reset(self, seed):
        self.cell = {a: (i, i) for i, a in enumerate(self.ctx.agent_ids)}

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, round_idx=round_idx) for a in ids]

    def apply(self, actions):
        for a in actions:
            x, y = self.cell[a.agent_id]
            self.cell[a.agent_id] = ((x + 1) % 8, y)

    def agent_state(self, agent_id):
        x, y = self.cell[agent_id]
        return {"x": x, "y": y, "kind": "walker"}

    @staticmethod
    def grid_layer(read, parameters):
        """weights.txt (rows are y, columns x), mirrored and scaled as LAYER says, plus the step."""
        name, mirrored, scale = LAYER
        steps, _ = read("x")
        base = np.loadtxt(Path(__file__).with_name("weights.txt"))
        if mirrored:
            base = base[:, ::-1]
        return name, steps, np.array([scale * base + step for step in steps])


class Decide(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="move") for o in observations]
'''


def write_walkers(root: Path, model: str, steps: int, study: dict | None = None) -> Path:
    """The study folder ``root``: ``model`` as its model.py, ``AGENTS`` agents, ``steps`` steps (no weights.txt
    yet: see ``write_weights``)."""
    return write_tiny_study(root, model, {"n_steps": steps, "decision": {"ref": "model:Decide"}}, agents=AGENTS,
                            study=study)


def weights(of) -> list[list[int]]:
    """A weights.txt's rows (y) of cells (x), each ``of(x, y)``."""
    return [[of(x, y) for x in range(WIDTH)] for y in range(HEIGHT)]


ACROSS = weights(lambda x, y: x)       # growing to the right
DOWN = weights(lambda x, y: y)         # growing downwards


def write_weights(study: Path, rows: list[list[int]]) -> None:
    (study / "weights.txt").write_text("\n".join(" ".join(map(str, r)) for r in rows) + "\n")
