"""What a study implements: an environment, a population, a behaviour model and
a metric collector, with the names the seed page uses.

Each base class is small on purpose. The engine sets ``self.ctx`` (a
:class:`RunContext`) on every component before ``reset`` so a component can
reach the SimPy environment, the clock, the population, the network and its
own random stream without globals.

Two ways to write a study:

* per agent (the easy path, and the one LLM studies use):
  ``observe_batch`` returns ``Observation`` objects, ``decide_batch`` returns
  ``Action`` objects, ``apply`` takes them, ``agent_state`` gives each row
  (or, for many agents, ``state_columns`` gives every row's state at once);
* columnar (for large rule-based studies): ``observe_columns``,
  ``decide_columns``, ``apply_columns`` and ``state_columns`` exchange numpy
  arrays indexed by agent position. Same engine loop, same store; a round
  costs the arithmetic, not a Python object per agent.
"""
from __future__ import annotations

import difflib
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from desim.errors import StopRun  # noqa: F401 - where studies written for an older desim import it
from desim.records import Action, ActionColumns, Message, Observation, Persona

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx
    import pyarrow as pa
    import simpy

    from desim.study.clock import Clock
    from desim.study.interventions import Interventions
    from desim.study.rng import Streams


@dataclass
class RunContext:
    """Everything about the current run that study code may use, as ``self.ctx``.

    Set once per run:

    * ``sim`` -- the SimPy environment (``ctx.sim.now``, ``ctx.sim.process(...)``,
      ``simpy.Resource(ctx.sim)``); sim time ``t`` is step ``t``;
    * ``clock`` -- durations finer than a step (``ctx.clock.minutes(45)`` is a
      fraction of a step);
    * ``streams`` -- named random streams of the run seed (``ctx.streams.numpy(name)``);
    * ``personas`` (population order), ``agent_ids`` (the same order) and
      ``index`` (agent id -> position); ``graph`` -- the study's networkx graph, and ``network`` the
      same edges as arrays of positions with their numeric attributes (``network.source``,
      ``network.target``, ``network.attributes["weight"]``);
    * ``interventions`` -- the environment layers and per-agent attributes the
      scheduled events change: ``value(layer)``, ``attribute(agent_id, name)``,
      ``active_broadcasts(agent_id=None)`` (a list of ``{name, channel, content}``);
    * ``params`` (``simulation.json`` parameters after ``--set``), ``n_steps``,
      ``rounds`` (``interaction_rounds`` clamped to at least 1), ``seed``,
      ``run_id``, ``root`` (the study folder), ``llm`` (the ``llm`` block);
    * ``decision`` -- the run's behaviour model, so an environment can read what it decides over (a
      diffusion model's states); ``shared`` -- a dict the components of one run share what they
      build once in (a sparse form of the network); ``stored_until`` -- in a resumed run, the last step
      already stored: steps up to it are re-executed to rebuild the state, and must come out as they were
      (an LLM decision takes them from the reply cache and never asks again).

    Kept current by the engine:

    * ``step`` -- the step being run (0 during ``reset`` and the initial state;
      between steps, the step that last started: a study process at t = 1.5
      sees 1);
    * ``round_idx`` -- the round being run, ``0..rounds-1`` (read it in
      ``apply``, which gets only the actions); outside a round (``advance_to``, ``end_step``, a study
      process between steps) the round that last ran. A study process that posts to the bus between
      steps stamps its message with ``ctx.step`` and a round of its choosing: step ``ctx.step``'s rounds
      are over, so only a bus with ``carry_previous_step`` shows it (in every round of the next step),
      and only to the neighbours of its author.

    Methods: ``rng(name)`` returns a ``numpy.random.Generator`` for
    (seed, name, step, round); ``neighbors(agent_id)`` a list of neighbour
    ids; ``persona(agent_id)`` the ``Persona``; ``occupy(agent_id, errand)``
    sends an agent on an errand (a SimPy generator) and returns ``None``: the
    agent skips every round until the generator ends (raises ``RunError`` if
    it is already away). ``occupy`` works from ``reset`` too. ``end_run(reason)`` ends the run after
    the step in progress (the run is ``completed``; ``stop_when`` in simulation.json does the same from
    a metric).
    """

    sim: "simpy.Environment"
    clock: "Clock"
    streams: "Streams"
    personas: list[Persona]
    network: Any                        # desim.study.network.Network
    interventions: "Interventions"
    params: dict[str, Any]
    n_steps: int
    rounds: int
    seed: int
    run_id: str
    occupy: Callable[[str, Any], None]
    root: Path | None = None            # the study folder (caches and files a study keeps)
    llm: dict[str, Any] | None = None   # the ``llm`` block of simulation.json, as loaded
    decision: Any = None                # the run's behaviour model (an environment may read its settings)
    shared: dict[str, Any] = field(default_factory=dict)    # what the components build once for the run
    agent_ids: list[str] = field(init=False)
    step: int = 0
    round_idx: int = 0
    end_reason: str | None = None       # set by end_run: the run ends after the step in progress
    stored_until: int = 0               # a resumed run: steps 1..stored_until are stored and re-executed, not decided anew
    stored_unanswered: frozenset = frozenset()  # and its (step, round, prompt hash) an LLM left unanswered then
    _rngs: dict = field(default_factory=dict, repr=False)
    _index: dict[str, int] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.agent_ids = [p.agent_id for p in self.personas]

    @property
    def index(self) -> dict[str, int]:
        """Each agent's position in population order, by id. Built when first read: a columnar run,
        which works on positions, may never need it (0.03 s and 6 MB a run at 100,000 agents)."""
        if self._index is None:
            self._index = {a: i for i, a in enumerate(self.agent_ids)}
        return self._index

    def end_run(self, reason: str) -> None:
        """End the run after the step in progress closes (that step is kept): the process the study
        models is over (an epidemic died out, a market cleared). The run is ``completed``, with that step
        as its last and ``reason`` recorded (``runs.end_reason``). Called during ``reset`` or step 0, the
        run ends before step 1."""
        self.end_reason = str(reason) or "ended by the study"

    def rng(self, name: str) -> "np.random.Generator":
        """A random stream for ``name`` at the current step and round.

        Draw per-step randomness (decisions, observation noise) from here: the
        stream depends only on (seed, name, step, round), so a branch that
        replays steps without deciding, or a resumed run, draws exactly what
        the original run drew from that step on. Repeated calls in the same
        round return the same generator object, which continues its sequence.
        """
        key = (name, self.step, self.round_idx)
        gen = self._rngs.get(key)
        if gen is None:
            if len(self._rngs) > 64:    # kept small: only this step and round's streams are sure to be needed
                for old in [k for k in self._rngs if k[1:] != key[1:]]:
                    del self._rngs[old]
            gen = self._rngs[key] = self.streams.numpy(f"{name}/{self.step}/{self.round_idx}")
        return gen

    @property
    def graph(self) -> "nx.Graph":
        """The study's network as a networkx graph (built on first use for a network from a file)."""
        return self.network.graph

    def neighbors(self, agent_id: str) -> list[str]:
        """The agent's neighbours in the study's network (the default ``neighbors_fn``)."""
        g = self.graph
        if agent_id not in g:
            return []
        return list(g.predecessors(agent_id)) if g.is_directed() else list(g.neighbors(agent_id))

    neighbors.fixed_network = True      # the run's network does not change: a NeighborFeed may keep its answers

    def persona(self, agent_id: str) -> Persona:
        return self.personas[self.index[agent_id]]


