"""Assembling a study into a run: everything a run needs, built and checked, nothing written.

:func:`assemble` turns a loaded study (a ``StudySpec``) into a :class:`Run`: its population, its
network, the SimPy environment and clock, the interventions, the study's components (environment,
behaviour model, metric collector) each given ``ctx``, and which path the run takes (per-agent or
columnar). Study code runs here only where the study asked for it (a population provider, the
components' constructors, the behaviour model's ``reset``), and a failure stops before anything is
recorded. Every run builds its components anew from the refs and args its files record, the rule a branch
and a resume follow: an instance given to ``desim.Study`` is recorded by its arguments and rebuilt here, so
no state it keeps passes into a run. Each component is checked for the methods of its role first
(``desim.study.contract.ROLES``, the rule ``desim.Study`` applies), naming the file and field of one in
the wrong place. ``desim validate`` inspects this object; ``Engine`` runs it.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import simpy

from desim.errors import StudyConfigError
from desim.records import Persona
from desim.run.checks import RunError
from desim.study.clock import Clock
from desim.study.contract import MetricCollector, RunContext, study_path
from desim.study.failures import call
from desim.study.files import StudySpec, check_population
from desim.study.params import named_where_set
from desim.study.rosters import read_roster
from desim.study.interventions import Interventions
from desim.study.network import Network, build_network
from desim.study.refs import build, study_code
from desim.study.rng import Streams
from desim.versions import POPULATION_FILE

if TYPE_CHECKING:
    import networkx as nx     # a run without a graph never loads networkx


class RunClock(simpy.Environment):
    """The run's SimPy environment: SimPy's, but an event at a time that is not a number (a study process's
    ``timeout(float("nan"))``) is refused where it is made. SimPy orders its events in a heap by time, and a
    NaN there breaks the order without a word: later events, a step's close among them, run out of turn.

    A step and each of its rounds open once everything else at their instant has run (``desim.run.engine``),
    so a process that waits by yielding ``timeout(0)`` again and again (a busy wait) would hold the run at
    that instant for ever: past ``same_instant_limit`` zero-delay events at one time it is refused, naming
    the time."""

    same_instant_limit = 2_000_000      # assemble raises it for a population whose set-up needs more

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._instant, self._at_instant = None, 0

    def schedule(self, event, priority=simpy.events.NORMAL, delay=0) -> None:
        if delay != delay:          # NaN (infinity is a time: never)
            raise ValueError(f"an event NaN time units from now (t={self._now}): a delay must be a number")
        if delay == 0:
            if self._now != self._instant:
                self._instant, self._at_instant = self._now, 0
            self._at_instant += 1
            if self._at_instant > self.same_instant_limit:
                raise RuntimeError(
                    f"more than {self.same_instant_limit:,} events at t={self._now} without the clock moving: "
                    "a process keeps scheduling zero-delay events (a wait on timeout(0) in a loop?); a step and "
                    "each round open only once the other events of their instant are done, so wait on an event "
                    "(ctx.sim.event(), a simpy.Store) or a delay instead")
        super().schedule(event, priority, delay)


@dataclass
class Run:
    """One assembled run of a study: plain data, nothing recorded yet."""

    spec: StudySpec
    run_id: str
    streams: Streams
    personas: list[Persona]
    network: Network
    sim: simpy.Environment
    interventions: Interventions
    ctx: RunContext
    environment: Any
    decision: Any
    collector: Any
    path: str                       # "columnar", "state_columns" (per-agent, states as columns) or "agents"
    built_from: dict[str, str] = field(default_factory=dict)   # the study's code as it was when built
    ids: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.ids = self.ctx.agent_ids

    @property
    def root(self) -> Path:
        return self.spec.root

    @property
    def seed(self) -> int:
        return self.spec.simulation.seed

    def code(self) -> dict[str, str]:
        """The study's code as its version records it (``desim.study.refs.study_code``), as it was when the run
        was built from it: a run that then waits for a store another process holds records the code it runs,
        not an edit made during the wait."""
        return self.built_from or study_code(self.spec)

    @property
    def n_steps(self) -> int:
        return self.spec.simulation.n_steps

    @property
    def rounds(self) -> int:
        return self.spec.rounds

    @property
    def graph(self) -> nx.Graph:
        return self.network.graph

    @property
    def columnar(self) -> bool:
        return self.path == "columnar"

    @property
    def states_as_columns(self) -> bool:
        """Whether each step's states come from ``state_columns`` (both paths may)."""
        return self.path != "agents"


