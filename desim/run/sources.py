"""Where a step's actions come from: the study's behaviour model, or stored actions.

The engine asks its source two things: whether a step is replayed (``stored(t)``: the step's
actions, one list or ``ActionColumns`` per round, or ``None``), and, for a step that is not, who
decides (``model``). A replayed step goes through ``advance_to`` and ``apply`` only: nobody observes
or decides, which is what makes a branch's steps before its fork equal to its parent's.
"""
from __future__ import annotations

from typing import Any


class Decide:
    """Every step decided by the study's behaviour model."""

    def __init__(self, model: Any):
        self.model = model

    def stored(self, t: int) -> list | None:
        return None


class Replay(Decide):
    """The stored actions of a run for the steps in ``steps`` (``{step: [round 0's actions, ...]}``,
    each tagged ``source = "replay"``), then ``model`` decides from the first step without them."""

    def __init__(self, steps: dict[int, list], model: Any):
        super().__init__(model)
        self.steps = steps

    def stored(self, t: int) -> list | None:
        return self.steps.get(t)