class Component:
    """Anything the engine builds from a ``ref``: it gets ``ctx`` before ``reset``."""

    ctx: RunContext


class EnvironmentProvider(Component):
    """The world the agents live in: it changes, is observed and is acted on.

    Override ``observe_batch``, ``apply`` and ``agent_state``. The default
    ``advance_to`` fires the scheduled events and broadcasts of
    ``environment.json``; call ``super().advance_to(t)`` when overriding it.
    An environment that lets agents talk owns a message bus, by convention in ``self.bus`` (any
    attribute holding a bus or a feed over one is found: :func:`message_buses`).
    """

    bus: Any = None

    def reset(self, seed: int) -> None:
        """Prepare the step-0 world. Create the bus and start study processes here.

        It runs before anything is written: an error here leaves the store untouched."""

    def advance_to(self, t: int) -> list[dict[str, Any]]:
        """Fire step ``t``'s exogenous input, once, before round 0. Returns what fired: the rows of the
        ``events`` table, each a dict with ``kind``, ``name`` and ``detail`` (a JSON-able value).

        It is called with ``t = 0`` too, once, after ``reset`` and before the initial states are kept (the
        events scheduled at step 0): an override that changes the world at every call changes the
        initial states as well.

        An override may add rows of its own to what ``super().advance_to(t)`` returns, to record what a
        study process did since the last step (a news item that arrived at t = 2.3, a price the market
        maker set), as rows of step ``t``::

            def advance_to(self, t):
                fired = super().advance_to(t)
                arrived, self.arrived = self.arrived, []
                return fired + [{"kind": "news", "name": h["headline"], "detail": h} for h in arrived]
        """
        return self.ctx.interventions.fire(t)

    def observe_batch(self, ids: list[str], t: int, round_idx: int) -> list[Observation]:
        raise NotImplementedError(f"{type(self).__name__} must implement observe_batch")

    def apply(self, actions: list[Action]) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement apply")

    def agent_state(self, agent_id: str) -> dict[str, Any]:
        raise NotImplementedError(f"{type(self).__name__} must implement agent_state")

    def end_step(self, t: int) -> None:
        """Dynamics that close step ``t``, once, after the final round's ``apply`` and before
        the panel row is taken (decay, growth, a market clearing). The default does nothing.

        Instead of ``if self.ctx.round_idx == self.ctx.rounds - 1`` inside ``apply``::

            def end_step(self, t):
                for a in self.ctx.agent_ids:
                    self.energy[a] *= 0.9       # recorded in step t's panel row
        """

    def drain_messages(self) -> list[Message] | "pa.Table":
        """Messages posted since the last call, for the ``messages`` table (the collector calls it).

        A list of ``Message``; the same as a dict of lists by field, which is what this default
        returns: ``drain_columns()`` of every bus the environment holds (:func:`message_buses`: ``self.bus``
        by convention, but a bus kept under another name, or only inside a ``NeighborFeed``, is stored
        too), which every ``MessageBus`` gives (``InMemoryMessageBus`` without a ``Message`` object per
        post); or (columnar studies) a pyarrow Table shaped like
        ``desim.messaging.columnar.ColumnarFeed.drain()``: round, author_id, channel, kind, content, audience,
        reply_to (a ``ColumnarFeed`` gives it as its ``drain_columns`` too).
        """
        buses = message_buses(self)
        if not buses:
            return []
        seen = self.__dict__.setdefault("_desim_taken_seen", {})
        for bus in buses:
            taken = getattr(bus, "taken", 0)      # what a study drained itself (desim's buses count it)
            if taken > seen.get(id(bus), 0):
                lost, seen[id(bus)] = taken - seen.get(id(bus), 0), taken
                where = getattr(bus, "taken_at", "")
                raise RuntimeError(
                    f"{lost} messages were drained from {type(self).__name__}'s {type(bus).__name__} before desim "
                    f"stored them (the study calls bus.drain() itself{', at ' + where if where else ''}), so the "
                    "messages table would miss them. From step 0's close on, what a study drains is kept for the "
                    "table; drain at a step's close (end_step), not while setting up, or override drain_messages "
                    "to return what you drain")
        if len(buses) == 1:
            return buses[0].drain_columns()
        return _joined([bus.drain_columns() for bus in buses], type(self).__name__)

    # --- columnar path (optional) -------------------------------------------
    def observe_columns(self, idx: np.ndarray, t: int, round_idx: int) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def apply_columns(self, idx: np.ndarray, actions: "ActionColumns") -> None:
        raise NotImplementedError

    def state_columns(self) -> dict[str, np.ndarray]:
        """Every agent's state as columns in population order (one panel row each).

        Optional on the per-agent path too: an environment without the columnar path
        (no ``observe_columns``) that defines it gives the panel's state from it (one array, or
        list, per field) instead of one ``agent_state`` call and one dict per agent per step;
        the stored panel is the same. An environment written for both paths keeps
        ``agent_state`` on the per-agent one."""
        raise NotImplementedError


