"""A small study whose code fails on request, at one named point, for the error tests.

``write_study(root, fail="apply")`` makes ``Env.apply`` raise ``KeyError('topik')``
at step 2, round 1. Every raising line carries a ``# fail:<point>`` marker, so a
test finds its line number with :func:`line_of` instead of hard-coding it.
"""
from __future__ import annotations

import json
from pathlib import Path

MODEL = '''
from desim import Action, DecisionModel, EnvironmentProvider, MetricCollector, Observation, Persona, PopulationProvider
from desim import InMemoryMessageBus, Message

AT = 2          # the step at which a failure happens
ROUND = 1       # and the round, for round-level points


class Pop(PopulationProvider):
    def __init__(self, n=4, fail=None):
        self.n, self.fail = n, fail

    def personas(self, rng):
        if self.fail == "personas":
            {}["topik"]  # fail:personas
        return [Persona(agent_id=f"p{i}", attributes={"group": "a" if i % 2 else "b"}) for i in range(self.n)]


class Env(EnvironmentProvider):
    def __init__(self, fail=None):
        self.fail = fail
        if fail == "__init__":
            {}["topik"]  # fail:__init__

    def reset(self, seed):
        self.x = {a: 0.0 for a in self.ctx.agent_ids}
        if self.fail == "reset":
            {}["topik"]  # fail:reset
        if self.fail == "process":
            self.ctx.sim.process(self.ticker())
        if self.fail == "errand":
            self.ctx.sim.process(self.dispatch())
        if self.fail == "post":
            self.bus = InMemoryMessageBus()
            self.ctx.sim.process(self.newsroom())

    def ticker(self):
        yield self.ctx.sim.timeout(AT - 0.5)
        {}["topik"]  # fail:process

    def newsroom(self):
        """A news process posting in an agent's name: the agent is not to blame for its content."""
        yield self.ctx.sim.timeout(AT - 0.5)
        self.bus.post(Message(author_id="p1", step=self.ctx.step, round=0, content={"tags": {"a"}}))  # fail:post

    def dispatch(self):
        yield self.ctx.sim.timeout(AT - 0.5)
        self.ctx.occupy("p1", self.errand())

    def errand(self):
        yield self.ctx.sim.timeout(0.1)
        {}["topik"]  # fail:errand

    def advance_to(self, t):
        if self.fail == "advance_to" and t == AT:
            {}["topik"]  # fail:advance_to
        if self.fail == "event_row" and t == AT:
            return super().advance_to(t) + [{"name": "headline", "detail": {"at": 1.5}}]
        if self.fail == "event_detail" and t == AT:
            return super().advance_to(t) + [{"kind": "news", "name": "headline", "detail": {"at": float("nan")}}]
        return super().advance_to(t)

    def observe_batch(self, ids, t, round_idx):
        if self.fail == "observe_batch" and t == AT and round_idx == ROUND:
            {}["topik"]  # fail:observe_batch
        return [Observation(agent_id=a, step=t, round_idx=round_idx) for a in ids]

    def apply(self, actions):
        if self.fail == "apply" and self.ctx.step == AT and self.ctx.round_idx == ROUND:
            {}["topik"]  # fail:apply
        for a in actions:
            self.x[a.agent_id] += a.payload["v"]

    def end_step(self, t):
        if self.fail == "end_step" and t == AT:
            {}["topik"]  # fail:end_step

    def agent_state(self, agent_id):
        if self.fail == "agent_state" and self.ctx.step == AT and agent_id == "p2":
            {}["topik"]  # fail:agent_state
        return {"x": self.x[agent_id]}


class Decide(DecisionModel):
    def __init__(self, fail=None):
        self.fail = fail

    def reset(self, seed):
        if self.fail == "reset":
            {}["topik"]  # fail:decision_reset

    def decide_batch(self, observations, memories):
        if self.fail == "decide_batch" and self.ctx.step == AT and self.ctx.round_idx == ROUND:
            {}["topik"]  # fail:decide_batch
        return [Action(agent_id=o.agent_id, step=o.step, kind="move", payload={"v": 1.0}) for o in observations]


class Metrics(MetricCollector):
    def __init__(self, fail=None, metric=()):
        self.fail, self.metric = fail, metric   # metric: the value of "m" at steps 0, 1, ... (the last one on)

    def collect(self, t, environment, actions):
        if self.fail == "collect" and t == AT:
            {}["topik"]  # fail:collect
        if self.metric:
            return {"m": self.metric[min(t, len(self.metric) - 1)]}
        return {"mean_x": sum(environment.x.values()) / len(environment.x)}
'''


def line_of(root: Path, point: str) -> int:
    """The line of ``model.py`` marked ``# fail:<point>``."""
    for n, line in enumerate((root / "model.py").read_text().splitlines(), 1):
        if line.rstrip().endswith(f"# fail:{point}"):
            return n
    raise LookupError(point)


def write_study(root: Path, *, env: dict | None = None, decision: dict | None = None,
                collector: dict | None = None, population: dict | None = None,
                simulation: dict | None = None, environment: dict | None = None,
                study: dict | None = None, n_steps: int = 4) -> Path:
    """The study at ``root``; the keyword dicts update the component args or the files."""
    for sub in ("simulation", "population", "environment"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "model.py").write_text(MODEL)
    (root / "study.json").write_text(json.dumps({"id": root.name, "display_metrics": [], **(study or {})}))
    (root / "simulation" / "simulation.json").write_text(json.dumps({
        "n_steps": n_steps, "interaction_rounds": 2, "seed": 3,
        "decision": {"ref": "model:Decide", "args": decision or {}},
        "collector": {"ref": "model:Metrics", "args": collector or {}},
        "parameters": {"n_agents": 4}, **(simulation or {})}))
    (root / "population" / "population.json").write_text(json.dumps({
        "provider": {"ref": "model:Pop", "args": {"n": "$n_agents"}},
        "interaction": {"kind": "none"}, **(population or {})}))
    (root / "environment" / "environment.json").write_text(json.dumps({
        "provider": {"ref": "model:Env", "args": env or {}}, "layers": {"level": 1.0},
        **(environment or {})}))
    return root


def edit(path: Path, fn) -> None:
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))
