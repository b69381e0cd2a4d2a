"""An epidemic on a contact network, with a testing lab that has a capacity.

The epidemic is ``desim.diffusion``'s SIR (docs/diffusion.md): synchronous, per-contact transmission
``beta`` a day, recovery ``gamma`` a day. What this study adds is a lab, a timed SimPy process that
shares the run's clock with the epidemic:

* from the day the ``testing`` layer is switched on (a scheduled event at ``$testing_starts``), each
  person who became infectious that day seeks a test with probability ``seek``;
* the lab is a ``simpy.Resource`` with ``capacity`` tests running at once; a test takes
  ``turnaround_hours``; people queue for it;
* a positive result isolates the person: they transmit no more, which in SIR terms removes them
  (state ``R``, ``isolated`` true). A result that comes back after the person has recovered
  changes nothing.

So the lab's capacity decides how much of the epidemic it can cut: once infections outrun it, the
queue grows and results arrive too late.
"""
from __future__ import annotations

import math

import numpy as np
import simpy

from desim import check_parameters
from desim.diffusion import NetworkState, Prevalence


class TestedNetwork(NetworkState):
    """The diffusion model's states (``NetworkState``) plus the lab and who it isolated."""

    def __init__(self, capacity: int = 5, turnaround_hours: float = 12.0, seek: float = 0.5, **args):
        super().__init__(**args)
        self.capacity, self.turnaround_hours, self.seek = int(capacity), float(turnaround_hours), float(seek)
        check_parameters("epidemic_testing", [
            ("capacity", self.capacity >= 1, f"the lab's tests at a time, must be at least 1 (got {self.capacity})"),
            ("turnaround_hours", 0.0 <= self.turnaround_hours < math.inf,
             f"must be 0 or more (got {self.turnaround_hours:g})"),
            ("seek", 0.0 <= self.seek <= 1.0, f"a probability, must be in [0, 1] (got {self.seek:g})")])

    def reset(self, seed):
        super().reset(seed)
        self.lab = simpy.Resource(self.ctx.sim, capacity=self.capacity)
        self.isolated = np.zeros(self.n, bool)
        self.tests_done = 0

    def end_step(self, t):
        """Who became infectious today goes for a test, once testing has started."""
        if not self.ctx.interventions.value("testing"):
            return
        infectious = self.model.code["I"]
        newly = np.flatnonzero((self.state == infectious) & (self.since == t))
        seekers = newly[self.ctx.rng("testing").random(len(newly)) < self.seek]
        for person in seekers.tolist():
            self.ctx.sim.process(self.test(person))

    def test(self, person: int):
        """One test: queue at the lab, wait for the result, isolate if still infectious."""
        with self.lab.request() as turn:
            yield turn
            yield self.ctx.sim.timeout(self.ctx.clock.hours(self.turnaround_hours))
        self.tests_done += 1
        if self.state[person] == self.model.code["I"]:
            self.state[person] = self.model.code["R"]
            self.since[person] = self.ctx.step + 1      # seen from the next day's observation on
            self.isolated[person] = True

    def state_columns(self):
        return {**super().state_columns(), "isolated": self.isolated}


class LabMetrics(Prevalence):
    """The epidemic's figures (``Prevalence``) and the lab's: tests done, people waiting, isolated."""

    def collect(self, t, environment, actions):
        out = super().collect(t, environment, actions)
        out["tests_done"] = environment.tests_done
        out["waiting_for_a_test"] = len(environment.lab.queue)
        out["isolated"] = int(environment.isolated.sum())
        return out