def message_buses(env: Any) -> list:
    """The message buses ``env`` holds, each once: ``self.bus`` (the convention, whatever its type) first,
    then any other attribute that is one of desim's buses (a ``MessageBus``, the columnar feed) or a
    ``NeighborFeed`` over one, alone or in a dict or list of them (a feed per channel). The seed leaves the
    bus's name to the study, so a bus kept as ``self.chatter`` or only inside a feed is found and its
    messages stored, not lost. Known by class name: this layer does not import the messaging one."""
    found: dict[int, Any] = {}
    if getattr(env, "bus", None) is not None:
        found[id(env.bus)] = env.bus

    def add(value: Any) -> bool:
        bus = value.bus if _is(value, _FEEDS) else value
        if not _is(bus, _BUSES):
            return False
        found.setdefault(id(bus), bus)
        return True

    for value in list(getattr(env, "__dict__", {}).values()):
        if isinstance(value, (dict, list, tuple)):
            items = list(value.values()) if isinstance(value, dict) else list(value)
            if items and add(items[0]):         # a collection of buses or feeds; not one of values
                for item in items[1:]:
                    add(item)
        else:
            add(value)
    return list(found.values())


_BUSES = frozenset({("desim.messaging.bus", "MessageBus"), ("desim.messaging.columnar", "ColumnarFeed")})
_FEEDS = frozenset({("desim.messaging.feed", "NeighborFeed")})