def assemble(spec: StudySpec, run_id: str | None = None) -> Run:
    """Build ``spec`` into a :class:`Run` (see the module docstring); nothing is written."""
    root, sim_cfg = spec.root, spec.simulation
    run_id = run_id or f"r{uuid.uuid4().hex[:10]}"
    streams = Streams(sim_cfg.seed)
    personas = _population(spec, streams)
    interaction = spec.population.interaction
    network_streams = streams if interaction.graph_seed is None else Streams(interaction.graph_seed)
    try:
        network = build_network(interaction, personas, seed=int(network_streams.numpy("network").integers(2**31)),
                                root=root)
    except StudyConfigError:
        raise
    except Exception as e:      # a generator refusing its settings (networkx's errors, or ValueError)
        if not (isinstance(e, ValueError) or type(e).__module__.startswith("networkx")):
            raise
        raise StudyConfigError(root / POPULATION_FILE,
                               [("interaction", f"cannot build a '{spec.population.interaction.kind}' "
                                                f"network over {len(personas)} agents: {e}")]) from None
    check_population(spec, personas)
    sim = RunClock()
    sim.same_instant_limit = max(RunClock.same_instant_limit, 20 * len(personas))
    interventions = Interventions(spec.environment.layers, spec.environment.scheduled_events,
                                  spec.environment.broadcasts, personas)
    ctx = RunContext(sim=sim, clock=Clock(sim_cfg.time_unit), streams=streams, personas=personas, network=network,
                     interventions=interventions, params=dict(sim_cfg.parameters), n_steps=sim_cfg.n_steps,
                     rounds=spec.rounds, seed=sim_cfg.seed, run_id=run_id, occupy=_no_engine_yet, root=root,
                     llm=sim_cfg.llm)
    # each run builds its own components from the refs and args the files record, as a branch or a resume
    # does: an instance a desim.Study was given is recorded by its arguments, never run itself, so nothing
    # it keeps on self (a count, a cache, self.ctx) passes from one run to the next or between runs at once
    try:
        environment = build(spec.environment.provider, root, "environment/environment.json: provider", "environment")
        decision = build(sim_cfg.decision, root, "simulation/simulation.json: decision", "decision")
        collector = (build(sim_cfg.collector, root, "simulation/simulation.json: collector", "collector")
                     if sim_cfg.collector else MetricCollector())
    except StudyConfigError as e:       # a model refusing an argument that held "$name": named where it is set
        raise named_where_set(e, spec) from e.__cause__
    for part in (environment, decision, collector):
        part.ctx = ctx
    ctx.decision = decision
    call(decision.reset, sim_cfg.seed, root=root)   # before anything is written: a bad llm block stops here
    return Run(spec, run_id, streams, personas, network, sim, interventions, ctx, environment, decision, collector,
               study_path(environment, decision), built_from=study_code(spec))


def _no_engine_yet(agent_id: str, errand) -> None:
    raise RunError(f"agent {agent_id}: ctx.occupy works once the run starts (in reset or later), "
                   "not while the study is being built")


def _population(spec: StudySpec, streams: Streams) -> list[Persona]:
    pop, root = spec.population, spec.root
    if pop.personas is not None:
        return list(pop.personas)
    if pop.roster is not None:
        return read_roster(root, pop.roster)
    try:
        provider = build(pop.provider, root, "population/population.json: provider", "population")
    except StudyConfigError as e:
        raise named_where_set(e, spec) from e.__cause__
    personas = partial(call, root=root, step="population")(provider.personas, streams.numpy("population"))
    if not isinstance(personas, list):
        raise RunError(f"population provider {pop.provider.ref}: returned {type(personas).__name__}, "
                       "not a list of Persona")
    # checked in bulk (a set of the types, a set of the ids), then item by item only to name the culprit
    if not all(issubclass(t, Persona) for t in set(map(type, personas))):
        i, p = next((i, p) for i, p in enumerate(personas) if not isinstance(p, Persona))
        raise RunError(f"population provider {pop.provider.ref}: item {i} is a "
                       f"{type(p).__name__}, not a Persona")
    ids = [p.agent_id for p in personas]
    # what Persona(...) validates and Persona.model_construct(...) takes on trust: a text id, a dict of attributes
    if set(map(type, ids)) - {str} or "" in ids or set(type(p.attributes) for p in personas) - {dict}:
        i, p = next((i, p) for i, p in enumerate(personas)
                    if type(p.agent_id) is not str or not p.agent_id or type(p.attributes) is not dict)
        what = (f"agent_id {p.agent_id!r} is {type(p.agent_id).__name__}, not text (str({p.agent_id!r}), say)"
                if type(p.agent_id) is not str else "agent_id is empty" if not p.agent_id else
                f"attributes is {type(p.attributes).__name__}, not a dict")
        raise RunError(f"population provider {pop.provider.ref}: item {i}: {what}")
    if len(set(ids)) != len(ids):
        seen: set[str] = set()
        duplicate = next(a for a in ids if a in seen or seen.add(a))
        raise RunError(f"population provider {pop.provider.ref}: duplicate agent_id '{duplicate}'")
    return personas
