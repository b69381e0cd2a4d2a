"""An environment class for the tests that make a study from classes (``desim.Study``), not from files:
agents on a line, each moving to the ``x`` its action's payload says. Imported, so a study records it as
``line_env:Line`` and a branch or resume in this process rebuilds it; it keeps no state between runs."""
from __future__ import annotations

from desim import EnvironmentProvider, Observation


class Line(EnvironmentProvider):
    """Agent i starts at i; each step every agent moves to what its decision says."""

    def reset(self, seed):
        self.x = {a: float(i) for i, a in enumerate(self.ctx.agent_ids)}

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, local_physical={"x": self.x[a]}) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.x[a.agent_id] = a.payload["x"]

    def agent_state(self, agent_id):
        return {"x": self.x[agent_id]}