def _is(value: Any, classes: frozenset[tuple[str, str]]) -> bool:
    """``value`` is an instance of one of ``classes`` (module, name), or of a subclass of one."""
    return _type_is(type(value), classes)


@functools.lru_cache(maxsize=1024)
def _type_is(cls: type, classes: frozenset[tuple[str, str]]) -> bool:
    # once per type: the collector asks of every attribute of the environment at every step's close
    return any((c.__module__, c.__name__) in classes for c in cls.__mro__)


def _joined(parts: list, owner: str):
    """Several buses' drained messages as one: their dicts of lists joined field by field, or their
    Arrow tables (the columnar feed's) concatenated."""
    parts = [p for p in parts if (p.num_rows if hasattr(p, "num_rows") else len(next(iter(p.values()), [])))] \
        or parts[:1]            # a bus with nothing posted joins nothing (an unused one beside a columnar feed)
    if len(parts) == 1:
        return parts[0]
    if all(isinstance(p, dict) for p in parts):
        keys = list(parts[0])
        return {k: [v for p in parts for v in p.get(k, [])] for k in keys}
    if all(hasattr(p, "schema") for p in parts):
        import pyarrow as pa
        return pa.concat_tables(parts, promote_options="default")
    raise RuntimeError(f"{owner} holds message buses of both paths (an InMemoryMessageBus and a ColumnarFeed); "
                       "override drain_messages to return their messages in one form")


class PopulationProvider(Component):
    """Builds the personas when ``population.json`` names a provider instead of listing them."""

    def personas(self, rng: np.random.Generator) -> list[Persona]:
        raise NotImplementedError


class DecisionModel(Component):
    """Maps observations plus memories to actions, one action per observed agent at most.

    A model may also define, as methods of its class, what the run reads back from an LLM decision
    (:class:`desim.llm.LLMDecision` has them all): ``drain_calls()`` (the step's ``llm_calls`` rows),
    ``counters()`` (its totals, kept with the run's counters), ``warnings()`` (said at the run's end) and
    ``resume_replays()`` (whether a resume must replay its stored steps rather than decide them again).
    The run finds them with :func:`model_hook`, so an attribute of the same name a study keeps on its
    model (``self.counters = {...}``) stays the study's own."""

    def reset(self, seed: int) -> None:
        """Prepare for a run; ``self.ctx`` is set. The engine calls it while building the run,
        before anything is written, so a configuration error stops the run cleanly."""

    def decide_batch(self, observations: list[Observation], memories: Sequence[list[Action]]) -> list[Action]:
        """One action per observation at most. ``memories[i]`` lists the ``i``-th agent's last
        ``memory_window`` final-round actions, oldest first (a read-only sequence, looked up when read)."""
        raise NotImplementedError(f"{type(self).__name__} must implement decide_batch")

    def decide_columns(self, obs: dict[str, np.ndarray], idx: np.ndarray, t: int,
                       round_idx: int) -> "ActionColumns":
        raise NotImplementedError

    def close(self) -> None:
        """Release what the model holds (HTTP clients, caches)."""


def model_hook(model: Any, name: str) -> Callable | None:
    """The method ``name`` that ``model``'s class defines, bound to ``model``, or None: a value the instance
    holds under that name (a study's ``self.warnings = []``) is not taken for the hook."""
    fn = getattr(type(model), name, None)
    return fn.__get__(model) if callable(fn) and hasattr(fn, "__get__") else None


class MetricCollector(Component):
    """Produces one row of aggregate figures per step."""

    def collect(self, t: int, environment: EnvironmentProvider,
                actions: list[Action] | "ActionColumns" | None) -> dict[str, float]:
        """Figures for step ``t``; ``actions`` are the final round's (``None`` at step 0)."""
        return {}


# --- what each role must give the engine ---------------------------------------------------------
@dataclass(frozen=True)
class Role:
    """What a component in one role gives the engine: ``always`` the methods it calls on every run, and
    ``ways`` the methods of each path a component may take (one complete way is enough: a columnar
    environment needs no ``observe_batch``). A subclass of ``base`` inherits every one, but those of a way
    only as placeholders that raise ``NotImplementedError`` (:data:`PLACEHOLDERS`), which the rule counts as
    missing: it refuses a subclass that wrote no complete way (a misspelt ``decide_batch``), a component of
    another kind, and a duck-typed one without what the engine calls. ``implements`` says it in a message."""

    base: type
    noun: str                           # what the role is called in a message: "a collector implements ..."
    always: tuple[str, ...]
    ways: tuple[tuple[str, ...], ...]
    implements: str


ROLES: dict[str, Role] = {
    "environment": Role(EnvironmentProvider, "an environment provider",
                        ("reset", "advance_to", "end_step", "drain_messages"),
                        (("observe_batch", "apply", "agent_state"), ("observe_batch", "apply", "state_columns"),
                         ("observe_columns", "apply_columns", "state_columns")),
                        "observe_batch, apply, agent_state, or observe_columns, apply_columns, state_columns "
                        "on the columnar path"),
    "decision": Role(DecisionModel, "a behaviour model", ("reset", "close"), (("decide_batch",), ("decide_columns",)),
                     "decide_batch, or decide_columns on the columnar path"),
    "collector": Role(MetricCollector, "a collector", (), (("collect",),), "collect"),
    "population": Role(PopulationProvider, "a population provider", (), (("personas",),), "personas"),
}


PLACEHOLDERS = frozenset({EnvironmentProvider.observe_batch, EnvironmentProvider.apply, EnvironmentProvider.agent_state,
                          EnvironmentProvider.observe_columns, EnvironmentProvider.apply_columns,
                          EnvironmentProvider.state_columns, PopulationProvider.personas,
                          DecisionModel.decide_batch, DecisionModel.decide_columns})
"""The base classes' methods that only raise ``NotImplementedError``: a subclass that inherits one has not
written it. Counted as missing, so that a class whose ``decide_batch`` is misspelt (``decide``) is refused
when the study loads, naming it, rather than failing inside desim at the first round of a recorded run."""


def missing_methods(cls: type, role: str) -> list[str]:
    """What ``cls`` lacks to fill ``role`` (see :class:`Role`): nothing when it has every ``always`` method
    and one way complete; else the methods of the nearest way (the first one missing fewest), then the
    ``always`` ones. A method set to ``None`` (``state_columns = None``) is one the class declares it has not;
    one it inherits from the base as a placeholder (:data:`PLACEHOLDERS`) is one it has not written."""
    spec = ROLES[role]

    def lacks(names):
        return sorted(n for n in names if not _written(getattr(cls, n, None)))
    nearest = min((lacks(way) for way in spec.ways), key=len)
    return nearest + lacks(spec.always)


def _written(method: Any) -> bool:
    return callable(method) and method not in PLACEHOLDERS


def misnamed(cls: type, missing: list[str]) -> str:
    """A method of ``cls``'s own whose name is close to one it lacks, as a hint for the error that names the
    lack (``it has decide: rename it?`` for a missing ``decide_batch``), or ``""``: a misspelt method name is
    the usual cause of a missing one. The bases' own methods (``reset``, ``advance_to``, ...) are not its own."""
    bases = {role.base for role in ROLES.values()}
    theirs = {name for base in bases for k in base.__mro__ for name in vars(k)}
    own = sorted({name for k in cls.__mro__ if k is not object and k not in bases for name, value in vars(k).items()
                  if callable(value) and not name.startswith("_") and name not in theirs})
    for name in missing:
        near = [o for o in own if o.startswith(name) or name.startswith(o)] or \
            difflib.get_close_matches(name, own, n=1, cutoff=0.6)
        if near:
            return f"it has {near[0]}: rename it?"
    return ""


def kind_of(cls: type) -> str:
    """What ``cls`` is, for a message about a component in the wrong role: ``a DecisionModel-like class``
    (the first role it fills), ``a DecisionModel subclass`` (one that fills no role yet), or ``a class``."""
    for name, role in ROLES.items():
        if not missing_methods(cls, name):
            base = role.base.__name__
            return f"{'an' if base[0] in 'AEIOU' else 'a'} {base}-like class"
    for role in ROLES.values():
        if isinstance(cls, type) and issubclass(cls, role.base):
            base = role.base.__name__
            return f"{'an' if base[0] in 'AEIOU' else 'a'} {base} subclass"
    return "a class"


def _defined_at(cls: type, name: str) -> int:
    """How far up ``cls``'s method resolution order ``name`` is defined (0: by ``cls`` itself)."""
    return next(i for i, k in enumerate(cls.__mro__) if name in vars(k))


def _overrides(cls: type, base: type, name: str) -> bool:
    """Whether ``cls`` gives its own ``name``; ``name = None`` in a subclass declares it has none."""
    got = getattr(cls, name, None)      # a duck-typed component may not have it at all
    return got is not None and got is not getattr(base, name)


def study_path(environment: Any, decision: Any) -> str:
    """Which way a run talks to the study: ``"columnar"`` when the environment implements
    ``observe_columns`` and the behaviour model ``decide_columns``; else the per-agent path, with the
    panel's states from ``state_columns`` (``"state_columns"``) or from ``agent_state`` per agent
    (``"agents"``).

    The most derived definition decides: a subclass that defines ``agent_state`` below a parent's
    ``state_columns`` means its ``agent_state`` (the panel follows the class the study wrote last).
    An environment written for both paths (it has ``observe_columns``) keeps ``agent_state`` on the
    per-agent one. A subclass declares that it does without a parent's method by setting it to
    ``None`` (``state_columns = None``: its panel comes from ``agent_state``).
    """
    env = type(environment)
    if _overrides(env, EnvironmentProvider, "observe_columns") and \
            _overrides(type(decision), DecisionModel, "decide_columns"):
        return "columnar"
    if _overrides(env, EnvironmentProvider, "state_columns") and \
            not _overrides(env, EnvironmentProvider, "observe_columns"):
        if not _overrides(env, EnvironmentProvider, "agent_state") or \
                _defined_at(env, "state_columns") <= _defined_at(env, "agent_state"):
            return "state_columns"
    return "agents"


def has_state_columns(environment: Any) -> bool:
    """True when a per-agent environment gives its agents' states as columns (see :func:`study_path`)."""
    return study_path(environment, None) == "state_columns"


def has_columnar_path(environment: Any, decision: Any) -> bool:
    """True when both the environment and the decision model implement the columnar methods."""
    return study_path(environment, decision) == "columnar"
